/**
 * Token buckets by key, in memory, with a bounded number of keys. Pure: the clock is a
 * parameter of every call, nothing here does I/O.
 *
 * A bucket holds up to `capacity` tokens and gains `perSecond` of them each second; a
 * request takes one. A bucket that has filled up again is the same as no bucket, so it is
 * forgotten; that is what keeps an idle caller from costing memory.
 */

/** One bucket's shape: how many tokens it holds at most, and how fast it refills. */
export interface BucketShape {
  readonly capacity: number;
  readonly perSecond: number;
}

/** What {@link TokenBuckets.take} decided. */
export type Take =
  | { readonly allowed: true }
  | {
      readonly allowed: false;
      /** How long until the bucket holds one whole token again (at least 1 ms). */
      readonly retryAfterMs: number;
    };

/** Most keys remembered at once. @default 100000 */
export const DEFAULT_MAX_BUCKETS = 100_000;

interface Bucket {
  tokens: number;
  atMs: number;
  shape: BucketShape;
}

export class TokenBuckets {
  /** Insertion order is last-use order: the first entry is the least recently used. */
  private readonly buckets = new Map<string, Bucket>();
  private readonly maxBuckets: number;

  /**
   * @param maxBuckets past this many keys the least recently used is forgotten even if it
   *   is not full (that key then starts again from a full bucket: a bounded gift, the price
   *   of bounded memory).
   */
  constructor(maxBuckets: number = DEFAULT_MAX_BUCKETS) {
    this.maxBuckets = Math.max(1, maxBuckets);
  }

  /** Keys remembered now (tests, metrics). */
  get size(): number {
    return this.buckets.size;
  }

  /**
   * Takes one token from `key`'s bucket at `nowMs`, or says how long until one is there.
   * A shape with `perSecond` 0 or `capacity` 0 allows everything (no limit).
   */
  take(key: string, shape: BucketShape, nowMs: number): Take {
    if (shape.perSecond <= 0 || shape.capacity <= 0) return { allowed: true };
    const bucket = this.buckets.get(key);
    const tokens = bucket === undefined ? shape.capacity : level(bucket, nowMs);
    this.buckets.delete(key);
    if (tokens < 1) {
      this.buckets.set(key, { tokens, atMs: nowMs, shape });
      return {
        allowed: false,
        retryAfterMs: Math.max(1, Math.ceil(((1 - tokens) * 1000) / shape.perSecond)),
      };
    }
    this.buckets.set(key, { tokens: tokens - 1, atMs: nowMs, shape });
    this.forgetIdle(nowMs);
    return { allowed: true };
  }

  /**
   * Forgets buckets that are full again, oldest use first, stopping at the first that is
   * not (amortized constant work per take), then the least recently used past the bound.
   */
  private forgetIdle(nowMs: number): void {
    for (const [key, bucket] of this.buckets) {
      if (level(bucket, nowMs) < bucket.shape.capacity) break;
      this.buckets.delete(key);
    }
    while (this.buckets.size > this.maxBuckets) {
      const oldest = this.buckets.keys().next();
      if (oldest.done === true) break;
      this.buckets.delete(oldest.value);
    }
  }
}

/** The tokens in `bucket` at `nowMs` (a clock that went back adds nothing). */
function level(bucket: Bucket, nowMs: number): number {
  const elapsedMs = Math.max(0, nowMs - bucket.atMs);
  return Math.min(
    bucket.shape.capacity,
    bucket.tokens + (elapsedMs * bucket.shape.perSecond) / 1000,
  );
}
