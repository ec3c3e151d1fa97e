import { AppError } from '../../common/errors';
import { parseIdentity } from '../../common/identity';

/*
 * Checks on caller input, run before any read or write so a bad argument changes nothing.
 * Messages name the field and the rule; they quote a bad value only when it cannot be a
 * secret (ids, names), and never quote tokens, codes or secret values.
 */

/** Record ids: URL- and key-safe, so they can sit inside a LevelDB key (record-keys.ts). */
const RECORD_ID = /^[A-Za-z0-9_-]{1,64}$/;
/** Credential kinds, e.g. `api-key`, `oauth-token`: a lower-case slug. */
const KIND = /^[a-z][a-z0-9-]{0,62}$/;
// Control characters in a name would garble logs and UIs; \p{Cc} is C0, DEL and C1.
const CONTROL = /\p{Cc}/u;
const NAME_MAX = 128;

/** The kinds of record, as named in messages and `details.record`. */
export type RecordKind = 'persona' | 'session' | 'credential' | 'ceremony';

/**
 * `value` as a record id.
 *
 * @throws AppError `invalid_argument` unless `value` is 1 to 64 characters of
 *   `A-Z a-z 0-9 _ -`.
 */
export function checkRecordId(value: unknown, record: RecordKind): string {
  if (typeof value === 'string' && RECORD_ID.test(value)) return value;
  throw new AppError(
    'invalid_argument',
    `${record} id ${quoteValue(value)} is not valid: use 1 to 64 characters of A-Z, a-z, 0-9, ` +
      '"_" and "-"',
    { details: { record, field: `${record}Id` } },
  );
}

/**
 * `value` as an identity (common/identity.ts).
 *
 * @throws AppError `invalid_argument` from {@link parseIdentity}.
 */
export function checkIdentity(value: unknown): string {
  parseIdentity(value);
  // parseIdentity accepted it, so it is a string.
  return String(value);
}

/**
 * `value` as a human-readable name (`field` says which: display name, label).
 *
 * @throws AppError `invalid_argument` unless `value` is 1 to 128 characters, not only
 *   whitespace, without leading or trailing whitespace and without control characters.
 */
export function checkName(value: unknown, record: RecordKind, field: string): string {
  const fail = (rule: string): AppError =>
    new AppError('invalid_argument', `${record} ${field} ${quoteValue(value)} ${rule}`, {
      details: { record, field },
    });
  if (typeof value !== 'string') throw fail('must be a string');
  const length = [...value].length;
  if (value.trim().length === 0) throw fail('is empty; give 1 to 128 characters');
  if (length > NAME_MAX) {
    throw fail(`is ${String(length)} characters long; give at most ${String(NAME_MAX)}`);
  }
  if (value.trim() !== value) throw fail('has leading or trailing whitespace; trim it');
  if (CONTROL.test(value)) throw fail('holds a control character; remove it');
  return value;
}

/**
 * `value` as a credential kind.
 *
 * @throws AppError `invalid_argument` unless `value` is a lower-case slug such as `api-key`.
 */
export function checkKind(value: unknown): string {
  if (typeof value === 'string' && KIND.test(value)) return value;
  throw new AppError(
    'invalid_argument',
    `credential kind ${quoteValue(value)} is not valid: use a lower-case slug of up to 63 ` +
      'characters such as "api-key" (a-z, 0-9 and "-", starting with a letter)',
    { details: { record: 'credential', field: 'kind' } },
  );
}

/**
 * `value` as a lifetime in milliseconds; `undefined` gives `defaultMs`.
 *
 * @throws AppError `invalid_argument` unless `value` is an integer from 1 to `maxMs`.
 */
export function checkTtlMs(
  value: unknown,
  record: RecordKind,
  defaultMs: number,
  maxMs: number,
): number {
  if (value === undefined) return defaultMs;
  if (typeof value === 'number' && Number.isSafeInteger(value) && value > 0 && value <= maxMs) {
    return value;
  }
  throw new AppError(
    'invalid_argument',
    `${record} ttlMs ${quoteValue(value)} is not valid: give a whole number of milliseconds ` +
      `from 1 to ${String(maxMs)}, or omit it for ${String(defaultMs)}`,
    { details: { record, field: 'ttlMs', maxMs } },
  );
}

/**
 * `value` as an `expectedVersion`: `undefined` (no check) or a positive integer.
 *
 * @throws AppError `invalid_argument` for anything else.
 */
export function checkExpectedVersion(value: unknown, record: RecordKind): number | undefined {
  if (value === undefined) return undefined;
  if (typeof value === 'number' && Number.isSafeInteger(value) && value > 0) return value;
  throw new AppError(
    'invalid_argument',
    `${record} expectedVersion ${quoteValue(value)} is not valid: give the positive version ` +
      'you last read, or omit it to skip the check',
    { details: { record, field: 'expectedVersion' } },
  );
}

/**
 * `value` as a page size; `undefined` gives 100.
 *
 * @throws AppError `invalid_argument` unless `value` is an integer from 1 to 1000.
 */
export function checkLimit(value: unknown): number {
  if (value === undefined) return 100;
  if (typeof value === 'number' && Number.isSafeInteger(value) && value >= 1 && value <= 1000) {
    return value;
  }
  throw new AppError(
    'invalid_argument',
    `limit ${quoteValue(value)} is not valid: give a whole number from 1 to 1000`,
    { details: { field: 'limit' } },
  );
}

/** A short, safe rendering of a bad (non-secret) value for a message. */
export function quoteValue(value: unknown): string {
  if (typeof value === 'string') {
    const chars = [...value];
    return chars.length <= 80
      ? JSON.stringify(value)
      : `${JSON.stringify(chars.slice(0, 80).join(''))}…`;
  }
  if (typeof value === 'number' || typeof value === 'boolean') return String(value);
  if (value === null) return 'null';
  if (value === undefined) return '(missing)';
  return Array.isArray(value) ? '(an array)' : `(a ${typeof value})`;
}
