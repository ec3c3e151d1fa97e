/**
 * Repair of a damaged partition (docs/journal-format.md, "Excision"; docs/state-plane.md,
 * "Repair"): finds every unreadable entry below the head, checks that the partition with
 * those entries excised and the repair's batch after them still verifies, and writes that
 * batch (the excised markers, one signed `excision` event per entry, the closing
 * `signed_root`) through journal-append.ts. The store applies the written batch.
 */
import { AppError } from '../../common/errors';
import { decodePayload, encodePayload, EventKind, isEventKind } from '../../common/event-kinds';
import { bytesEqual } from '../journal/hex';
import type { Ed25519Verifier } from '../journal/ed25519';
import type { LeafHasher } from '../journal/leaf-digest';
import { leafNodePosition } from '../journal/mmr-layout';
import { StreamingJournalVerifier } from '../journal/streaming-verifier';
import type { JournalVerification } from '../journal/verification-types';
import { writeBatch, type BatchWriter, type WrittenBatch } from './journal-append';
import { assertPosition, throwIfAborted } from './journal-checks';
import type {
  AppendEvent,
  AppendResult,
  RepairOptions,
  RepairResult,
  UnreadableEntry,
} from './journal-store-types';
import { genesisTrust, signatureChecker } from './journal-verify';
import type { KvOp, KvStore } from './level-kv';
import { readAhead } from './read-ahead';
import { DryRunDone, replayedBatchCheck } from './replayed-batch-check';
import type { PartitionState } from './recover-partition';
import {
  decodeEventValue,
  encodeExcisedValue,
  eventKey,
  nodeKey,
  positionOfKey,
  positionRange,
  RecordTag,
} from './store-keys';

const MAX_ACTOR_CHARS = 256;
const MAX_REASON_CHARS = 1024;

/** A repair's options, checked. */
export interface RepairRequest {
  readonly actor: string;
  readonly reason: string;
  readonly fencingToken: number;
  readonly dryRun: boolean;
  readonly signal: AbortSignal | undefined;
  readonly now: () => number;
}

/** What a repair needs from the store. */
export interface RepairParts {
  readonly kv: KvStore;
  readonly verifier: Ed25519Verifier;
  readonly writer: BatchWriter;
}

/** A repair that wrote nothing (`result`), or its durable batch for the store to apply. */
export type RepairOutcome =
  | { readonly result: RepairResult }
  | { readonly written: WrittenBatch; readonly excised: readonly UnreadableEntry[] };

function assertText(
  value: unknown,
  field: string,
  max: number,
  partition: string,
  what: string,
): string {
  if (typeof value !== 'string' || value.trim() === '' || value.length > max) {
    throw new AppError(
      'invalid_argument',
      `${partition}: ${what} needs ${field}: a non-empty text of at most ${String(max)} characters ` +
        '(it is recorded in the signed excision event)',
      { details: { partition, field } },
    );
  }
  return value;
}

/**
 * Checks `options` of a repair of `partition` (or of an erasure: `what` names it).
 *
 * @throws AppError `invalid_argument` for an empty or overlong actor or reason, or a bad
 *   fencing token.
 */
export function repairRequestOf(
  partition: string,
  options: RepairOptions,
  what = 'a repair',
): RepairRequest {
  const actor = assertText(options.actor, 'an actor', MAX_ACTOR_CHARS, partition, what);
  const reason = assertText(options.reason, 'a reason', MAX_REASON_CHARS, partition, what);
  const fencingToken = options.fencingToken ?? 0;
  assertPosition(fencingToken, 'fencing token', partition);
  return {
    actor,
    reason,
    fencingToken,
    dryRun: options.dryRun ?? false,
    signal: options.signal,
    now: options.now ?? Date.now,
  };
}

/**
 * Why a stored entry cannot be read, or `undefined` when it reads and hashes to `leaf`,
 * the leaf digest stored in the MMR when it was signed.
 */
function unreadable(
  leafHasher: LeafHasher,
  partition: string,
  position: number,
  value: Uint8Array,
  leaf: Uint8Array,
): string | undefined {
  let stored: { kind: string; payload: Uint8Array; excisedLeaf?: Uint8Array };
  try {
    stored = decodeEventValue(value, partition, position);
  } catch {
    return 'the stored record is damaged (truncated, or its kind is not UTF-8)';
  }
  if (stored.excisedLeaf !== undefined) return undefined;
  const { kind, payload } = stored;
  if (!isEventKind(kind))
    return `its kind ${JSON.stringify(kind.slice(0, 64))} is not a known kind`;
  try {
    decodePayload(kind, payload);
  } catch {
    return `its payload does not decode as ${kind}`;
  }
  if (!bytesEqual(leafHasher.digest(position, kind, payload), leaf)) {
    return 'its bytes no longer hash to the leaf digest that was signed';
  }
  return undefined;
}

/** Where {@link checkEntries} reads and reports. */
interface EntryScan {
  readonly kv: KvStore;
  readonly leafHasher: LeafHasher;
  readonly partition: string;
  readonly replayer: StreamingJournalVerifier;
  readonly found: UnreadableEntry[];
}

/**
 * Checks stored entries (`undefined`: missing) against their stored leaf digests, feeding
 * the replayer (an unreadable entry as excised) and noting the unreadable ones.
 */
async function checkEntries(
  scan: EntryScan,
  entries: readonly (readonly [number, Uint8Array | undefined])[],
): Promise<void> {
  const { partition, replayer } = scan;
  const leaves = await scan.kv.getMany(
    entries.map(([position]) => nodeKey(partition, leafNodePosition(position))),
  );
  entries.forEach(([position, value], i) => {
    const leaf = leaves[i];
    if (leaf === undefined || leaf.length !== 32) {
      throw new AppError(
        'data_loss',
        `${partition}: the stored leaf digest of entry ${String(position)} is missing or damaged, ` +
          'so the entry cannot be excised; nothing was written; restore the partition from a backup',
        { details: { partition, position } },
      );
    }
    const problem =
      value === undefined
        ? 'the entry is missing from the store'
        : unreadable(scan.leafHasher, partition, position, value, leaf);
    if (problem === undefined && value !== undefined) {
      replayer.add({ position, ...decodeEventValue(value, partition, position) });
      return;
    }
    scan.found.push({ position, leaf, problem: problem ?? 'unreadable' });
    replayer.add({ position, kind: '', payload: new Uint8Array(0), excisedLeaf: leaf });
  });
}

/**
 * Reads `[0, head)` with the stored leaf digests, feeding `scan.replayer`, and returns
 * the unreadable entries.
 */
async function findUnreadable(
  scan: EntryScan,
  head: number,
  signal: AbortSignal | undefined,
): Promise<UnreadableEntry[]> {
  let expected = 0;
  const range = positionRange(scan.partition, RecordTag.Event, 0, head);
  for await (const entries of readAhead(scan.kv.entries(range))) {
    throwIfAborted(signal, `repair of ${scan.partition}`);
    const batch: [number, Uint8Array | undefined][] = [];
    for (const [key, value] of entries) {
      const position = positionOfKey(key);
      for (; expected < position; expected++) batch.push([expected, undefined]);
      batch.push([position, value]);
      expected = position + 1;
    }
    await checkEntries(scan, batch);
  }
  const missing: [number, undefined][] = [];
  for (; expected < head; expected++) missing.push([expected, undefined]);
  if (missing.length > 0) await checkEntries(scan, missing);
  return scan.found;
}

/** Why an entry was excised: unreadable (repair), or erased at a person's request. */
export type ExcisionCause =
  { readonly problem: string } | { readonly erasedKind: string; readonly turnId: string };

/**
 * One signed `excision` event per excised entry (docs/journal-format.md, "Excision"): its
 * position and kept leaf digest, who asked, why, when, and its cause.
 */
export function excisionEvents(
  entries: readonly ({ readonly position: number; readonly leaf: Uint8Array } & ExcisionCause)[],
  request: RepairRequest,
): AppendEvent[] {
  const excisedAtMs = request.now();
  return entries.map((entry) => ({
    kind: EventKind.Excision,
    payload: encodePayload(EventKind.Excision, {
      position: entry.position,
      leafDigest: Buffer.from(entry.leaf),
      actor: request.actor,
      reason: request.reason,
      excisedAtMs,
      ...('problem' in entry
        ? { problem: entry.problem, erased: false, erasedKind: '', turnId: '' }
        : { problem: '', erased: true, erasedKind: entry.erasedKind, turnId: entry.turnId }),
    }),
  }));
}

/** The excised markers that replace the unreadable entries, keeping their leaf digests. */
function excisedMarkers(partition: string, found: readonly UnreadableEntry[]): KvOp[] {
  return found.map((entry) => ({
    type: 'put',
    key: eventKey(partition, entry.position),
    value: encodeExcisedValue(entry.leaf),
  }));
}

/** The refusal of a repair whose repaired journal would not verify. */
function notConfined(partition: string, positions: string) {
  return (outcome: JournalVerification): AppError =>
    new AppError(
      'data_loss',
      `${partition}: excising ${positions} would not leave a journal that verifies` +
        (outcome.failure === undefined
          ? ''
          : ` (${outcome.failure.reason} at ${String(outcome.failure.position)}: ${outcome.failure.message})`) +
        '; the damage is not confined to entries (an MMR node, a root or the key chain changed): ' +
        'nothing was written; restore the partition from a backup',
      { details: { partition, positions } },
    );
}

function entries(count: number): string {
  return `entr${count === 1 ? 'y' : 'ies'}`;
}

function positionsOf(found: readonly UnreadableEntry[]): string {
  return found.map((e) => String(e.position)).join(', ');
}

/**
 * Finds the unreadable entries of `partition` (which has events; its lock is held) and,
 * unless that changes nothing or it is a dry run, writes the repair's batch once the
 * repaired journal is shown to verify.
 *
 * @throws AppError `data_loss` when a stored leaf digest is missing or the repaired
 *   journal would not verify; `cancelled`; `unavailable` when the write failed.
 */
export async function excise(
  parts: RepairParts,
  partition: string,
  state: PartitionState,
  request: RepairRequest,
): Promise<RepairOutcome> {
  const { kv, writer } = parts;
  const replayer = new StreamingJournalVerifier({
    hash: writer.hash,
    trustedPublicKeys: await genesisTrust(kv, writer.keyring, partition, state),
    partition,
    checkSignatures: signatureChecker(parts.verifier),
  });
  const scan: EntryScan = { kv, leafHasher: writer.leafHasher, partition, replayer, found: [] };
  const found = await findUnreadable(scan, state.head, request.signal);
  const { dryRun } = request;
  if (found.length === 0) {
    const message =
      `${partition}: nothing to repair: all ${String(state.head)} entries read and hash to ` +
      'their signed leaf digests; nothing was written';
    return { result: { partition, dryRun, excised: [], head: state.head, message } };
  }
  const positions = positionsOf(found);
  const refusal = notConfined(partition, positions);
  const check = replayedBatchCheck(partition, state.head, replayer, refusal, dryRun);
  const extra = { ops: excisedMarkers(partition, found), check };
  try {
    const events = excisionEvents(found, request);
    const written = await writeBatch(writer, partition, state, events, request.fencingToken, extra);
    return { written, excised: found };
  } catch (error) {
    if (!(error instanceof DryRunDone)) throw error;
    const message =
      `${partition}: dry run: would excise ${String(found.length)} unreadable ` +
      `${entries(found.length)} (${positions}); the repaired journal would verify; nothing was written`;
    return { result: { partition, dryRun, excised: found, head: state.head, message } };
  }
}

/** What a repair that wrote `appended`, excising `excised`, reports. */
export function repairedResult(
  excised: readonly UnreadableEntry[],
  appended: AppendResult,
): RepairResult {
  const { partition, head } = appended;
  return {
    partition,
    dryRun: false,
    excised,
    head,
    signedRoot: appended.signedRoot,
    message:
      `${partition}: excised ${String(excised.length)} unreadable ${entries(excised.length)} ` +
      `(${positionsOf(excised)}), each recorded by a signed excision event; the head is now ${String(head)}`,
  };
}
