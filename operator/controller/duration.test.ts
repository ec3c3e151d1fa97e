import { describe, expect, it } from '@jest/globals';
import { parseDuration } from './duration';

describe('parseDuration', () => {
  it.each([
    ['0', 0],
    ['0s', 0],
    ['-0', 0],
    ['+5s', 5_000],
    ['45s', 45_000],
    ['30m', 1_800_000],
    ['1h30m', 5_400_000],
    ['1.5h', 5_400_000],
    ['.5s', 500],
    ['1.s', 1_000],
    ['24h', 86_400_000],
    ['1h1m1s', 3_661_000],
    ['2m3.25s', 123_250],
    ['300ms', 300],
    ['1500us', 1.5],
    ['1500µs', 1.5],
    ['1500μs', 1.5],
    ['1ns', 0.000001],
    ['1.0000000001s', 1_000],
    ['2562047h', 2_562_047 * 3_600_000],
  ])('%s is %d ms', (text, ms) => {
    expect(parseDuration(text)).toEqual({ ok: true, ms });
  });

  it.each([
    ['', 'empty'],
    ['-1s', 'negative durations are not allowed'],
    ['5', 'expected a number followed by a unit (h, m, s, ms, us, ns)'],
    ['1h5', 'expected a number followed by a unit (h, m, s, ms, us, ns)'],
    ['h', 'expected a number before the unit'],
    ['.s', 'expected a number before the unit'],
    ['1d', 'unknown unit "d"'],
    ['1 h', 'expected a number followed by a unit (h, m, s, ms, us, ns)'],
    ['10000000h', 'overflows a 64-bit count of nanoseconds'],
    ['2562048h', 'overflows a 64-bit count of nanoseconds'],
    ['99999999999999999999s', 'overflows a 64-bit count of nanoseconds'],
  ])('rejects %j (%s)', (text, why) => {
    expect(parseDuration(text)).toEqual({
      ok: false,
      error: `invalid duration ${JSON.stringify(text)}: ${why}`,
    });
  });
});
