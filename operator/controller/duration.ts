/**
 * Go `time.ParseDuration`, as the Conversation's `spec.idleTimeout` and `spec.retention`
 * are written: a sequence of decimal numbers, each with an optional fraction and a unit
 * (`ns`, `us`, `µs`, `ms`, `s`, `m`, `h`), e.g. `1h30m`, `45s`, `1.5h`, `0`. The schema
 * allows only h, m and s; this parser accepts Go's whole grammar so a value stored before
 * the schema tightened still reads the way Go would read it. Pure: no I/O, no clock.
 */

/** Nanoseconds per unit, as Go's `unitMap`. */
const NANOS_PER_UNIT: Readonly<Record<string, bigint>> = {
  ns: 1n,
  us: 1_000n,
  µs: 1_000n, // U+00B5 micro sign
  μs: 1_000n, // U+03BC Greek small letter mu
  ms: 1_000_000n,
  s: 1_000_000_000n,
  m: 60_000_000_000n,
  h: 3_600_000_000_000n,
};

/** Go's `time.Duration` is an int64 of nanoseconds; anything larger overflows (~292 years). */
const MAX_NANOS = 2n ** 63n - 1n;

/** The result of {@link parseDuration}: milliseconds, or why the text is not a duration. */
export type ParsedDuration =
  { readonly ok: true; readonly ms: number } | { readonly ok: false; readonly error: string };

const SEGMENT = /^(\d*)(?:\.(\d*))?([a-zµμ]+)/u;

/**
 * Parses a Go-style duration into milliseconds (fractional below a millisecond). Negative
 * durations are rejected: a timeout or retention cannot be negative. Never throws; a
 * malformed or overflowing value comes back as `{ ok: false, error }` with a message
 * that quotes the value.
 */
export function parseDuration(text: string): ParsedDuration {
  const bad = (why: string): ParsedDuration => ({
    ok: false,
    error: `invalid duration ${JSON.stringify(text)}: ${why}`,
  });
  let rest = text;
  if (rest.startsWith('-')) {
    return rest === '-0' ? { ok: true, ms: 0 } : bad('negative durations are not allowed');
  }
  if (rest.startsWith('+')) rest = rest.slice(1);
  if (rest === '0') return { ok: true, ms: 0 };
  if (rest === '') return bad('empty');
  let nanos = 0n;
  while (rest !== '') {
    const match = SEGMENT.exec(rest);
    if (match === null) return bad('expected a number followed by a unit (h, m, s, ms, us, ns)');
    const [whole, intPart = '', fracPart, unit = ''] = match;
    if (intPart === '' && (fracPart === undefined || fracPart === '')) {
      return bad('expected a number before the unit');
    }
    const perUnit = NANOS_PER_UNIT[unit];
    if (perUnit === undefined) return bad(`unknown unit ${JSON.stringify(unit)}`);
    // Go truncates the fraction to whole nanoseconds; so does this.
    let segment = BigInt(intPart === '' ? '0' : intPart) * perUnit;
    if (fracPart !== undefined && fracPart !== '') {
      segment += (BigInt(fracPart) * perUnit) / 10n ** BigInt(fracPart.length);
    }
    nanos += segment;
    if (nanos > MAX_NANOS) return bad('overflows a 64-bit count of nanoseconds');
    rest = rest.slice(whole.length);
  }
  return { ok: true, ms: Number(nanos) / 1_000_000 };
}
