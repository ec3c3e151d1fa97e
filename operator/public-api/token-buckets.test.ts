import { describe, expect, it } from '@jest/globals';
import { TokenBuckets } from './token-buckets';

const shape = { capacity: 3, perSecond: 2 };

describe('TokenBuckets', () => {
  it('allows a full burst, refuses the next with the time until one token is back', () => {
    const buckets = new TokenBuckets();
    for (let i = 0; i < 3; i += 1) expect(buckets.take('ann', shape, 0)).toEqual({ allowed: true });
    // Two a second: one token takes 500 ms.
    expect(buckets.take('ann', shape, 0)).toEqual({ allowed: false, retryAfterMs: 500 });
    expect(buckets.take('ann', shape, 300)).toEqual({ allowed: false, retryAfterMs: 200 });
    expect(buckets.take('ann', shape, 500)).toEqual({ allowed: true });
    expect(buckets.take('ann', shape, 500)).toEqual({ allowed: false, retryAfterMs: 500 });
  });

  it('keeps keys apart: one caller’s empty bucket does not touch another’s', () => {
    const buckets = new TokenBuckets();
    for (let i = 0; i < 3; i += 1) buckets.take('ann', shape, 0);
    expect(buckets.take('ann', shape, 0).allowed).toBe(false);
    for (let i = 0; i < 3; i += 1) expect(buckets.take('bob', shape, 0).allowed).toBe(true);
  });

  it('refills no further than the capacity', () => {
    const buckets = new TokenBuckets();
    buckets.take('ann', shape, 0);
    const later = 1_000_000;
    for (let i = 0; i < 3; i += 1) expect(buckets.take('ann', shape, later).allowed).toBe(true);
    expect(buckets.take('ann', shape, later).allowed).toBe(false);
  });

  it('allows everything with perSecond or capacity 0 (the limit is off) and remembers nothing', () => {
    const buckets = new TokenBuckets();
    for (let i = 0; i < 100; i += 1) {
      expect(buckets.take('ann', { capacity: 0, perSecond: 5 }, 0).allowed).toBe(true);
      expect(buckets.take('ann', { capacity: 5, perSecond: 0 }, 0).allowed).toBe(true);
    }
    expect(buckets.size).toBe(0);
  });

  it('forgets a caller whose bucket filled up again (idle), so memory follows active callers only', () => {
    const buckets = new TokenBuckets();
    for (let i = 0; i < 1_000; i += 1) buckets.take(`caller-${String(i)}`, shape, 0);
    expect(buckets.size).toBe(1_000);
    // 500 ms later every bucket holds 3 again: the next take forgets them all.
    buckets.take('late', shape, 500);
    expect(buckets.size).toBe(1);
  });

  it('never holds more than maxBuckets keys, forgetting the least recently used', () => {
    const buckets = new TokenBuckets(2);
    for (let i = 0; i < 3; i += 1) buckets.take('ann', shape, 0);
    buckets.take('bob', shape, 0);
    buckets.take('cat', shape, 0);
    expect(buckets.size).toBe(2);
    // ann was the least recently used: forgotten, so a full bucket again.
    expect(buckets.take('ann', shape, 0).allowed).toBe(true);
  });
});
