import { AppError } from '../../common/errors';

const TWO_32 = 2 ** 32;

/**
 * True when `value` can stand for a u64 in this code base: a non-negative safe integer.
 * Positions and counts stay below 2^53, far beyond any journal, so plain numbers are kept
 * instead of bigint on the hot path.
 */
export function isU64(value: number): boolean {
  return Number.isSafeInteger(value) && value >= 0;
}

/**
 * Throws unless `value` is a non-negative safe integer.
 *
 * @throws AppError `invalid_argument` naming `what`.
 */
export function assertU64(value: number, what: string): void {
  if (!isU64(value)) {
    throw new AppError(
      'invalid_argument',
      `${what} must be a non-negative integer below 2^53, got ${String(value)}`,
      { details: { field: what } },
    );
  }
}

/**
 * Writes `value` as 8 bytes, unsigned big-endian, at `offset`. The caller has checked the
 * value with {@link assertU64}; the high word is split off arithmetically because JS bit
 * operators work on 32 bits.
 */
export function writeU64(target: Uint8Array, offset: number, value: number): void {
  const hi = Math.floor(value / TWO_32);
  const lo = value - hi * TWO_32;
  target[offset] = hi >>> 24;
  target[offset + 1] = (hi >>> 16) & 0xff;
  target[offset + 2] = (hi >>> 8) & 0xff;
  target[offset + 3] = hi & 0xff;
  target[offset + 4] = lo >>> 24;
  target[offset + 5] = (lo >>> 16) & 0xff;
  target[offset + 6] = (lo >>> 8) & 0xff;
  target[offset + 7] = lo & 0xff;
}

/**
 * `value` as a fresh 8-byte u64 big-endian array.
 *
 * @throws AppError `invalid_argument` when `value` is not a non-negative safe integer.
 */
export function encodeU64(value: number, what = 'value'): Uint8Array {
  assertU64(value, what);
  const out = new Uint8Array(8);
  writeU64(out, 0, value);
  return out;
}
