/**
 * The journal store's commit listeners (state/store/README.md, "Commit listeners"), by
 * partition: told each partition's new head once a batch of it is durable. A partition
 * nobody follows has no entry, so telling it costs one map lookup.
 */
import type { CommitListener } from './journal-store-types';

export class CommitListeners {
  private readonly byPartition = new Map<string, Set<CommitListener>>();

  /**
   * Adds a subscription of `listener` to `partition`.
   *
   * @returns unsubscribe; idempotent. Each call is its own subscription, even with the
   *   same listener.
   */
  subscribe(partition: string, listener: CommitListener): () => void {
    // A wrapper per subscription, so two subscriptions of one function stay two.
    const entry: CommitListener = (head) => listener(head);
    let listeners = this.byPartition.get(partition);
    if (listeners === undefined) {
      listeners = new Set();
      this.byPartition.set(partition, listeners);
    }
    listeners.add(entry);
    return () => {
      const current = this.byPartition.get(partition);
      if (current === undefined || !current.delete(entry)) return;
      if (current.size === 0) this.byPartition.delete(partition);
    };
  }

  /** Tells every listener of `partition` its new `head`; a listener that throws is skipped. */
  notify(partition: string, head: number): void {
    const listeners = this.byPartition.get(partition);
    if (listeners === undefined) return;
    // A copy: a listener may unsubscribe itself or others while being told.
    for (const listener of [...listeners]) {
      try {
        listener(head);
      } catch {
        // The batch is durable and must be acknowledged; a broken listener cannot undo it.
      }
    }
  }

  /** Subscriptions held, to `partition` or (omitted) to any partition. */
  count(partition?: string): number {
    if (partition !== undefined) return this.byPartition.get(partition)?.size ?? 0;
    let total = 0;
    for (const listeners of this.byPartition.values()) total += listeners.size;
    return total;
  }
}
