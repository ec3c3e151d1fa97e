import { describe, expect, it } from '@jest/globals';
import type { SeriesWrite } from './event-series';
import { EventSeriesCache, SERIES_FINISH_MS, SERIES_REFRESH_MS } from './event-series';

const MINUTE = 60_000;
const T0 = Date.parse('2026-12-01T10:00:00Z');

/** The writes as `kind payload count`. */
const writes = (list: readonly (SeriesWrite<string> | undefined)[]): string[] =>
  list.flatMap((w) =>
    w === undefined
      ? []
      : [`${w.kind} ${w.entry.payload}${w.kind === 'patch' ? ` ${w.count}` : ''}`],
  );

describe('EventSeriesCache (client-go series semantics)', () => {
  it('creates on the first occurrence, patches count 2 at once on the second, then only counts', () => {
    const cache = new EventSeriesCache<string>();
    let made = 0;
    const payload = (): string => `ev${++made}`;
    expect(writes([cache.observe('k', T0, payload).now])).toEqual(['create ev1']);
    const second = cache.observe('k', T0 + MINUTE, payload).now;
    expect(writes([second])).toEqual(['patch ev1 2']);
    expect(second?.kind === 'patch' ? second.lastObservedMs : 0).toBe(T0 + MINUTE);
    expect(cache.observe('k', T0 + 2 * MINUTE, payload).now).toBeUndefined();
    expect(cache.observe('k', T0 + 3 * MINUTE, payload).now).toBeUndefined();
    // One Event only: the payload was made once.
    expect(made).toBe(1);
  });

  it('keys are independent', () => {
    const cache = new EventSeriesCache<string>();
    expect(writes([cache.observe('a', T0, () => 'a1').now])).toEqual(['create a1']);
    expect(writes([cache.observe('b', T0, () => 'b1').now])).toEqual(['create b1']);
    expect(cache.size).toBe(2);
  });

  it('re-sends a continuing series at most every 30 minutes, and only with new occurrences', () => {
    const cache = new EventSeriesCache<string>();
    cache.observe('k', T0, () => 'ev');
    cache.observe('k', T0, () => 'ev'); // patch 2, sent at T0
    let t = T0;
    // An occurrence every 5 minutes keeps the series going (under the 6-minute finish).
    const sent: string[] = [];
    while (t < T0 + 61 * MINUTE) {
      t += 5 * MINUTE;
      cache.observe('k', t, () => 'ev');
      sent.push(...writes(cache.sweep(t)));
    }
    expect(sent).toEqual(['patch ev 8', 'patch ev 14']);
    expect(SERIES_REFRESH_MS).toBe(30 * MINUTE);
  });

  it('a series with no occurrence for 6 minutes sends its final count and is forgotten', () => {
    const cache = new EventSeriesCache<string>();
    cache.observe('k', T0, () => 'ev1');
    cache.observe('k', T0, () => 'ev1');
    cache.observe('k', T0 + MINUTE, () => 'ev1'); // counted, 3
    expect(cache.sweep(T0 + MINUTE + SERIES_FINISH_MS - 1)).toEqual([]);
    expect(writes(cache.sweep(T0 + MINUTE + SERIES_FINISH_MS))).toEqual(['patch ev1 3']);
    expect(cache.size).toBe(0);
    // The next occurrence is a new Event.
    expect(writes([cache.observe('k', T0 + 20 * MINUTE, () => 'ev2').now])).toEqual(['create ev2']);
  });

  it('a finished series whose count was sent, or a single Event, is forgotten without a write', () => {
    const cache = new EventSeriesCache<string>();
    cache.observe('single', T0, () => 's');
    cache.observe('pair', T0, () => 'p');
    cache.observe('pair', T0, () => 'p');
    expect(cache.sweep(T0 + SERIES_FINISH_MS)).toEqual([]);
    expect(cache.size).toBe(0);
  });

  it('holds a bounded number of keys: the least recently seen goes, with its unsent count', () => {
    const cache = new EventSeriesCache<string>({ maxKeys: 2 });
    cache.observe('a', T0, () => 'a');
    cache.observe('a', T0, () => 'a');
    cache.observe('a', T0, () => 'a'); // 3, 2 sent
    cache.observe('b', T0, () => 'b');
    cache.observe('a', T0, () => 'a'); // a is now the most recent; 4
    const { now, evicted } = cache.observe('c', T0, () => 'c');
    expect(writes([now])).toEqual(['create c']);
    // b went (least recently seen), with nothing unsent; a stays.
    expect(evicted).toEqual([]);
    expect(cache.size).toBe(2);
    const next = cache.observe('d', T0, () => 'd');
    expect(writes(next.evicted)).toEqual(['patch a 4']);
  });

  it('forget drops the entry of a failed create, so the next occurrence creates again', () => {
    const cache = new EventSeriesCache<string>();
    const first = cache.observe('k', T0, () => 'ev1').now;
    if (first === undefined) throw new Error('no create');
    cache.forget(first.entry);
    expect(writes([cache.observe('k', T0, () => 'ev2').now])).toEqual(['create ev2']);
    // A stale entry does not drop the newer one.
    cache.forget(first.entry);
    expect(cache.size).toBe(1);
  });
});
