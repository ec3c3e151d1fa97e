import { describe, expect, it } from '@jest/globals';
import { AppError } from '../../common/errors';
import type { Caller } from '../turns/turn-service';
import { AuthCache } from './auth-cache';

function caller(name: string): Caller {
  return {
    identity: `email:${name}@example.com`,
    identities: [`email:${name}@example.com`],
    personaId: `persona-${name}`,
    roles: ['member'],
    sessionId: `session-${name}`,
  };
}

/** An authenticator that knows tokens named after people and logs each token asked. */
function recorder(): { asked: string[]; authenticate: (token: string) => Promise<Caller> } {
  const asked: string[] = [];
  return {
    asked,
    authenticate: (token) => {
      asked.push(token);
      return token.startsWith('bad')
        ? Promise.reject(new AppError('unauthenticated', 'unknown token'))
        : Promise.resolve(caller(token));
    },
  };
}

describe('AuthCache', () => {
  it('reuses a success until ttlMs has passed, then asks again', async () => {
    const { asked, authenticate } = recorder();
    let now = 0;
    const cache = new AuthCache({ authenticate, ttlMs: 100, now: () => now });
    expect(await cache.authenticate('ann')).toEqual(caller('ann'));
    now = 99;
    expect(await cache.authenticate('ann')).toEqual(caller('ann'));
    expect(asked).toEqual(['ann']);
    now = 100;
    await cache.authenticate('ann');
    expect(asked).toEqual(['ann', 'ann']);
  });

  it('refuses an unauthenticated token again for failureTtlMs without asking, then asks', async () => {
    const { asked, authenticate } = recorder();
    let now = 0;
    const cache = new AuthCache({ authenticate, failureTtlMs: 100, now: () => now });
    await expect(cache.authenticate('bad-1')).rejects.toThrow('unknown token');
    now = 99;
    await expect(cache.authenticate('bad-1')).rejects.toMatchObject({
      code: 'unauthenticated',
      message: 'unknown token',
    });
    expect(asked).toEqual(['bad-1']);
    expect([cache.size, cache.failureCount]).toEqual([0, 1]);
    now = 100;
    await expect(cache.authenticate('bad-1')).rejects.toThrow('unknown token');
    expect(asked).toEqual(['bad-1', 'bad-1']);
  });

  // unavailable: the backend may be back at the next request; permission_denied: an admin
  // may link the persona at any moment; internal: a fault is no answer about the token.
  it.each(['unavailable', 'permission_denied', 'internal'] as const)(
    'never remembers %s',
    async (code) => {
      let calls = 0;
      const cache = new AuthCache({
        authenticate: () => {
          calls += 1;
          return Promise.reject(new AppError(code, 'no'));
        },
        failureTtlMs: 1_000,
        now: () => 0,
      });
      await expect(cache.authenticate('tok')).rejects.toMatchObject({ code });
      await expect(cache.authenticate('tok')).rejects.toMatchObject({ code });
      expect(calls).toBe(2);
      expect(cache.failureCount).toBe(0);
    },
  );

  it('asks every time for a refused token when failureTtlMs is 0', async () => {
    const { asked, authenticate } = recorder();
    const cache = new AuthCache({ authenticate, failureTtlMs: 0 });
    await expect(cache.authenticate('bad-1')).rejects.toThrow('unknown token');
    await expect(cache.authenticate('bad-1')).rejects.toThrow('unknown token');
    expect(asked).toEqual(['bad-1', 'bad-1']);
  });

  it('bounds refused tokens apart from good ones: a flood of bad tokens never pushes out a good one', async () => {
    const { asked, authenticate } = recorder();
    const cache = new AuthCache({ authenticate, maxEntries: 1, maxFailures: 2, now: () => 0 });
    await cache.authenticate('ann');
    for (let i = 0; i < 50; i += 1) {
      await expect(cache.authenticate(`bad-${String(i)}`)).rejects.toThrow('unknown token');
    }
    expect([cache.size, cache.failureCount]).toEqual([1, 2]);
    asked.length = 0;
    await cache.authenticate('ann');
    await expect(cache.authenticate('bad-49')).rejects.toThrow('unknown token');
    expect(asked).toEqual([]);
    // The oldest refusal was forgotten: asked again.
    await expect(cache.authenticate('bad-0')).rejects.toThrow('unknown token');
    expect(asked).toEqual(['bad-0']);
  });

  it('keeps digests of refused tokens, not the tokens', async () => {
    const { authenticate } = recorder();
    const cache = new AuthCache({ authenticate });
    await expect(cache.authenticate('bad_secret_token_value')).rejects.toThrow();
    const keys = [...(Reflect.get(cache, 'failures') as Map<string, unknown>).keys()];
    expect(keys).toHaveLength(1);
    expect(keys[0]).toMatch(/^[0-9a-f]{64}$/);
    expect(keys[0]).not.toContain('secret');
  });

  it('forgets the oldest token past maxEntries', async () => {
    const { asked, authenticate } = recorder();
    const cache = new AuthCache({ authenticate, ttlMs: 1_000, maxEntries: 2, now: () => 0 });
    await cache.authenticate('ann');
    await cache.authenticate('bob');
    await cache.authenticate('cat');
    expect(cache.size).toBe(2);
    await cache.authenticate('bob');
    await cache.authenticate('cat');
    expect(asked).toEqual(['ann', 'bob', 'cat']);
    await cache.authenticate('ann');
    expect(asked).toEqual(['ann', 'bob', 'cat', 'ann']);
  });

  it('shares one call between concurrent checks of one token', async () => {
    let release: () => void = () => undefined;
    let calls = 0;
    const cache = new AuthCache({
      authenticate: async (token) => {
        calls += 1;
        await new Promise<void>((resolve) => {
          release = resolve;
        });
        return caller(token);
      },
      ttlMs: 0,
    });
    const both = Promise.all([cache.authenticate('ann'), cache.authenticate('ann')]);
    release();
    expect(await both).toEqual([caller('ann'), caller('ann')]);
    expect(calls).toBe(1);
    // ttlMs 0: nothing is kept afterwards.
    const again = cache.authenticate('ann');
    release();
    await again;
    expect(calls).toBe(2);
  });

  it('keeps digests, not tokens', async () => {
    const { authenticate } = recorder();
    const cache = new AuthCache({ authenticate });
    await cache.authenticate('pcs_secret_token_value');
    const keys = [...(Reflect.get(cache, 'entries') as Map<string, unknown>).keys()];
    expect(keys).toHaveLength(1);
    expect(keys[0]).toMatch(/^[0-9a-f]{64}$/);
    expect(keys[0]).not.toContain('secret');
  });
});
