import type { z } from 'zod';

import { AppError } from '../../common/errors';

/*
 * Record values are JSON text, one object per key (record-keys.ts). JSON rather than
 * protobuf because these records never cross the wire as stored (the gRPC server maps
 * them through its own toProto), stay small, and an operator can read them with any
 * LevelDB tool while debugging. Every read is checked against a schema: a value this code
 * did not write, or a newer layout, is reported as data loss instead of trusted.
 */

/** The JSON text stored for `value`. */
export function encodeValue(value: unknown): string {
  return JSON.stringify(value);
}

/**
 * Parses a stored value with `schema`.
 *
 * @throws AppError `data_loss` when the text is not JSON or does not fit the schema; the
 *   message names the key, never the value (it may hold a token hash or sealed secret).
 */
export function decodeValue<T>(schema: z.ZodType<T>, text: string, key: string): T {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (cause) {
    throw corrupt(key, 'is not JSON', cause);
  }
  const parsed = schema.safeParse(json);
  if (!parsed.success) {
    const first = parsed.error.issues[0];
    const where = first === undefined ? '' : ` at "${first.path.join('.')}": ${first.message}`;
    throw corrupt(key, `does not match its schema${where}`, parsed.error);
  }
  return parsed.data;
}

function corrupt(key: string, problem: string, cause: unknown): AppError {
  return new AppError(
    'data_loss',
    `the stored record ${key} ${problem}; restore the state volume from a backup or delete ` +
      'the record',
    { details: { key }, cause },
  );
}
