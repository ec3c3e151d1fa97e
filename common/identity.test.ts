import { describe, expect, it } from '@jest/globals';
import fc from 'fast-check';

import { AppError } from './errors';
import {
  formatIdentity,
  IDENTITY_MAX_LENGTH,
  IDENTITY_PATTERN,
  isIdentity,
  parseIdentity,
  type Identity,
} from './identity';

const SHAPE = 'expected provider:external_id or provider:scope:external_id';

function failure(value: unknown): AppError {
  try {
    parseIdentity(value);
  } catch (error) {
    if (error instanceof AppError) return error;
    throw error;
  }
  throw new Error(`expected ${JSON.stringify(value)} to be rejected`);
}

describe('parseIdentity', () => {
  it.each<[string, Identity]>([
    [
      'slack:T024BE7LD:U012AB3CD',
      { provider: 'slack', scope: 'T024BE7LD', externalId: 'U012AB3CD' },
    ],
    ['email:ada@example.com', { provider: 'email', externalId: 'ada@example.com' }],
    ['github:octocat', { provider: 'github', externalId: 'octocat' }],
    ['web-chat:tenant-1:7f3c', { provider: 'web-chat', scope: 'tenant-1', externalId: '7f3c' }],
    ['x1:a', { provider: 'x1', externalId: 'a' }],
    [
      'oidc:https%3A//issuer:sub',
      { provider: 'oidc', scope: 'https%3A//issuer', externalId: 'sub' },
    ],
    ['matrix:élan', { provider: 'matrix', externalId: 'élan' }],
  ])('accepts %j', (value, expected) => {
    expect(parseIdentity(value)).toEqual(expected);
    expect(isIdentity(value)).toBe(true);
    expect(formatIdentity(expected)).toBe(value);
  });

  it.each<[unknown, string]>([
    [42, `identity must be a string, got number; ${SHAPE}`],
    [null, `identity must be a string, got null; ${SHAPE}`],
    [['slack:U1'], `identity must be a string, got an array; ${SHAPE}`],
    ['', `identity is empty; ${SHAPE}`],
    ['slack', `identity "slack" has no ":" between provider and id; ${SHAPE}`],
    [
      'slack:T1:U1:extra',
      'identity "slack:T1:U1:extra" has 4 parts separated by ":", at most 3 are allowed ' +
        `(escape a ":" inside an id, e.g. as %3A); ${SHAPE}`,
    ],
    [':U1', `identity ":U1" has an empty provider; ${SHAPE}`],
    [
      'Slack:U1',
      'identity "Slack:U1" has provider "Slack": a provider starts with a lower-case letter ' +
        `and holds only a-z, 0-9 and "-"; ${SHAPE}`,
    ],
    [
      '1slack:U1',
      'identity "1slack:U1" has provider "1slack": a provider starts with a lower-case letter ' +
        `and holds only a-z, 0-9 and "-"; ${SHAPE}`,
    ],
    [
      'sl_ack:U1',
      'identity "sl_ack:U1" has provider "sl_ack": a provider starts with a lower-case letter ' +
        `and holds only a-z, 0-9 and "-"; ${SHAPE}`,
    ],
    ['slack:', `identity "slack:" has an empty external id; ${SHAPE}`],
    ['slack::U1', `identity "slack::U1" has an empty scope; ${SHAPE}`],
    ['slack:T1:', `identity "slack:T1:" has an empty external id; ${SHAPE}`],
    [
      'slack:T1:U 1',
      `identity "slack:T1:U 1" has whitespace in its external id "U 1"; remove or escape it; ${SHAPE}`,
    ],
    [
      'slack:T\t1:U1',
      `identity "slack:T\\t1:U1" has whitespace in its scope "T\\t1"; remove or escape it; ${SHAPE}`,
    ],
    [
      'email:ada@example.com\n',
      'identity "email:ada@example.com\\n" has whitespace in its external id ' +
        `"ada@example.com\\n"; remove or escape it; ${SHAPE}`,
    ],
    [
      `a:${'x'.repeat(IDENTITY_MAX_LENGTH - 1)}`,
      `identity "a:${'x'.repeat(78)}"… is 257 characters long, more than the 256 allowed`,
    ],
  ])('rejects %j', (value, message) => {
    const error = failure(value);
    expect(error.code).toBe('invalid_argument');
    expect(error.message).toBe(message);
    expect(isIdentity(value)).toBe(false);
  });

  it('counts characters, not UTF-16 units, against the length limit', () => {
    // 254 astral characters are 508 UTF-16 units but 256 code points: allowed.
    const value = `a:${'😀'.repeat(IDENTITY_MAX_LENGTH - 2)}`;
    expect(parseIdentity(value).externalId).toHaveLength((IDENTITY_MAX_LENGTH - 2) * 2);
  });

  // The CRD (IDENTITY_PATTERN) and the state plane (parseIdentity) must accept exactly the
  // same strings, or an identity the API server admits could be refused by the records.
  it('agrees with IDENTITY_PATTERN on arbitrary strings', () => {
    const pattern = new RegExp(IDENTITY_PATTERN);
    const alphabet = fc.constantFrom('a', 'z', 'A', '0', '-', '_', ':', ' ', '\t', '\n', 'é', '@');
    const candidate = fc.oneof(
      fc.string({ maxLength: 40 }),
      fc.string({ unit: alphabet, maxLength: 24 }),
    );
    fc.assert(
      fc.property(candidate, (value) => {
        expect(isIdentity(value)).toBe(pattern.test(value));
      }),
      { numRuns: 5000 },
    );
  });
});

describe('formatIdentity', () => {
  it('refuses parts that would split differently', () => {
    expect(() => formatIdentity({ provider: 'slack', externalId: 'T1:U1' })).toThrow(
      `identity parts do not round-trip: "slack:T1:U1" splits differently; ${SHAPE}`,
    );
    expect(() => formatIdentity({ provider: 'slack', scope: 'T1', externalId: 'U:1' })).toThrow(
      'has 4 parts',
    );
  });
});
