import { setImmediate as nextTurn } from 'node:timers/promises';

import { AppError, isAppError } from '../../common/errors';
import type { KvOp, KvStore } from './level-kv';

/** A write the storage guard refused or saw fail for lack of space (storage-guard.ts). */
function isStorageRefusal(error: unknown): error is AppError {
  return isAppError(error) && error.code === 'resource_exhausted';
}

interface Waiting {
  readonly ops: readonly KvOp[];
  readonly bytes: number;
  readonly resolve: () => void;
  readonly reject: (error: unknown) => void;
}

/** Counters for metrics and tests. */
export interface GroupCommitStats {
  /** `sync: true` batches written (successful or not). */
  readonly durableWrites: number;
  /** Commits (one per append) that those batches carried. */
  readonly commits: number;
  /** Batches that failed; every commit in them was rejected. */
  readonly failedWrites: number;
  /** Most commits one batch carried. */
  readonly largestGroup: number;
}

/**
 * Group commit: every commit becomes durable in a `sync: true` batch, and commits that
 * arrive while one batch is being synced share the next batch, so N concurrent appends to
 * different partitions cost far fewer than N fsyncs. A lone commit is written at the
 * end of the event loop's current turn, without waiting for company.
 *
 * Guarantees: a commit's promise resolves only after the batch holding it is durable; if
 * that batch fails, every commit in it rejects. Commits are never split across batches,
 * so each stays atomic. Two commits for the same partition are never in flight together
 * (the store holds a per-partition lock across its commit), so their order within a
 * batch does not matter.
 */
export class GroupCommitter {
  private queue: Waiting[] = [];
  private running = false;
  private idle: (() => void)[] = [];
  private stats = { durableWrites: 0, commits: 0, failedWrites: 0, largestGroup: 0 };

  /**
   * @param maxGroupBytes - a batch stops taking commits once it holds this many bytes
   *   (one commit larger than this still goes, alone).
   */
  constructor(
    private readonly kv: KvStore,
    private readonly maxGroupBytes: number,
  ) {}

  /**
   * Writes `ops` atomically and durably, possibly together with other commits.
   *
   * @throws AppError `unavailable` when the batch fails (the engine error is the cause),
   *   `resource_exhausted` when the volume is full or unwritable (storage-guard.ts); none
   *   of `ops` is acknowledged.
   */
  commit(ops: readonly KvOp[], bytes: number): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      this.queue.push({ ops, bytes, resolve, reject });
      if (!this.running) void this.drain();
    });
  }

  /** Current counters. */
  counters(): GroupCommitStats {
    return { ...this.stats };
  }

  /** Resolves once no commit is queued or in flight. */
  whenIdle(): Promise<void> {
    if (!this.running && this.queue.length === 0) return Promise.resolve();
    return new Promise((resolve) => this.idle.push(resolve));
  }

  private takeGroup(): Waiting[] {
    let bytes = 0;
    let count = 0;
    for (const w of this.queue) {
      if (count > 0 && bytes + w.bytes > this.maxGroupBytes) break;
      bytes += w.bytes;
      count += 1;
    }
    return this.queue.splice(0, count);
  }

  private async drain(): Promise<void> {
    this.running = true;
    try {
      for (;;) {
        // Wait for the end of this turn of the event loop before writing. Requests that
        // arrived together (one socket read of many calls) and appenders released by the
        // last batch all queue their commits within the turn; writing at the first of them
        // would send it alone and make the rest wait a whole fsync for it, splitting
        // appenders into two cohorts that alternate, each paying its own fsync. A lone
        // commit waits for no more than the rest of the turn (no timer, no I/O wait).
        await nextTurn();
        if (this.queue.length === 0) break;
        const group = this.takeGroup();
        const ops = group.flatMap((w) => w.ops);
        this.stats.durableWrites += 1;
        this.stats.commits += group.length;
        this.stats.largestGroup = Math.max(this.stats.largestGroup, group.length);
        try {
          await this.kv.write(ops, true);
        } catch (cause) {
          this.stats.failedWrites += 1;
          // A full volume's refusal says what is full and what to do (storage-guard.ts).
          const error = isStorageRefusal(cause)
            ? cause
            : new AppError(
                'unavailable',
                `the journal store could not write a batch of ${String(group.length)} append(s) durably; ` +
                  'none of them was acknowledged: check the state volume, then retry against the same head',
                { cause },
              );
          for (const w of group) w.reject(error);
          continue;
        }
        for (const w of group) w.resolve();
      }
    } finally {
      this.running = false;
      const idle = this.idle;
      this.idle = [];
      for (const resolve of idle) resolve();
    }
  }
}
