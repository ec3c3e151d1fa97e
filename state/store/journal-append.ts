/**
 * Appends to the journal store (state/store/README.md, "Writes"): the checks an append
 * passes before anything is written, and the durable write of one batch. The store
 * (journal-store.ts) holds the partition's lock around both and moves its in-memory state
 * only once {@link writeBatch} resolved, from what it returns.
 */
import { AppError } from '../../common/errors';
import { EventKind, isEventKind } from '../../common/event-kinds';
import { bytesEqual, toHex } from '../journal/hex';
import { LeafHasher } from '../journal/leaf-digest';
import type { Sha256 } from '../journal/sha256';
import { buildAppendBatch, type AppendBatch } from './append-batch';
import type { GroupCommitter } from './group-commit';
import { assertNotFenced } from './journal-checks';
import type { SigningKeyring } from './journal-keyring';
import type { AppendEvent, AppendResult, JournalStoreLimits } from './journal-store-types';
import type { KvOp } from './level-kv';
import type { PartitionState } from './recover-partition';

/** Kinds only the store writes. */
const RESERVED_KINDS: ReadonlySet<string> = new Set([
  EventKind.SignedRoot,
  EventKind.KeyRotated,
  EventKind.Excision,
]);

const utf8 = new TextEncoder();

/** A memo of each kind's UTF-8 bytes, for {@link BatchWriter.kindBytes}. */
function cachedKindBytes(): (kind: string) => Uint8Array {
  const kinds = new Map<string, Uint8Array>();
  return (kind) => {
    let bytes = kinds.get(kind);
    if (bytes === undefined) {
      bytes = utf8.encode(kind);
      kinds.set(kind, bytes);
    }
    return bytes;
  };
}

/** What {@link writeBatch} needs from the store. */
export interface BatchWriter {
  readonly hash: Sha256;
  readonly leafHasher: LeafHasher;
  readonly kindBytes: (kind: string) => Uint8Array;
  readonly keyring: SigningKeyring;
  readonly committer: GroupCommitter;
}

/** The {@link BatchWriter} of a store's parts, with a cache of the kinds' bytes. */
export function batchWriter(
  hash: Sha256,
  keyring: SigningKeyring,
  committer: GroupCommitter,
): BatchWriter {
  return {
    hash,
    leafHasher: new LeafHasher(hash),
    kindBytes: cachedKindBytes(),
    keyring,
    committer,
  };
}

/** More for one batch (repair's): written in the same atomic write, after a check. */
export interface BatchExtra {
  /** More writes for the same atomic batch (repair's excised markers). */
  readonly ops: readonly KvOp[];
  /** Runs on the built batch before it is written; throwing writes nothing. */
  readonly check: (batch: AppendBatch) => Promise<void>;
}

/** A batch that is durable: what the store's in-memory state moves to. */
export interface WrittenBatch {
  readonly batch: AppendBatch;
  /** Position of the batch's first event (the head before it). */
  readonly firstPosition: number;
  /** The partition's fencing mark after the batch. */
  readonly fence: number;
  /** The key id the head record names as the signer of the partition's first root. */
  readonly genesisKeyId: string;
}

function invalid(
  partition: string,
  message: string,
  details: Record<string, string | number> = {},
): AppError {
  return new AppError('invalid_argument', `${partition}: ${message}`, {
    details: { partition, ...details },
  });
}

/** Returns the payload size of event `index`, or throws what is wrong with it. */
function checkEvent(
  partition: string,
  event: AppendEvent,
  index: number,
  maxBytes: number,
): number {
  if (!isEventKind(event.kind)) {
    throw invalid(
      partition,
      `event ${String(index)} has unknown kind ${JSON.stringify(String(event.kind).slice(0, 64))}; use a kind from common/event-kinds.ts`,
      { index },
    );
  }
  if (RESERVED_KINDS.has(event.kind)) {
    throw invalid(
      partition,
      `event ${String(index)} is a ${event.kind}, which only the store writes (it closes every batch and records key rotations)`,
      { index, kind: event.kind },
    );
  }
  if (!(event.payload instanceof Uint8Array)) {
    throw invalid(partition, `event ${String(index)} (${event.kind}) has no payload bytes`, {
      index,
    });
  }
  if (event.payload.length > maxBytes) {
    throw invalid(
      partition,
      `event ${String(index)} (${event.kind}) has a payload of ${String(event.payload.length)} bytes; ` +
        `the limit is ${String(maxBytes)}: store large content elsewhere and journal a reference`,
      { index, bytes: event.payload.length, limit: maxBytes },
    );
  }
  return event.payload.length;
}

/**
 * Checks a caller's batch against `limits`: not empty, not too many events or bytes, every
 * kind known and not reserved, every payload bytes of at most the limit.
 *
 * @throws AppError `invalid_argument` naming the event and what to do.
 */
export function validateEvents(
  partition: string,
  events: readonly AppendEvent[],
  limits: JournalStoreLimits,
): void {
  if (events.length === 0) throw invalid(partition, 'an append needs at least one event');
  const { maxBatchEvents, maxPayloadBytes, maxBatchBytes } = limits;
  if (events.length > maxBatchEvents) {
    throw invalid(
      partition,
      `an append holds at most ${String(maxBatchEvents)} events, got ${String(events.length)}; split the batch`,
      { events: events.length, limit: maxBatchEvents },
    );
  }
  let total = 0;
  events.forEach((event, index) => {
    total += checkEvent(partition, event, index, maxPayloadBytes);
  });
  if (total > maxBatchBytes) {
    throw invalid(
      partition,
      `an append holds at most ${String(maxBatchBytes)} payload bytes, got ${String(total)}; split the batch`,
      { bytes: total, limit: maxBatchBytes },
    );
  }
}

/**
 * The compare-and-swap on the head.
 *
 * @throws AppError `conflict` when the head moved past `expectedHead`;
 *   `failed_precondition` when `expectedHead` is beyond it.
 */
function assertHeadAsExpected(partition: string, expectedHead: number, head: number): void {
  if (expectedHead < head) {
    throw new AppError(
      'conflict',
      `${partition}: the head moved: expected ${String(expectedHead)}, the head is ${String(head)}; ` +
        `read the events from ${String(expectedHead)} and retry against head ${String(head)}`,
      { details: { partition, expectedHead, head } },
    );
  }
  if (expectedHead > head) {
    throw new AppError(
      'failed_precondition',
      `${partition}: expected head ${String(expectedHead)} is beyond the journal's head ` +
        `${String(head)}: this store never held that position (was the state volume restored ` +
        'from an older backup?); read the head and reconcile before appending',
      { details: { partition, expectedHead, head } },
    );
  }
}

/**
 * Refuses an append whose writer saw another last signed root at this head
 * (`AppendOptions.expectedRoot`). An empty partition has no root to compare.
 *
 * @throws AppError `failed_precondition` with `details.reason` `root_mismatch`.
 */
function assertRootAsExpected(
  partition: string,
  state: PartitionState | undefined,
  expectedRoot: Uint8Array | undefined,
): void {
  if (expectedRoot === undefined || expectedRoot.length === 0 || state === undefined) return;
  if (bytesEqual(state.lastRoot.root, expectedRoot)) return;
  throw new AppError(
    'failed_precondition',
    `${partition}: the journal's last signed root at head ${String(state.head)} is ` +
      `${toHex(state.lastRoot.root)}, not the ${toHex(expectedRoot)} the writer last saw: this journal ` +
      'has the same length but other content (was the state volume restored from another copy?); ' +
      'read it again and reconcile before appending',
    {
      details: {
        partition,
        reason: 'root_mismatch',
        head: state.head,
        root: toHex(state.lastRoot.root),
        expectedRoot: toHex(expectedRoot),
      },
    },
  );
}

/**
 * The checks of an append once the partition's lock is held: the fencing token first (a
 * stale writer must learn that it lost the lease, not that it should read and retry at
 * the new head, where the compare-and-swap alone would let it through), then the head,
 * then the root the writer last saw.
 *
 * @throws AppError `fenced`, `conflict` or `failed_precondition`.
 */
export function assertAppendable(
  partition: string,
  state: PartitionState | undefined,
  expectedHead: number,
  options: { readonly fencingToken: number; readonly expectedRoot?: Uint8Array | undefined },
): void {
  assertNotFenced(partition, state, options.fencingToken, 'append');
  assertHeadAsExpected(partition, expectedHead, state?.head ?? 0);
  assertRootAsExpected(partition, state, options.expectedRoot);
}

/**
 * Builds one batch of `partition` (its events, a `key_rotated` when the partition is
 * handed over to the active key, the closing `signed_root`) and writes it durably through
 * group commit; the partition's lock is held. `state` is not changed.
 *
 * @throws AppError `failed_precondition` when the partition's key is not held;
 *   `unavailable` when the durable write failed; whatever `extra.check` throws.
 */
export async function writeBatch(
  writer: BatchWriter,
  partition: string,
  state: PartitionState | undefined,
  events: readonly AppendEvent[],
  fencingToken = 0,
  extra?: BatchExtra,
): Promise<WrittenBatch> {
  const { keyring } = writer;
  const signer = keyring.active;
  const fence = Math.max(state?.fence ?? 0, fencingToken);
  const handOverFrom = keyring.handOverFrom(partition, state?.lastRoot.keyId);
  const genesisKeyId = state?.genesisKeyId ?? keyring.activeKeyId;
  const batch = buildAppendBatch({
    partition,
    hash: writer.hash,
    leafHasher: writer.leafHasher,
    kindBytes: writer.kindBytes,
    mmr: state?.mmr,
    head: state?.head ?? 0,
    genesisKeyId,
    events,
    signer,
    handOverFrom,
    ...(fence > (state?.fence ?? 0) ? { raiseFence: fence } : {}),
  });
  let bytes = batch.bytes;
  if (extra !== undefined) {
    await extra.check(batch);
    for (const op of extra.ops) {
      batch.ops.push(op);
      bytes += op.key.length + (op.type === 'put' ? op.value.length : 0);
    }
  }
  await writer.committer.commit(batch.ops, bytes);
  return { batch, firstPosition: state?.head ?? 0, fence, genesisKeyId };
}

/** What an append of the durable batch `written` reports to its caller. */
export function appendResultOf(partition: string, written: WrittenBatch): AppendResult {
  const { batch, firstPosition } = written;
  const rotation = batch.keyRotation;
  return {
    partition,
    firstPosition,
    head: batch.head,
    signedRoot: batch.signedRoot,
    ...(rotation === undefined
      ? {}
      : {
          keyRotation: {
            position: rotation.position,
            oldKeyId: rotation.oldKeyId,
            newKeyId: rotation.newKeyId,
          },
        }),
  };
}
