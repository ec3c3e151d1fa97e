import type { JournalEntry } from '../../common/state-journal';
import type { FollowJournal, JournalReadOptions } from '../../operator/public-api/journal-feed';

/** One call of {@link RecordingFollow.follow}, as the hub made it. */
export interface FollowCall {
  readonly partition: string;
  readonly fromPosition: number;
  /** The signal the hub passed. */
  readonly signal: AbortSignal;
  /** Set for a bounded read (no follow): at most this many events. */
  readonly limit?: number;
}

interface Open {
  fail(error: Error): void;
}

/**
 * A recording, fault-injecting wrapper around a real {@link FollowJournal} (the production
 * follower over the real store): it records each call with its signal ({@link follows}),
 * counts the events actually pulled ({@link delivered}, to see backpressure), and
 * {@link failFollowers} makes every open follow throw at once (a state plane that goes
 * away mid-stream, which the real store cannot do on demand). Events pass through
 * untouched.
 */
export class RecordingFollow {
  /** Every call, oldest first. */
  readonly follows: FollowCall[] = [];
  /** Events handed out by all calls. */
  delivered = 0;
  private readonly open = new Set<Open>();

  constructor(private readonly inner: FollowJournal) {}

  /** Calls whose iteration is running now. */
  get activeFollowers(): number {
    return this.open.size;
  }

  /** The live follows among {@link follows} (not bounded reads). */
  get liveFollows(): FollowCall[] {
    return this.follows.filter((f) => f.limit === undefined);
  }

  /** Makes every open call throw `error` now (its inner read is cancelled). @returns how many. */
  failFollowers(error: Error): number {
    const count = this.open.size;
    for (const entry of [...this.open]) entry.fail(error);
    return count;
  }

  readonly follow: FollowJournal = (partition, fromPosition, signal, options) => {
    const limit = options?.limit;
    this.follows.push({
      partition,
      fromPosition,
      signal,
      ...(limit === undefined ? {} : { limit }),
    });
    return this.run(partition, fromPosition, signal, options);
  };

  private async *run(
    partition: string,
    fromPosition: number,
    signal: AbortSignal,
    options: JournalReadOptions | undefined,
  ): AsyncGenerator<JournalEntry> {
    const cut = new AbortController();
    let failure: Error | undefined;
    const entry: Open = {
      fail: (error) => {
        failure = error;
        cut.abort(error);
      },
    };
    this.open.add(entry);
    const iterator = this.inner(
      partition,
      fromPosition,
      AbortSignal.any([signal, cut.signal]),
      options,
    )[Symbol.asyncIterator]();
    try {
      for (;;) {
        let next: IteratorResult<JournalEntry>;
        try {
          next = await iterator.next();
        } catch (error) {
          throw failure ?? error;
        }
        if (failure !== undefined) throw failure;
        if (next.done === true) return;
        this.delivered += 1;
        yield next.value;
      }
    } finally {
      this.open.delete(entry);
      if (failure === undefined) await iterator.return?.();
    }
  }
}
