import type { JournalEntry, NewJournalEvent } from '../../../common/state-client';
import type { FollowJournal } from '../journal-hub';

/** One call of {@link InMemoryJournal.follow}, as the stream made it. */
export interface FollowCall {
  readonly partition: string;
  readonly fromPosition: number;
  readonly signal: AbortSignal;
  /** Set for a bounded read (no follow): at most this many events, ending at the head. */
  readonly limit?: number;
}

interface Follower {
  failure: Error | undefined;
  wake: (() => void) | undefined;
}

/**
 * A journal in memory for the journal hub's unit tests (journal-hub.test.ts), which need
 * appends that land within one tick: partitions of dense positions, appended to by the
 * test, and a real async-generator `follow` that
 * yields what is there and then each new event, as the state plane's `read` with
 * `follow: true` does. The test drives it: {@link failFollowers} makes every open follow
 * throw (a state plane restart), {@link follows} records each call with its signal, and
 * {@link delivered} counts events actually pulled (to see backpressure).
 */
export class InMemoryJournal {
  private readonly partitions = new Map<string, JournalEntry[]>();
  private readonly followers = new Set<Follower>();
  /** Every follow call, oldest first. */
  readonly follows: FollowCall[] = [];
  /** Events handed out by all follows. */
  delivered = 0;

  /** The partition's events. */
  entries(partition: string): readonly JournalEntry[] {
    return this.partitions.get(partition) ?? [];
  }

  /** The next free position. */
  head(partition: string): number {
    return this.entries(partition).length;
  }

  /** Appends at the head; wakes the followers. @returns the first position written. */
  append(partition: string, events: readonly NewJournalEvent[]): number {
    let entries = this.partitions.get(partition);
    if (entries === undefined) {
      entries = [];
      this.partitions.set(partition, entries);
    }
    const first = entries.length;
    for (const event of events) {
      entries.push({ position: entries.length, kind: event.kind, payload: event.payload });
    }
    for (const follower of this.followers) follower.wake?.();
    return first;
  }

  /** Follows open now. */
  get activeFollowers(): number {
    return this.followers.size;
  }

  /** Makes every open follow throw `error` at its next step. @returns how many. */
  failFollowers(error: Error): number {
    for (const follower of this.followers) {
      follower.failure = error;
      follower.wake?.();
    }
    return this.followers.size;
  }

  /** The live follows among {@link follows} (not bounded reads). */
  get liveFollows(): FollowCall[] {
    return this.follows.filter((f) => f.limit === undefined);
  }

  readonly follow: FollowJournal = (partition, fromPosition, signal, options) => {
    const limit = options?.limit;
    this.follows.push({
      partition,
      fromPosition,
      signal,
      ...(limit === undefined ? {} : { limit }),
    });
    return limit === undefined
      ? this.followFrom(partition, fromPosition, signal)
      : this.readFrom(partition, fromPosition, limit, signal);
  };

  private async *readFrom(
    partition: string,
    fromPosition: number,
    limit: number,
    signal: AbortSignal,
  ): AsyncGenerator<JournalEntry> {
    const follower: Follower = { failure: undefined, wake: undefined };
    this.followers.add(follower);
    try {
      for (let next = fromPosition; next < fromPosition + limit; next += 1) {
        await Promise.resolve();
        if (signal.aborted) return;
        if (follower.failure !== undefined) throw follower.failure;
        const entry = this.partitions.get(partition)?.[next];
        if (entry === undefined) return;
        this.delivered += 1;
        yield entry;
      }
    } finally {
      this.followers.delete(follower);
    }
  }

  private async *followFrom(
    partition: string,
    fromPosition: number,
    signal: AbortSignal,
  ): AsyncGenerator<JournalEntry> {
    const follower: Follower = { failure: undefined, wake: undefined };
    this.followers.add(follower);
    const onAbort = (): void => follower.wake?.();
    signal.addEventListener('abort', onAbort);
    try {
      let next = fromPosition;
      for (;;) {
        if (signal.aborted) return;
        if (follower.failure !== undefined) throw follower.failure;
        const entry = this.partitions.get(partition)?.[next];
        if (entry !== undefined) {
          this.delivered += 1;
          yield entry;
          next += 1;
          continue;
        }
        await new Promise<void>((resolve) => {
          follower.wake = resolve;
        });
        follower.wake = undefined;
      }
    } finally {
      signal.removeEventListener('abort', onAbort);
      this.followers.delete(follower);
    }
  }
}
