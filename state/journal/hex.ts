import { AppError } from '../../common/errors';

const HEX_DIGITS = '0123456789abcdef';
const BYTE_TO_HEX: readonly string[] = Array.from(
  { length: 256 },
  (_, b) => `${HEX_DIGITS[b >> 4] ?? ''}${HEX_DIGITS[b & 15] ?? ''}`,
);

/** Lowercase hex of `bytes`, two digits per byte (the form every journal document uses). */
export function toHex(bytes: Uint8Array): string {
  let out = '';
  for (const b of bytes) out += BYTE_TO_HEX[b] ?? '';
  return out;
}

/**
 * Bytes of a hex string (either case, no prefix, even length).
 *
 * @param what - names the field in the error message, e.g. `"root"`.
 * @throws AppError `invalid_argument` when `hex` has odd length or a non-hex digit.
 */
export function fromHex(hex: string, what = 'hex value'): Uint8Array {
  if (hex.length % 2 !== 0 || !/^[0-9a-fA-F]*$/.test(hex)) {
    throw new AppError(
      'invalid_argument',
      `${what} is not hex: expected an even number of digits 0-9a-f, got ${hex.length} characters`,
      { details: { field: what, length: hex.length } },
    );
  }
  const out = new Uint8Array(hex.length / 2);
  for (let i = 0; i < out.length; i++) out[i] = parseInt(hex.slice(2 * i, 2 * i + 2), 16);
  return out;
}

/** True when `a` and `b` hold the same bytes. Not constant-time: only public data is compared. */
export function bytesEqual(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}
