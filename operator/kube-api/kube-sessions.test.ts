import { describe, expect, it } from '@jest/globals';
import { isAppError } from '../../common/errors';
import { parsePersonaRolesRequest } from './kube-persona-roles';
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
  it('reads persona and ttl; 12 hours unless asked', () => {
    expect(parseSessionRequest({ persona: 'bot:desk', ttl: '720h' })).toEqual({
      persona: 'bot:desk',
      ttlMs: MAX_SESSION_TTL_MS,
    });
    expect(parseSessionRequest({ persona: 'dev:you' })).toEqual({
      persona: 'dev:you',
      ttlMs: DEFAULT_SESSION_TTL_MS,
    });
  });

  it.each([
    [{ persona: 'bot:desk', role: 'edge' }, 'role'],
    [{ persona: 'bot:desk', roles: ['admin'] }, 'roles'],
    [{ persona: 'bot:desk', roles: [] }, 'roles'],
  ])('refuses %j: minting never sets roles, and says to use the roles operation', (body, field) => {
    const got = refusal(() => parseSessionRequest(body));
    expect(got).toMatchObject({ code: 'invalid_argument', field });
    expect(got.message).toContain("minting never changes a persona's roles");
    expect(got.message).toContain('POST personaroles');
  });

  it.each([
    [{ persona: 'bot:desk', rol: 'edge' }, 'rol', 'unknown field "rol"'],
    [{ persona: 'nocolon' }, 'persona', 'persona must be an identity'],
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

describe('parsePersonaRolesRequest', () => {
  it('reads persona and roles, sorted without repeats; an empty list means none', () => {
    expect(
      parsePersonaRolesRequest({ persona: 'bot:desk', roles: ['member', 'edge', 'member'] }),
    ).toEqual({ persona: 'bot:desk', roles: ['edge', 'member'] });
    expect(parsePersonaRolesRequest({ persona: 'bot:desk', roles: [] })).toEqual({
      persona: 'bot:desk',
      roles: [],
    });
  });

  it.each([
    [{ persona: 'bot:desk' }, 'roles', 'roles must be a list'],
    [{ persona: 'bot:desk', roles: ['root'] }, 'roles', 'role must be one of admin, member, edge'],
    [{ persona: 'bot:desk', roles: [], ttl: '1h' }, 'ttl', 'unknown field "ttl"'],
    [{ persona: 'nocolon', roles: [] }, 'persona', 'persona must be an identity'],
  ])('refuses %j, naming %s', (body, field, message) => {
    const got = refusal(() => parsePersonaRolesRequest(body));
    expect(got).toMatchObject({ code: 'invalid_argument', field });
    expect(got.message).toContain(message);
  });
});
