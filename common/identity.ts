import { AppError } from './errors';

/**
 * The canonical identity rule (docs/design.md, "Edges, personas, API"): `provider:external_id`
 * or `provider:scope:external_id`. The provider is lower-case (`slack`, `github`, `email`);
 * scope and external id are any non-empty text without `:` or whitespace, so the split is
 * never ambiguous (an edge must escape a `:` inside an id, e.g. percent-encode it).
 *
 * The Conversation CRD validates `owner` and `participants` with this same pattern, and the
 * state plane parses with {@link parseIdentity}: both planes accept exactly the same
 * strings. `identity.test.ts` checks parser and pattern agree on arbitrary input.
 */
export const IDENTITY_PATTERN = '^[a-z][a-z0-9-]*(:[^:\\s]+){1,2}$';

/** Longest identity in characters (Unicode code points), as the CRD's `maxLength`. */
export const IDENTITY_MAX_LENGTH = 256;

const PROVIDER_PATTERN = /^[a-z][a-z0-9-]*$/;
const WHITESPACE = /\s/;
const SHAPE = 'expected provider:external_id or provider:scope:external_id';
/** Longest bad value quoted in a message; the rest is elided so a message stays readable. */
const QUOTE_MAX = 80;

/** An identity split into its parts. `scope` is absent for the two-part form. */
export interface Identity {
  readonly provider: string;
  readonly scope?: string;
  readonly externalId: string;
}

/**
 * Parses and validates an identity string.
 *
 * @example
 * parseIdentity('slack:T024BE7LD:U012AB3CD'); // { provider: 'slack', scope: 'T024BE7LD', externalId: 'U012AB3CD' }
 * parseIdentity('email:ada@example.com'); // { provider: 'email', externalId: 'ada@example.com' }
 *
 * @throws AppError `invalid_argument` naming the bad value, the part that is wrong and the
 *   expected shape: not a string, empty, longer than {@link IDENTITY_MAX_LENGTH}, too few
 *   or too many `:`, a provider that is not lower-case `[a-z][a-z0-9-]*`, an empty part, or
 *   whitespace in a part.
 */
export function parseIdentity(value: unknown): Identity {
  if (typeof value !== 'string') {
    throw invalid(`identity must be a string, got ${describeType(value)}; ${SHAPE}`);
  }
  if (value.length === 0) throw invalid(`identity is empty; ${SHAPE}`);
  const length = [...value].length;
  if (length > IDENTITY_MAX_LENGTH) {
    throw invalid(
      `identity ${quote(value)} is ${String(length)} characters long, more than the ` +
        `${String(IDENTITY_MAX_LENGTH)} allowed`,
    );
  }
  const parts = value.split(':');
  if (parts.length < 2) {
    throw invalid(`identity ${quote(value)} has no ":" between provider and id; ${SHAPE}`);
  }
  if (parts.length > 3) {
    throw invalid(
      `identity ${quote(value)} has ${String(parts.length)} parts separated by ":", at most 3 ` +
        `are allowed (escape a ":" inside an id, e.g. as %3A); ${SHAPE}`,
    );
  }
  const [provider = '', second = '', third] = parts;
  if (provider.length === 0)
    throw invalid(`identity ${quote(value)} has an empty provider; ${SHAPE}`);
  if (!PROVIDER_PATTERN.test(provider)) {
    throw invalid(
      `identity ${quote(value)} has provider ${quote(provider)}: a provider starts with a ` +
        `lower-case letter and holds only a-z, 0-9 and "-"; ${SHAPE}`,
    );
  }
  const named: [string, string][] =
    third === undefined
      ? [['external id', second]]
      : [
          ['scope', second],
          ['external id', third],
        ];
  for (const [name, part] of named) {
    if (part.length === 0) throw invalid(`identity ${quote(value)} has an empty ${name}; ${SHAPE}`);
    if (WHITESPACE.test(part)) {
      throw invalid(
        `identity ${quote(value)} has whitespace in its ${name} ${quote(part)}; ` +
          `remove or escape it; ${SHAPE}`,
      );
    }
  }
  return third === undefined
    ? { provider, externalId: second }
    : { provider, scope: second, externalId: third };
}

/** True when `value` is a valid identity string (the rule of {@link parseIdentity}). */
export function isIdentity(value: unknown): value is string {
  try {
    parseIdentity(value);
    return true;
  } catch {
    return false;
  }
}

/**
 * The string form of an identity: the inverse of {@link parseIdentity}.
 *
 * @throws AppError `invalid_argument` when the parts do not form a valid identity (for
 *   example an external id holding `:`), with the message {@link parseIdentity} gives.
 */
export function formatIdentity(identity: Identity): string {
  const text =
    identity.scope === undefined
      ? `${identity.provider}:${identity.externalId}`
      : `${identity.provider}:${identity.scope}:${identity.externalId}`;
  const parsed = parseIdentity(text);
  if (parsed.scope !== identity.scope || parsed.externalId !== identity.externalId) {
    throw invalid(`identity parts do not round-trip: ${quote(text)} splits differently; ${SHAPE}`);
  }
  return text;
}

/**
 * The identity of a Kubernetes user: `kubernetes:<username>`, with `%`, `:` and whitespace
 * percent-encoded, so `system:serviceaccount:team:bot` is
 * `kubernetes:system%3Aserviceaccount%3Ateam%3Abot` and two usernames never share one
 * (docs/kube-api.md, "Who is calling").
 */
export function kubernetesIdentityOf(username: string): string {
  const escaped = username.replace(/[%:\s]/gu, (c) => encodeURIComponent(c));
  return `kubernetes:${escaped}`;
}

function invalid(message: string): AppError {
  return new AppError('invalid_argument', message);
}

/** JSON-quoted (so whitespace and control characters show), elided past QUOTE_MAX. */
function quote(value: string): string {
  const chars = [...value];
  return chars.length <= QUOTE_MAX
    ? JSON.stringify(value)
    : `${JSON.stringify(chars.slice(0, QUOTE_MAX).join(''))}…`;
}

function describeType(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  return typeof value;
}
