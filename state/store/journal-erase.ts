/**
 * Erasure of readable entries (docs/state-plane.md, "Erasure"; docs/journal-format.md,
 * "Erasure"): an admin asks for the content of named entries to be gone. Each named entry
 * must be a readable content entry (common/erasable-kinds.ts) below the head, not already
 * excised. The erasure checks that the partition with those entries excised and its batch
 * after them still verifies, then writes that batch (the excised markers, one signed
 * `excision` event marked `erased` per entry, the closing `signed_root`) through
 * journal-append.ts, the way repair excises unreadable entries (journal-repair.ts). The
 * store applies the written batch. Every summary that may hold a named entry is erased with
 * it (covering-summaries.ts).
 */
import { erasableKindsText, isErasableKind } from '../../common/erasable-kinds';
import { AppError } from '../../common/errors';
import { decodePayload, EventKind, isEventKind } from '../../common/event-kinds';
import { bytesEqual } from '../journal/hex';
import { leafNodePosition } from '../journal/mmr-layout';
import { StreamingJournalVerifier } from '../journal/streaming-verifier';
import type { JournalVerification } from '../journal/verification-types';
import { writeBatch, type WrittenBatch } from './journal-append';
import { throwIfAborted } from './journal-checks';
import { coveringSummaries } from './covering-summaries';
import { excisionEvents, type RepairParts, type RepairRequest } from './journal-repair';
import type { AppendEvent, AppendResult, EraseResult, ErasedEntry } from './journal-store-types';
import { genesisTrust, signatureChecker } from './journal-verify';
import type { KvOp, KvStore } from './level-kv';
import { readAhead } from './read-ahead';
import type { PartitionState } from './recover-partition';
import { DryRunDone, replayedBatchCheck } from './replayed-batch-check';
import {
  decodeEventValue,
  encodeExcisedValue,
  eventKey,
  nodeKey,
  positionOfKey,
  positionRange,
  RecordTag,
} from './store-keys';

/** The most positions one erasure names. */
export const MAX_ERASE_POSITIONS = 1000;

/** An erasure's options, checked: a repair's, plus the positions (sorted, distinct). */
export interface EraseRequest extends RepairRequest {
  readonly positions: readonly number[];
}

/** An erasure that wrote nothing (`result`), or its durable batch for the store to apply. */
export type EraseOutcome =
  | { readonly result: EraseResult }
  | { readonly written: WrittenBatch; readonly erased: readonly ErasedEntry[] };

/** A named position that cannot be erased, and why. */
interface Refusal {
  readonly position: number;
  readonly why: string;
}

/**
 * The positions of an erasure of `partition`, sorted.
 *
 * @throws AppError `invalid_argument` for none, too many, a repeated one or one that is not
 *   a non-negative integer.
 */
export function erasePositionsOf(partition: string, positions: unknown): number[] {
  const bad = (what: string, details: object = {}): AppError =>
    new AppError('invalid_argument', `${partition}: an erasure ${what}`, {
      details: { partition, field: 'positions', ...details },
    });
  if (!Array.isArray(positions) || positions.length === 0) {
    throw bad('needs at least one position to erase');
  }
  if (positions.length > MAX_ERASE_POSITIONS) {
    throw bad(`names at most ${String(MAX_ERASE_POSITIONS)} positions; split it`);
  }
  const seen = new Set<number>();
  for (const position of positions as unknown[]) {
    if (typeof position !== 'number' || !Number.isSafeInteger(position) || position < 0) {
      throw bad(`names ${String(position)}: a position is a non-negative integer`);
    }
    if (seen.has(position)) throw bad(`names ${String(position)} twice`, { position });
    seen.add(position);
  }
  return [...seen].sort((a, b) => a - b);
}

/** The turn a payload names (`turn_id`), or empty. */
function turnIdOf(payload: unknown): string {
  const turnId: unknown =
    typeof payload === 'object' && payload !== null ? Reflect.get(payload, 'turnId') : undefined;
  return typeof turnId === 'string' ? turnId : '';
}

/** Why the stored entry at `position` cannot be erased, or what it is. */
function inspect(
  parts: RepairParts,
  partition: string,
  position: number,
  stored: readonly [Uint8Array | undefined, Uint8Array | undefined],
): ErasedEntry | Refusal {
  const [value, leaf] = stored;
  if (value === undefined || leaf === undefined || leaf.length !== 32) {
    return { position, why: 'the entry or its leaf digest is missing: run verify, then repair' };
  }
  let entry: { kind: string; payload: Uint8Array; excisedLeaf?: Uint8Array };
  try {
    entry = decodeEventValue(value, partition, position);
  } catch {
    return { position, why: 'the stored entry is damaged: repair excises unreadable entries' };
  }
  if (entry.excisedLeaf !== undefined) {
    return { position, why: 'it is already excised (erased, or repaired as unreadable)' };
  }
  const { kind, payload } = entry;
  if (!isErasableKind(kind)) {
    return {
      position,
      why:
        `it is a ${JSON.stringify(kind.slice(0, 64))} entry, which holds the journal's structure or a ` +
        `decision, not content; only these kinds may be erased: ${erasableKindsText()}`,
    };
  }
  let decoded: unknown;
  try {
    decoded = isEventKind(kind) ? decodePayload(kind, payload) : undefined;
  } catch {
    decoded = undefined;
  }
  if (
    decoded === undefined ||
    !bytesEqual(parts.writer.leafHasher.digest(position, kind, payload), leaf)
  ) {
    return { position, why: 'it is unreadable (repair excises unreadable entries)' };
  }
  return { position, leaf: new Uint8Array(leaf), kind, turnId: turnIdOf(decoded) };
}

/**
 * The named entries, each checked.
 *
 * @throws AppError `invalid_argument` for a position at or beyond the head;
 *   `failed_precondition` naming every position that cannot be erased and why.
 */
export async function namedEntries(
  parts: RepairParts,
  partition: string,
  head: number,
  positions: readonly number[],
): Promise<ErasedEntry[]> {
  const beyond = positions.filter((p) => p >= head);
  if (beyond.length > 0) {
    throw new AppError(
      'invalid_argument',
      `${partition}: the journal has ${String(head)} entries (positions 0 to ${String(head - 1)}); ` +
        `position ${beyond.join(', ')} is not below the head; nothing was written`,
      { details: { partition, field: 'positions', positions: beyond.join(', '), head } },
    );
  }
  const values = await parts.kv.getMany(positions.map((p) => eventKey(partition, p)));
  const leaves = await parts.kv.getMany(
    positions.map((p) => nodeKey(partition, leafNodePosition(p))),
  );
  const found = positions.map((p, i) => inspect(parts, partition, p, [values[i], leaves[i]]));
  const refused = found.filter((e): e is Refusal => 'why' in e);
  if (refused.length > 0) {
    throw new AppError(
      'failed_precondition',
      `${partition}: nothing was erased: ` +
        refused.map((r) => `position ${String(r.position)} cannot be erased: ${r.why}`).join('; '),
      { details: { partition, positions: refused.map((r) => String(r.position)).join(', ') } },
    );
  }
  return found.filter((e): e is ErasedEntry => !('why' in e));
}

/** Replays `[0, head)` into `replayer`, the named entries as excised. */
async function replayErased(
  kv: KvStore,
  partition: string,
  head: number,
  erased: readonly ErasedEntry[],
  replayer: StreamingJournalVerifier,
  signal: AbortSignal | undefined,
): Promise<void> {
  const leaves = new Map(erased.map((e) => [e.position, e.leaf]));
  const range = positionRange(partition, RecordTag.Event, 0, head);
  for await (const entries of readAhead(kv.entries(range))) {
    throwIfAborted(signal, `erasure in ${partition}`);
    for (const [key, value] of entries) {
      const position = positionOfKey(key);
      const leaf = leaves.get(position);
      replayer.add(
        leaf === undefined
          ? { position, ...decodeEventValue(value, partition, position) }
          : { position, kind: '', payload: new Uint8Array(0), excisedLeaf: leaf },
      );
    }
  }
}

/** The excised markers that replace the erased entries, keeping their leaf digests. */
function markers(partition: string, erased: readonly ErasedEntry[]): KvOp[] {
  return erased.map((e) => ({
    type: 'put',
    key: eventKey(partition, e.position),
    value: encodeExcisedValue(e.leaf),
  }));
}

function positionsText(erased: readonly { readonly position: number }[]): string {
  return erased.map((e) => String(e.position)).join(', ');
}

/** The refusal of an erasure whose journal would not verify. */
function wouldNotVerify(partition: string, positions: string) {
  return (outcome: JournalVerification): AppError =>
    new AppError(
      'data_loss',
      `${partition}: erasing ${positions} would not leave a journal that verifies` +
        (outcome.failure === undefined
          ? ' (events would be left unsealed)'
          : ` (${outcome.failure.reason} at ${String(outcome.failure.position)}: ${outcome.failure.message})`) +
        '; nothing was written; run verify on the partition, and repair it if it is damaged',
      { details: { partition, positions } },
    );
}

/** The kinds a summary is made of (docs/turns.md, "Summaries"): the user's text and the reply. */
const SUMMARIZED_KINDS: ReadonlySet<string> = new Set([
  EventKind.MessageReceived,
  EventKind.TurnComplete,
]);

/**
 * Writes the batch that erases `erased` (each checked by {@link namedEntries}) from
 * `partition`: `lead` first (a memory clear's `memory_cleared`), one signed `excision`
 * record marked erased per entry, the excised markers that keep each leaf digest, and the
 * closing root, once the journal with them erased is shown to verify. A dry run stops
 * before writing (replayed-batch-check.ts `DryRunDone`).
 *
 * @throws AppError `data_loss` when the journal would not verify; `cancelled`;
 *   `unavailable` when the write failed.
 */
export async function writeErasure(
  parts: RepairParts,
  partition: string,
  state: PartitionState,
  erased: readonly ErasedEntry[],
  request: RepairRequest,
  lead: readonly AppendEvent[],
): Promise<WrittenBatch> {
  const { kv, writer } = parts;
  const replayer = new StreamingJournalVerifier({
    hash: writer.hash,
    trustedPublicKeys: await genesisTrust(kv, writer.keyring, partition, state),
    partition,
    checkSignatures: signatureChecker(parts.verifier),
  });
  await replayErased(kv, partition, state.head, erased, replayer, request.signal);
  const refusal = wouldNotVerify(partition, positionsText(erased));
  const check = replayedBatchCheck(partition, state.head, replayer, refusal, request.dryRun);
  const records = excisionEvents(
    erased.map((e) => ({
      position: e.position,
      leaf: e.leaf,
      erasedKind: e.kind,
      turnId: e.turnId,
    })),
    request,
  );
  const extra = { ops: markers(partition, erased), check };
  return writeBatch(writer, partition, state, [...lead, ...records], request.fencingToken, extra);
}

/**
 * Checks the named entries of `partition` (which has events; its lock is held) and,
 * unless it is a dry run, writes the erasure's batch once the journal with them erased is
 * shown to verify.
 *
 * @throws AppError `invalid_argument`, `failed_precondition` (namedEntries); `data_loss`
 *   when the journal would not verify; `cancelled`; `unavailable` when the write failed.
 */
export async function eraseEntries(
  parts: RepairParts,
  partition: string,
  state: PartitionState,
  request: EraseRequest,
): Promise<EraseOutcome> {
  const named = await namedEntries(parts, partition, state.head, request.positions);
  // Every summary that may hold a named message or answer goes with it.
  const summarized = named.filter((e) => SUMMARIZED_KINDS.has(e.kind)).map((e) => e.position);
  const covering =
    summarized.length === 0
      ? []
      : await coveringSummaries(parts.kv, partition, state.head, summarized);
  const erased =
    covering.length === 0
      ? named
      : [...named, ...(await namedEntries(parts, partition, state.head, covering))].sort(
          (a, b) => a.position - b.position,
        );
  const positions = positionsText(erased);
  try {
    const written = await writeErasure(parts, partition, state, erased, request, []);
    return { written, erased };
  } catch (error) {
    if (!(error instanceof DryRunDone)) throw error;
    const message =
      `${partition}: dry run: would erase ${positions}; the journal would still verify; ` +
      'nothing was written';
    return { result: { partition, dryRun: true, erased, head: state.head, message } };
  }
}

/** What an erasure that wrote `appended`, erasing `erased`, reports. */
export function erasedResult(erased: readonly ErasedEntry[], appended: AppendResult): EraseResult {
  const { partition, head } = appended;
  return {
    partition,
    dryRun: false,
    erased,
    head,
    signedRoot: appended.signedRoot,
    message:
      `${partition}: erased ${positionsText(erased)}, each recorded by a signed excision event; ` +
      `the head is now ${String(head)}`,
  };
}
