import { describe, expect, it } from '@jest/globals';
import { AppError } from '../../common/errors';
import type { PersonaRecord, SessionRecord } from '../../common/records-types';
import type { RecordsClient } from '../../common/records-client';
import { StateCallError } from '../../common/state-call-errors';
import { recordsAuthenticator } from './records-authenticator';

const session: SessionRecord = {
  id: 'session-1',
  personaId: 'persona-1',
  createdAtMs: 1,
  expiresAtMs: 2,
  revokedAtMs: undefined,
  mintedBy: 'kubernetes:carol',
};
const persona: PersonaRecord = {
  id: 'persona-1',
  displayName: 'Ada',
  identities: ['email:ada@example.com', 'github:ada'],
  roles: ['admin', 'member'],
  version: 3,
  createdAtMs: 1,
  updatedAtMs: 1,
};

/** A records stand-in answering `authenticate` as the state plane would. */
function records(
  answer: () => Promise<{ session: SessionRecord; persona: PersonaRecord }>,
): Pick<RecordsClient, 'authenticate'> & { asked: { token: string; timeoutMs?: number }[] } {
  const asked: { token: string; timeoutMs?: number }[] = [];
  return {
    asked,
    authenticate: (token, options = {}) => {
      asked.push({
        token,
        ...(options.timeoutMs === undefined ? {} : { timeoutMs: options.timeoutMs }),
      });
      return answer();
    },
  };
}

function stateError(
  code:
    | 'unauthenticated'
    | 'invalid_argument'
    | 'unavailable'
    | 'deadline_exceeded'
    | 'permission_denied',
  fromServer: boolean,
): StateCallError {
  return new StateCallError(code, `state plane at 10.0.0.1:7443: ${code}`, {
    method: 'Authenticate',
    grpcStatus: 0,
    fromServer,
  });
}

describe('recordsAuthenticator', () => {
  it('makes the caller from the session and the persona: the first identity, all identities, roles', async () => {
    const stub = records(() => Promise.resolve({ session, persona }));
    const authenticate = recordsAuthenticator(stub, { timeoutMs: 1234 });
    expect(await authenticate('pcs_token')).toEqual({
      identity: 'email:ada@example.com',
      identities: ['email:ada@example.com', 'github:ada'],
      personaId: 'persona-1',
      roles: ['admin', 'member'],
      sessionId: 'session-1',
    });
    expect(stub.asked).toEqual([{ token: 'pcs_token', timeoutMs: 1234 }]);
  });

  it('never gives admin to a persona that links a ServiceAccount, even when an old record holds it', async () => {
    // Records refuse this combination now; one written before they did still reads.
    const desk = {
      ...persona,
      identities: ['bot:desk', 'kubernetes:system%3Aserviceaccount%3Ateam%3Adesk'],
      roles: ['admin', 'edge'] as const,
    };
    const authenticate = recordsAuthenticator(
      records(() => Promise.resolve({ session, persona: desk })),
    );
    expect((await authenticate('pcs_token')).roles).toEqual(['edge']);
  });

  it.each([
    ['unauthenticated', true, 'unauthenticated', /malformed, unknown, expired or revoked/],
    ['invalid_argument', true, 'unauthenticated', /malformed, unknown, expired or revoked/],
    ['unavailable', false, 'unavailable', /cannot be checked right now/],
    ['deadline_exceeded', false, 'unavailable', /cannot be checked right now/],
    ['permission_denied', true, 'internal', /checking the session token failed/],
  ] as const)(
    'classifies %s from the records (fromServer %s) as %s',
    async (code, fromServer, expected, message) => {
      const original = stateError(code, fromServer);
      const authenticate = recordsAuthenticator(records(() => Promise.reject(original)));
      const error: unknown = await authenticate('pcs_token').catch((e: unknown) => e);
      expect(error).toBeInstanceOf(AppError);
      expect(error).toMatchObject({ code: expected, cause: original });
      expect((error as AppError).message).toMatch(message);
      expect((error as AppError).message).not.toContain('10.0.0.1');
    },
  );

  it('refuses a persona without identities (nothing to attribute to)', async () => {
    const lonely = { ...persona, identities: [] };
    const authenticate = recordsAuthenticator(
      records(() => Promise.resolve({ session, persona: lonely })),
    );
    await expect(authenticate('pcs_token')).rejects.toMatchObject({
      code: 'permission_denied',
      message: expect.stringContaining('persona persona-1 has no linked identity'),
    });
  });

  it('turns a non-AppError failure into internal', async () => {
    const authenticate = recordsAuthenticator(records(() => Promise.reject(new TypeError('boom'))));
    await expect(authenticate('pcs_token')).rejects.toMatchObject({ code: 'internal' });
  });
});
