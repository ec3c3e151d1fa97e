import { AppError } from './errors';

/** A JSON value as it appears on the wire. */
export type JsonValue = null | boolean | number | string | JsonValue[] | JsonObject;

/** A JSON object: the shape of tool arguments. */
export interface JsonObject {
  [key: string]: JsonValue;
}

/**
 * Serializes `value` as canonical JSON: object keys sorted by UTF-16 code unit (the order
 * `Array.prototype.sort` gives, as in RFC 8785), no insignificant whitespace, strings
 * escaped as `JSON.stringify` escapes them, numbers in ECMAScript shortest round-trip form
 * (`-0` becomes `0`). Two parties that hold the same arguments therefore hash the same
 * bytes: approvals bind the SHA-256 of this text (docs/approvals.md).
 *
 * Object members whose value is `undefined` are omitted, as `JSON.stringify` does, so an
 * optional field left unset does not change the bytes.
 *
 * @throws AppError `invalid_argument` for a value JSON cannot carry exactly: a non-finite
 *   number, a bigint, a function, a symbol, `undefined` outside an object member, an object
 *   that is not plain (Date, Map, class instance), or a cycle.
 */
export function canonicalJson(value: unknown): string {
  return write(value, '$', new Set<object>());
}

function write(value: unknown, path: string, open: Set<object>): string {
  if (value === null) return 'null';
  switch (typeof value) {
    case 'boolean':
      return value ? 'true' : 'false';
    case 'string':
      return JSON.stringify(value);
    case 'number':
      if (!Number.isFinite(value)) throw unsupported(path, String(value));
      return JSON.stringify(value);
    case 'object':
      break;
    case 'undefined':
    case 'bigint':
    case 'function':
    case 'symbol':
      throw unsupported(path, typeof value);
  }
  if (open.has(value)) throw unsupported(path, 'a cycle');
  open.add(value);
  try {
    if (Array.isArray(value)) {
      const items: string[] = [];
      for (let i = 0; i < value.length; i++) {
        const item: unknown = value[i];
        items.push(write(item, `${path}[${i}]`, open));
      }
      return `[${items.join(',')}]`;
    }
    if (!isPlainObject(value)) throw unsupported(path, 'an object that is not plain');
    const members: string[] = [];
    for (const key of Object.keys(value).sort()) {
      const member = value[key];
      if (member === undefined) continue;
      members.push(`${JSON.stringify(key)}:${write(member, `${path}.${key}`, open)}`);
    }
    return `{${members.join(',')}}`;
  } finally {
    open.delete(value);
  }
}

function unsupported(path: string, what: string): AppError {
  return new AppError(
    'invalid_argument',
    `canonical JSON: ${path} is ${what}, which JSON cannot represent exactly; pass plain JSON data`,
    { details: { path } },
  );
}

/**
 * True when `value` is a JSON object all the way down: plain objects, arrays, strings,
 * booleans, null and finite numbers only (what `JSON.parse` returns, and what a model's
 * tool arguments must be).
 */
export function isJsonObject(value: unknown): value is JsonObject {
  return isPlainObject(value) && Object.values(value).every(isJsonValue);
}

/** True when `value` is JSON data that {@link canonicalJson} accepts without loss. */
export function isJsonValue(value: unknown): value is JsonValue {
  if (value === null || typeof value === 'string' || typeof value === 'boolean') return true;
  if (typeof value === 'number') return Number.isFinite(value);
  if (Array.isArray(value)) return value.every((item: unknown) => isJsonValue(item));
  return isJsonObject(value);
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return false;
  const proto: unknown = Object.getPrototypeOf(value);
  return proto === Object.prototype || proto === null;
}
