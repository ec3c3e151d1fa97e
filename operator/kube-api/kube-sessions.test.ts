import { describe, expect, it } from '@jest/globals';
import { isAppError } from '../../common/errors';
import {
  DEFAULT_SESSION_TTL_MS,
  MAX_SESSION_TTL_MS,
  parseSessionRequest,
  parseSessionTtl,
} from './kube-sessions';

/** The AppError `run` throws, as code, field and message. */
function refusal(run: () => unknown): { code: string; field: unknown; message: string } {
  try {
    run();
  } catch (error: unknown) {
    if (!isAppError(error)) throw error;
    return { code: error.code, field: error.details?.['field'], message: error.message };
  }
  throw new Error('it did not throw');
}

describe('parseSessionTtl', () => {
  it.each([
    ['720h', MAX_SESSION_TTL_MS],
    ['90m', 90 * 60_000],
    ['1h30m', 90 * 60_000],
    ['45s', 45_000],
    ['1h0m1s', 3_601_000],
  ])('reads %s', (ttl, ms) => {
    expect(parseSessionTtl(ttl)).toBe(ms);
  });

  it.each(['', '0h', '721h', '31d', '1.5h', '-1h', 'h', '30m1h'])('refuses %j', (ttl) => {
    expect(refusal(() => parseSessionTtl(ttl))).toMatchObject({
      code: 'invalid_argument',
      field: 'ttl',
    });
  });

  it('refuses a number: a bare count has no unit', () => {
    expect(refusal(() => parseSessionTtl(3600)).message).toContain('"720h", "90m" or "1h30m"');
  });
});

describe('parseSessionRequest', () => {
  it('reads persona, role and ttl; a member for 12 hours unless asked', () => {
    expect(parseSessionRequest({ persona: 'bot:desk', role: 'edge', ttl: '720h' })).toEqual({
      persona: 'bot:desk',
      roles: ['edge'],
      ttlMs: MAX_SESSION_TTL_MS,
    });
    expect(parseSessionRequest({ persona: 'dev:you' })).toEqual({
      persona: 'dev:you',
      roles: ['member'],
      ttlMs: DEFAULT_SESSION_TTL_MS,
    });
    expect(
      parseSessionRequest({ persona: 'dev:you', roles: ['member', 'admin', 'member'] }),
    ).toEqual({ persona: 'dev:you', roles: ['admin', 'member'], ttlMs: DEFAULT_SESSION_TTL_MS });
  });

  it.each([
    [{ persona: 'bot:desk', rol: 'edge' }, 'rol', 'unknown field "rol"'],
    [{ persona: 'nocolon' }, 'persona', 'persona must be an identity'],
    [{ persona: 'bot:desk', role: 'root' }, 'role', 'role must be one of admin, member, edge'],
    [{ persona: 'bot:desk', roles: [] }, 'roles', 'non-empty list'],
    [{ persona: 'bot:desk', role: 'edge', roles: ['edge'] }, 'roles', 'not both'],
    [{ persona: 'bot:desk', ttl: '31d' }, 'ttl', 'ttl must be a duration'],
  ])('refuses %j, naming %s', (body, field, message) => {
    const got = refusal(() => parseSessionRequest(body));
    expect(got).toMatchObject({ code: 'invalid_argument', field });
    expect(got.message).toContain(message);
  });

  it('refuses a body that is not an object', () => {
    expect(refusal(() => parseSessionRequest(['bot:desk'])).code).toBe('invalid_argument');
  });
});
