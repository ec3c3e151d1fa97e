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

  it('never caches a failure', async () => {
    const { asked, authenticate } = recorder();
    const cache = new AuthCache({ authenticate, ttlMs: 1_000 });
    await expect(cache.authenticate('bad-1')).rejects.toThrow('unknown token');
    await expect(cache.authenticate('bad-1')).rejects.toThrow('unknown token');
    expect(asked).toEqual(['bad-1', 'bad-1']);
    expect(cache.size).toBe(0);
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
