import { AppError, isAppError } from '../../common/errors';
import { decodePayload, EventKind, type EventPayloads } from '../../common/event-kinds';
import { CompactMmr } from '../journal/compact-mmr';
import { bytesEqual, toHex } from '../journal/hex';
import { LeafHasher } from '../journal/leaf-digest';
import { leafNodePosition, mmrSize, peaksForLeafCount } from '../journal/mmr-layout';
import { mmrRoot } from '../journal/mmr-root';
import { DIGEST_BYTES, type Sha256 } from '../journal/sha256';
import { storedSignedRootOf, type StoredSignedRoot } from './append-batch';
import { decodeHeadRecord, type HeadRecord } from './head-record';
import type { KvOp, KvStore } from './level-kv';
import {
  decodeEventValue,
  decodeFence,
  eventKey,
  fenceKey,
  headKey,
  nodeKey,
  positionOfKey,
  positionRange,
  RecordTag,
} from './store-keys';

/** A partition's state once open() has checked it. */
export interface PartitionState {
  /** Next position; the event at head − 1 is `lastRoot`. */
  head: number;
  /** Frontier over `head` leaves. */
  mmr: CompactMmr;
  readonly genesisKeyId: string;
  lastRoot: StoredSignedRoot;
  /**
   * The highest fencing token an append to the partition was accepted with (0 when none
   * carried one); an append with a lower token is refused.
   */
  fence: number;
}

/** What open() did with one partition. */
export type RecoveryOutcome =
  | {
      readonly status: 'ok';
      readonly state: PartitionState;
      /** Never-acknowledged records past the head that were deleted. */
      readonly droppedEvents: number;
      readonly droppedNodes: number;
    }
  | { readonly status: 'refused'; readonly error: AppError };

async function lastPosition(
  kv: KvStore,
  partition: string,
  tag: typeof RecordTag.Event | typeof RecordTag.Node,
): Promise<number | undefined> {
  for await (const key of kv.keys({ ...positionRange(partition, tag), reverse: true, limit: 1 })) {
    return positionOfKey(key);
  }
  return undefined;
}

async function keysFrom(
  kv: KvStore,
  partition: string,
  tag: typeof RecordTag.Event | typeof RecordTag.Node,
  from: number,
): Promise<KvOp[]> {
  const ops: KvOp[] = [];
  for await (const key of kv.keys(positionRange(partition, tag, from))) {
    ops.push({ type: 'del', key });
  }
  return ops;
}

/**
 * Checks one partition's tail on open and rebuilds its in-memory state.
 *
 * Every batch the store writes is one atomic LevelDB write holding the events, their MMR
 * nodes, the closing `signed_root` and the new head record; an append is acknowledged
 * only after that write is durable. So the head record names exactly the acknowledged
 * prefix, and:
 *
 * 1. No head record: the partition was never acknowledged, but a lone record without a
 *    head cannot come from our writer (the first batch writes the head too), so nothing
 *    is deleted: the partition is refused (`data_loss`) and kept for forensics.
 * 2. Events at positions ≥ head, or nodes at positions ≥ size(head), were never
 *    acknowledged: they are left by a batch whose durable write reported failure and was
 *    then overwritten by a shorter retry, or by a torn write. They are deleted in one
 *    `sync` write, and the counts reported.
 * 3. Then the tail must be whole, else the partition is refused (`data_loss`) and other
 *    partitions keep working:
 *    - the event at head − 1 exists, is a `signed_root` whose `leaf_count` is head − 1;
 *    - the node at size(head) − 1 exists (the last node the last append wrote);
 *    - the peak nodes of `head` leaves equal the peaks in the head record (which become
 *      the in-memory frontier);
 *    - the node of leaf head − 1 is the leaf digest of the stored `signed_root` event;
 *    - the root computed from the stored peak nodes of head − 1 leaves equals the root
 *      that `signed_root` carries.
 * 4. The fencing mark, when present, is one u64 (else `data_loss`); absent means 0.
 *
 * These are O(log n) reads per partition. They tie the head, the events, the nodes and
 * the last signed root together; they do not re-check the whole journal or any signature
 * (that is `verify`).
 *
 * @throws the engine's error when a read or the drop write fails (damage is not thrown:
 *   it comes back as a `refused` outcome).
 */
export async function recoverPartition(
  kv: KvStore,
  hash: Sha256,
  partition: string,
): Promise<RecoveryOutcome> {
  try {
    return await recover(kv, hash, partition);
  } catch (error) {
    if (isAppError(error) && error.code === 'data_loss') return { status: 'refused', error };
    throw error;
  }
}

function refuse(partition: string, problem: string, details: Record<string, number> = {}): never {
  throw new AppError(
    'data_loss',
    `${partition} is refused: ${problem}. Acknowledged events may be missing or damaged; ` +
      'restore the partition from a backup (run verify for details). Other partitions keep working.',
    { details: { partition, ...details } },
  );
}

/** The head record, checked to name a whole batch. */
async function readHeadRecord(kv: KvStore, partition: string): Promise<HeadRecord> {
  const headBytes = await kv.get(headKey(partition));
  if (headBytes === undefined) {
    refuse(partition, 'it holds events or MMR nodes but no head record');
  }
  const record = decodeHeadRecord(headBytes, partition);
  if (record.head < 2) {
    refuse(
      partition,
      `the head record says ${String(record.head)} events (a batch writes at least 2)`,
    );
  }
  return record;
}

/**
 * The records past the head (events at ≥ head, nodes at ≥ size(head)) as deletions, once
 * the events below the head are shown to reach head − 1.
 */
async function unacknowledgedTail(
  kv: KvStore,
  partition: string,
  head: number,
): Promise<{ drops: KvOp[]; droppedEvents: number; droppedNodes: number }> {
  const size = mmrSize(head);
  const lastEvent = await lastPosition(kv, partition, RecordTag.Event);
  const lastNode = await lastPosition(kv, partition, RecordTag.Node);
  const drops: KvOp[] = [];
  if (lastEvent !== undefined && lastEvent >= head) {
    drops.push(...(await keysFrom(kv, partition, RecordTag.Event, head)));
  }
  const droppedEvents = drops.length;
  if (lastNode !== undefined && lastNode >= size) {
    drops.push(...(await keysFrom(kv, partition, RecordTag.Node, size)));
  }
  const lastKept = lastEvent === undefined ? undefined : Math.min(lastEvent, head - 1);
  if (lastKept === undefined || lastKept < head - 1) {
    refuse(
      partition,
      `the head record says ${String(head)} events but the last stored event is ` +
        `${lastKept === undefined ? 'none' : String(lastKept)}`,
      { head },
    );
  }
  return { drops, droppedEvents, droppedNodes: drops.length - droppedEvents };
}

type SignedRootFields = EventPayloads[typeof EventKind.SignedRoot];

/** The records at the tail that {@link recover} checks, read in one go. */
interface TailRecords {
  readonly fence: Uint8Array | undefined;
  /** The event at head − 1 (the last signed root). */
  readonly lastEvent: Uint8Array;
  /** The node of leaf head − 1. */
  readonly leaf: Uint8Array | undefined;
  /** The peak nodes of `head` leaves. */
  readonly headPeaks: readonly (Uint8Array | undefined)[];
  /** The peak nodes of head − 1 leaves (under the last signed root). */
  readonly rootPeaks: readonly (Uint8Array | undefined)[];
}

async function readTail(kv: KvStore, partition: string, head: number): Promise<TailRecords> {
  const size = mmrSize(head);
  const rootPosition = head - 1;
  const lastRootPeaks = peaksForLeafCount(rootPosition).map((p) => p.position);
  const headPeaks = peaksForLeafCount(head).map((p) => p.position);
  const [fence, lastEvent, lastNode, leaf, ...peakValues] = await kv.getMany([
    fenceKey(partition),
    eventKey(partition, rootPosition),
    nodeKey(partition, size - 1),
    nodeKey(partition, leafNodePosition(rootPosition)),
    ...headPeaks.map((p) => nodeKey(partition, p)),
    ...lastRootPeaks.map((p) => nodeKey(partition, p)),
  ]);
  if (lastEvent === undefined)
    refuse(partition, `event ${String(rootPosition)} is missing`, { head });
  if (lastNode === undefined) {
    refuse(
      partition,
      `MMR node ${String(size - 1)}, the last one for ${String(head)} events, is missing`,
      { head },
    );
  }
  return {
    fence,
    lastEvent,
    leaf,
    headPeaks: peakValues.slice(0, headPeaks.length),
    rootPeaks: peakValues.slice(headPeaks.length),
  };
}

/** The last event, checked to be a `signed_root` over head − 1 leaves. */
function lastSignedRoot(
  partition: string,
  head: number,
  value: Uint8Array,
): { kind: string; payload: Uint8Array; fields: SignedRootFields } {
  const rootPosition = head - 1;
  const { kind, payload } = decodeEventValue(value, partition, rootPosition);
  if (kind !== EventKind.SignedRoot) {
    refuse(
      partition,
      `the last event (${String(rootPosition)}) is ${kind}, not signed_root: a batch was cut short`,
      { head },
    );
  }
  let fields;
  try {
    fields = decodePayload(EventKind.SignedRoot, payload);
  } catch {
    refuse(partition, `the signed_root at ${String(rootPosition)} does not parse`, { head });
  }
  if (fields.leafCount !== rootPosition || fields.root.length !== DIGEST_BYTES) {
    refuse(
      partition,
      `the signed_root at ${String(rootPosition)} covers ${String(fields.leafCount)} leaves, not ${String(rootPosition)}`,
      { head },
    );
  }
  return { kind, payload, fields };
}

/**
 * The MMR tail, checked: the stored peaks of `head` leaves are the head record's frontier,
 * the node of leaf head − 1 is the last event's leaf digest, and the stored peaks of
 * head − 1 leaves hash to the root the last `signed_root` carries.
 */
function checkTailNodes(
  hash: Sha256,
  partition: string,
  record: HeadRecord,
  tail: TailRecords,
  last: { readonly kind: string; readonly payload: Uint8Array; readonly root: Uint8Array },
): void {
  const { head } = record;
  const rootPosition = head - 1;
  const matches = tail.headPeaks.every((node, i) => {
    const peak = record.peaks[i];
    return node !== undefined && peak !== undefined && bytesEqual(node, peak);
  });
  if (!matches)
    refuse(partition, `the MMR peak nodes disagree with the head record's frontier`, { head });
  const leaf = new LeafHasher(hash).digest(rootPosition, last.kind, last.payload);
  if (tail.leaf === undefined || !bytesEqual(tail.leaf, leaf)) {
    refuse(
      partition,
      `the MMR node of event ${String(rootPosition)} is not that event's leaf digest`,
      { head },
    );
  }
  const { rootPeaks } = tail;
  if (rootPeaks.some((p) => p === undefined || p.length !== DIGEST_BYTES)) {
    refuse(partition, `an MMR peak under the last signed root is missing`, { head });
  }
  const recomputed = mmrRoot(
    hash,
    mmrSize(rootPosition),
    rootPeaks.filter((p): p is Uint8Array => p !== undefined),
  );
  if (!bytesEqual(recomputed, last.root)) {
    refuse(
      partition,
      `the stored MMR nodes hash to root ${toHex(recomputed)}, but the last signed_root carries ${toHex(last.root)}`,
      { head },
    );
  }
}

async function recover(kv: KvStore, hash: Sha256, partition: string): Promise<RecoveryOutcome> {
  const record = await readHeadRecord(kv, partition);
  const { head } = record;
  const { drops, droppedEvents, droppedNodes } = await unacknowledgedTail(kv, partition, head);
  const tail = await readTail(kv, partition, head);
  const { kind, payload, fields } = lastSignedRoot(partition, head, tail.lastEvent);
  checkTailNodes(hash, partition, record, tail, { kind, payload, root: fields.root });
  // Written in the same batch as the events it came with, so it is as old as the head.
  const fence = tail.fence === undefined ? 0 : decodeFence(tail.fence, partition);
  if (drops.length > 0) await kv.write(drops, true);
  return {
    status: 'ok',
    droppedEvents,
    droppedNodes,
    state: {
      head,
      mmr: CompactMmr.fromPeaks(hash, head, record.peaks),
      genesisKeyId: record.genesisKeyId,
      lastRoot: storedSignedRootOf(head - 1, fields),
      fence,
    },
  };
}
