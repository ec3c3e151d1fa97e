/**
 * The pure core of Event deduplication, as client-go's events.k8s.io/v1 recorder does it
 * (tools/events): Events with the same isomorphic key (regarding, action, reason,
 * reporting controller, type, note) are one Event with a `series`. The first occurrence is
 * created; the second sets `series.count` 2 at once; later ones are counted here and sent
 * when the series is refreshed (at most every {@link SERIES_REFRESH_MS}) or ends (no
 * occurrence for {@link SERIES_FINISH_MS}). A key not seen for that long is forgotten, so
 * its next occurrence is a new Event. No I/O, no clock: `nowMs` comes in.
 */

/** A series is re-sent at most this often while it goes on (client-go: 30 minutes). */
export const SERIES_REFRESH_MS = 30 * 60_000;
/** A key with no occurrence for this long is finished and forgotten (client-go: 6 minutes). */
export const SERIES_FINISH_MS = 6 * 60_000;
/** Keys remembered at most; the least recently seen goes first. */
export const SERIES_MAX_KEYS = 4096;

/** One Event the cache knows: what the shell keeps of it, and its series as counted. */
export interface SeriesEntry<T> {
  readonly key: string;
  /** The shell's own record of the Event (its body, name). */
  readonly payload: T;
  /** Occurrences so far (1: no series yet). */
  count: number;
  lastObservedMs: number;
  /** The count the API server was last sent (1 after the create). */
  sentCount: number;
  lastSentMs: number;
}

/** A write the shell makes for the cache. */
export type SeriesWrite<T> =
  | { readonly kind: 'create'; readonly entry: SeriesEntry<T> }
  | {
      readonly kind: 'patch';
      readonly entry: SeriesEntry<T>;
      readonly count: number;
      readonly lastObservedMs: number;
    };

/** Tunables of {@link EventSeriesCache}. */
export interface EventSeriesOptions {
  /** @default SERIES_REFRESH_MS */
  readonly refreshMs?: number;
  /** @default SERIES_FINISH_MS */
  readonly finishMs?: number;
  /** @default SERIES_MAX_KEYS */
  readonly maxKeys?: number;
}

/** Occurrences by isomorphic key, and the writes they call for. */
export class EventSeriesCache<T> {
  // Map order is insertion order; a key is re-inserted when seen, so the first is the
  // least recently seen.
  private readonly entries = new Map<string, SeriesEntry<T>>();
  private readonly refreshMs: number;
  private readonly finishMs: number;
  private readonly maxKeys: number;

  constructor(options: EventSeriesOptions = {}) {
    this.refreshMs = options.refreshMs ?? SERIES_REFRESH_MS;
    this.finishMs = options.finishMs ?? SERIES_FINISH_MS;
    this.maxKeys = Math.max(1, options.maxKeys ?? SERIES_MAX_KEYS);
  }

  /** Keys held. */
  get size(): number {
    return this.entries.size;
  }

  /**
   * One occurrence of `key` at `nowMs`. Returns the write it needs now: a create (a new
   * key; `payload` makes what the shell keeps of the Event), a patch of the series (the second occurrence), or none
   * (later occurrences are counted), plus the final patches of keys evicted to make room.
   */
  observe(
    key: string,
    nowMs: number,
    payload: () => T,
  ): { readonly now?: SeriesWrite<T>; readonly evicted: readonly SeriesWrite<T>[] } {
    const existing = this.entries.get(key);
    if (existing !== undefined) {
      this.entries.delete(key);
      this.entries.set(key, existing);
      existing.count += 1;
      existing.lastObservedMs = nowMs;
      if (existing.sentCount >= 2) return { evicted: [] };
      return { now: this.sent(existing, nowMs), evicted: [] };
    }
    const evicted: SeriesWrite<T>[] = [];
    for (const [oldestKey, oldest] of this.entries) {
      if (this.entries.size < this.maxKeys) break;
      this.entries.delete(oldestKey);
      if (oldest.count > oldest.sentCount) evicted.push(this.sent(oldest, nowMs));
    }
    const entry: SeriesEntry<T> = {
      key,
      payload: payload(),
      count: 1,
      lastObservedMs: nowMs,
      sentCount: 1,
      lastSentMs: nowMs,
    };
    this.entries.set(key, entry);
    return { now: { kind: 'create', entry }, evicted };
  }

  /**
   * The writes due at `nowMs`: a series with unsent occurrences whose last write is
   * `refreshMs` old, and the final count of a series that ended (`finishMs` without an
   * occurrence). Ended keys are forgotten.
   */
  sweep(nowMs: number): SeriesWrite<T>[] {
    const writes: SeriesWrite<T>[] = [];
    for (const [key, entry] of this.entries) {
      const ended = nowMs - entry.lastObservedMs >= this.finishMs;
      const unsent = entry.count > entry.sentCount;
      if (ended) {
        this.entries.delete(key);
        if (unsent) writes.push(this.sent(entry, nowMs));
      } else if (unsent && nowMs - entry.lastSentMs >= this.refreshMs) {
        writes.push(this.sent(entry, nowMs));
      }
    }
    return writes;
  }

  /**
   * The API server no longer has the Event of `key` (a patch found it gone, or its create
   * failed): forget it, so the next occurrence creates it again.
   */
  forget(entry: SeriesEntry<T>): void {
    if (this.entries.get(entry.key) === entry) this.entries.delete(entry.key);
  }

  private sent(entry: SeriesEntry<T>, nowMs: number): SeriesWrite<T> {
    entry.sentCount = entry.count;
    entry.lastSentMs = nowMs;
    return {
      kind: 'patch',
      entry,
      count: entry.count,
      lastObservedMs: entry.lastObservedMs,
    };
  }
}
