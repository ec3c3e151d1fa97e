/**
 * The journal store's partitions as open() found them and acknowledged batches moved
 * them: each healthy partition's head, frontier, last signed root and fencing mark, each
 * refused partition's error, and the count of acknowledged batches and their events. The
 * store (journal-store.ts) holds one table.
 */
import type { AppError } from '../../common/errors';
import type { GroupCommitStats } from './group-commit';
import type { WrittenBatch } from './journal-append';
import { noEvents } from './journal-checks';
import type { OpenedPartitions } from './journal-open';
import type { JournalStoreStats, PartitionInfo } from './journal-store-types';
import type { PartitionState } from './recover-partition';
import { retiredError } from './retired-partitions';
import type { PartitionRetirement } from './retirement-types';

export class PartitionTable {
  private readonly states = new Map<string, PartitionState>();
  private readonly refused = new Map<string, AppError>();
  /** Retired partitions (an unreadable retirement as its error): no call but retire reaches them. */
  private readonly retired = new Map<string, PartitionRetirement | AppError>();
  private appends = 0;
  private events = 0;

  /** Takes the partitions and retirements open() found. */
  load(opened: OpenedPartitions): void {
    this.states.clear();
    this.refused.clear();
    this.retired.clear();
    for (const [name, state] of opened.partitions) this.states.set(name, state);
    for (const [name, error] of opened.refused) this.refused.set(name, error);
    for (const [name, retirement] of opened.retired) this.retired.set(name, retirement);
  }

  /**
   * State of a partition that is not refused; `undefined` when it has no events.
   *
   * @throws AppError `data_loss` for a refused partition; `failed_precondition` for a
   *   retired one (retired-partitions.ts).
   */
  healthy(partition: string): PartitionState | undefined {
    this.assertNotRetired(partition);
    const refused = this.refused.get(partition);
    if (refused !== undefined) throw refused;
    return this.states.get(partition);
  }

  /**
   * State of a partition with records, refused or not (`undefined` when refused).
   *
   * @throws AppError `not_found` for a partition with no records.
   */
  stored(partition: string): PartitionState | undefined {
    this.assertNotRetired(partition);
    const state = this.states.get(partition);
    if (state === undefined && !this.refused.has(partition)) throw noEvents(partition);
    return state;
  }

  /** @throws AppError `failed_precondition` when `partition` is retired. */
  assertNotRetired(partition: string): void {
    const retirement = this.retired.get(partition);
    if (retirement !== undefined) throw retiredError(retirement);
  }

  /** The retirement of `partition` (an unreadable one as its error), if it is retired. */
  retirement(partition: string): PartitionRetirement | AppError | undefined {
    return this.retired.get(partition);
  }

  /** What retiring `partition` starts from: its state and whether open() refused it. */
  beforeRetirement(partition: string): {
    state: PartitionState | undefined;
    refused: AppError | undefined;
  } {
    return { state: this.states.get(partition), refused: this.refused.get(partition) };
  }

  /** `partition` is retired (its retirement durable): it leaves the live partitions. */
  retire(partition: string, retirement: PartitionRetirement): void {
    this.states.delete(partition);
    this.refused.delete(partition);
    this.retired.set(partition, retirement);
  }

  /** Moves `partition` (its state before: `state`) to the durable batch `written`. */
  advance(partition: string, state: PartitionState | undefined, written: WrittenBatch): void {
    const { batch, fence } = written;
    this.appends += 1;
    this.events += batch.head - written.firstPosition;
    if (state === undefined) {
      this.states.set(partition, {
        head: batch.head,
        mmr: batch.mmr,
        genesisKeyId: written.genesisKeyId,
        lastRoot: batch.signedRoot,
        fence,
      });
      return;
    }
    state.head = batch.head;
    state.mmr = batch.mmr;
    state.lastRoot = batch.signedRoot;
    state.fence = fence;
  }

  /** Every partition, sorted by name, with refused ones marked; retired ones are not listed. */
  list(): PartitionInfo[] {
    const out: PartitionInfo[] = [];
    for (const [partition, state] of this.states)
      out.push({ partition, status: 'ok', head: state.head });
    for (const [partition, error] of this.refused)
      out.push({ partition, status: 'refused', problem: error.message });
    return out.sort((a, b) => (a.partition < b.partition ? -1 : a.partition > b.partition ? 1 : 0));
  }

  /** The partitions and the acknowledged batches (the store's counters but group commit's). */
  counters(): Omit<JournalStoreStats, keyof GroupCommitStats> {
    return {
      appends: this.appends,
      events: this.events,
      partitions: this.states.size,
      refusedPartitions: this.refused.size,
    };
  }
}
