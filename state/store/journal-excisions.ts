/**
 * The store's two calls that excise entries, repair (journal-repair.ts) and erasure
 * (journal-erase.ts), as journal-store.ts runs them: checked, under the partition's
 * append lock, fenced like an append, then applied once durable.
 */
import { assertPartitionName } from '../../common/partition-name';
import type { WrittenBatch } from './journal-append';
import { assertNotFenced, noEvents, throwIfAborted } from './journal-checks';
import { erasedResult, eraseEntries, erasePositionsOf } from './journal-erase';
import type { PartitionTable } from './journal-partitions';
import {
  excise,
  repairedResult,
  repairRequestOf,
  type RepairParts,
  type RepairRequest,
} from './journal-repair';
import type {
  AppendResult,
  EraseOptions,
  EraseResult,
  JournalStoreLimits,
  RepairOptions,
  RepairResult,
} from './journal-store-types';
import type { PartitionState } from './recover-partition';
import type { StoreLifecycle } from './store-lifecycle';

/** What the store lends an excising call. */
export interface ExcisionContext {
  readonly life: StoreLifecycle;
  readonly table: PartitionTable;
  readonly parts: RepairParts;
  /** Moves the store's state to a durable batch. */
  readonly apply: (partition: string, state: PartitionState, written: WrittenBatch) => AppendResult;
  /** The store's append limits (a memory clear appends an event of its caller's). */
  readonly limits: JournalStoreLimits;
}

/** Runs a repair or an erasure (`what`) of `partition` under its lock, fenced. */
function excising<R>(
  context: ExcisionContext,
  partition: string,
  request: RepairRequest,
  what: string,
  run: (state: PartitionState) => Promise<R>,
): Promise<R> {
  throwIfAborted(request.signal, `${what} of ${partition}`);
  return context.life.locked(partition, async () => {
    const state = context.table.healthy(partition);
    if (state === undefined) throw noEvents(partition);
    assertNotFenced(partition, state, request.fencingToken, what);
    return run(state);
  });
}

/**
 * {@link JournalStore.repair}: excises every unreadable entry of `partition`
 * (journal-repair.ts; docs/journal-format.md, "Excision") in one atomic durable batch, once
 * the repaired journal is shown to verify; a dry run stops there. A partition with nothing
 * unreadable is left as it is.
 * @throws AppError `invalid_argument` (bad name, actor or reason), `not_found` (no events),
 *   `data_loss` (refused, a missing leaf digest, a repair that would not verify), and
 *   `fenced`, `cancelled`, `unavailable` as for append.
 */
export async function repairPartition(
  context: ExcisionContext,
  partition: string,
  options: RepairOptions,
): Promise<RepairResult> {
  context.life.assertOpen();
  assertPartitionName(partition);
  const request = repairRequestOf(partition, options);
  return excising(context, partition, request, 'repair', async (state) => {
    const outcome = await excise(context.parts, partition, state, request);
    if ('result' in outcome) return outcome.result;
    return repairedResult(outcome.excised, context.apply(partition, state, outcome.written));
  });
}

/** {@link JournalStore.erase}. */
export async function erasePartition(
  context: ExcisionContext,
  partition: string,
  options: EraseOptions,
): Promise<EraseResult> {
  context.life.assertOpen();
  assertPartitionName(partition);
  const positions = erasePositionsOf(partition, options.positions);
  const request = { ...repairRequestOf(partition, options, 'an erasure'), positions };
  return excising(context, partition, request, 'erasure', async (state) => {
    const outcome = await eraseEntries(context.parts, partition, state, request);
    if ('result' in outcome) return outcome.result;
    return erasedResult(outcome.erased, context.apply(partition, state, outcome.written));
  });
}
