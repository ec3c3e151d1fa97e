import { AppError } from '../../common/errors';
import { isJsonObject, type JsonObject } from '../../common/canonical-json';

/**
 * Field checks and conversions the proto codecs share (`step-codec.ts`, `request-codec.ts`
 * and the harness server's start and output codecs). Proto messages stop at the codecs
 * (STYLE.md §1): a `fromProto` checks what proto3 cannot (a oneof left empty, an enum left
 * unspecified, JSON text that is not an object) and throws `invalid_argument` naming the
 * field, because the input comes from another process.
 */

/** The error for a malformed field, named as on the wire. */
export function invalidField(field: string, why: string): AppError {
  return new AppError('invalid_argument', `${field}: ${why}`, { details: { field } });
}

/** Bytes as ts-proto writes them. */
export function wireBytes(value: Uint8Array): Buffer {
  return Buffer.from(value);
}

/** Bytes as the domain keeps them (a copy, not a view of the wire buffer). */
export function plainBytes(value: Uint8Array): Uint8Array {
  return new Uint8Array(value);
}

/**
 * JSON text of a field parsed as an object.
 *
 * @throws AppError `invalid_argument` naming the field when it is not JSON or not an object.
 */
export function jsonObjectField(text: string, field: string): JsonObject {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw invalidField(field, 'is not valid JSON');
  }
  if (!isJsonObject(value)) throw invalidField(field, 'is not a JSON object');
  return value;
}
