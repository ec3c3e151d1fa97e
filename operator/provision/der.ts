/**
 * The few DER (ASN.1 distinguished encoding) shapes an X.509 certificate is made of
 * (ITU-T X.690): enough for x509-mint.ts to build certificates with node:crypto alone. Pure
 * functions over bytes; nothing here parses.
 */

/** A DER value: tag, length, contents. */
export function tlv(tag: number, contents: Uint8Array): Buffer {
  const n = contents.length;
  let length: number[];
  if (n < 0x80) length = [n];
  else if (n < 0x100) length = [0x81, n];
  else if (n < 0x10000) length = [0x82, n >> 8, n & 0xff];
  else throw new Error(`DER value of ${n} bytes is longer than a certificate needs`);
  return Buffer.concat([Buffer.from([tag, ...length]), contents]);
}

/** SEQUENCE of `items`. */
export const sequence = (...items: readonly Uint8Array[]): Buffer =>
  tlv(0x30, Buffer.concat(items));

/** SET of `items` (one item each where this module uses it, so no sorting is needed). */
export const set = (...items: readonly Uint8Array[]): Buffer => tlv(0x31, Buffer.concat(items));

/** A context-specific constructed (EXPLICIT) tag `[n]` around `inner`. */
export const explicit = (n: number, inner: Uint8Array): Buffer => tlv(0xa0 | n, inner);

/** A context-specific primitive (IMPLICIT) tag `[n]` with `contents`. */
export const implicit = (n: number, contents: Uint8Array): Buffer => tlv(0x80 | n, contents);

/** BOOLEAN. */
export const boolean = (value: boolean): Buffer => tlv(0x01, Buffer.from([value ? 0xff : 0x00]));

/** A non-negative INTEGER from its big-endian bytes, minimally encoded. */
export function unsignedInteger(bytes: Uint8Array): Buffer {
  let start = 0;
  while (start < bytes.length - 1 && bytes[start] === 0) start += 1;
  const trimmed = Buffer.from(bytes.subarray(start));
  const first = trimmed[0] ?? 0;
  return tlv(0x02, first >= 0x80 ? Buffer.concat([Buffer.from([0]), trimmed]) : trimmed);
}

/** A small non-negative INTEGER. */
export const smallInteger = (value: number): Buffer => unsignedInteger(Buffer.from([value]));

/** OBJECT IDENTIFIER from its dotted form. */
export function objectIdentifier(dotted: string): Buffer {
  const arcs = dotted.split('.').map(Number);
  const [a = 0, b = 0, ...rest] = arcs;
  const bytes = [a * 40 + b];
  for (const arc of rest) {
    const base128 = [arc & 0x7f];
    for (let v = Math.floor(arc / 128); v > 0; v = Math.floor(v / 128)) {
      base128.unshift((v & 0x7f) | 0x80);
    }
    bytes.push(...base128);
  }
  return tlv(0x06, Buffer.from(bytes));
}

/** UTF8String. */
export const utf8String = (value: string): Buffer => tlv(0x0c, Buffer.from(value, 'utf8'));

/** IA5String contents as an implicit tag (a dNSName of a subjectAltName is `[2]`). */
export const ia5Implicit = (n: number, value: string): Buffer =>
  implicit(n, Buffer.from(value, 'ascii'));

/** OCTET STRING. */
export const octetString = (contents: Uint8Array): Buffer => tlv(0x04, contents);

/** BIT STRING of whole bytes (no unused bits). */
export const bitString = (contents: Uint8Array): Buffer =>
  tlv(0x03, Buffer.concat([Buffer.from([0]), contents]));

/**
 * A named-bit BIT STRING (RFC 5280 KeyUsage) with bits `positions` set (bit 0 is the
 * first, most significant): trailing zero bits are dropped, as DER requires.
 */
export function namedBits(positions: readonly number[]): Buffer {
  const last = Math.max(...positions);
  const bytes = Buffer.alloc(Math.floor(last / 8) + 1);
  for (const p of positions) bytes[p >> 3] = (bytes[p >> 3] ?? 0) | (0x80 >> (p & 7));
  const unused = 7 - (last & 7);
  return tlv(0x03, Buffer.concat([Buffer.from([unused]), bytes]));
}

/**
 * A certificate validity time: UTCTime through 2049, GeneralizedTime from 2050 on
 * (RFC 5280, 4.1.2.5), at whole seconds.
 */
export function time(at: Date): Buffer {
  const iso = at.toISOString(); // 2026-12-06T22:13:24.000Z
  const digits = iso.slice(0, 19).replace(/[-T:]/g, '') + 'Z';
  return at.getUTCFullYear() < 2050
    ? tlv(0x17, Buffer.from(digits.slice(2), 'ascii'))
    : tlv(0x18, Buffer.from(digits, 'ascii'));
}
