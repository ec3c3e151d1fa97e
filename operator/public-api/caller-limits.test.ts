import { describe, expect, it } from '@jest/globals';
import type { Caller } from '../turns/turn-service';
import { errorAnswer } from './api-error';
import {
  CallerLimits,
  countOwnedConversations,
  DEFAULT_LIMITS,
  LimitError,
  type LimitSettings,
} from './caller-limits';

function caller(name: string, roles: string[] = ['member']): Caller {
  return {
    identity: `email:${name}@example.com`,
    identities: [`email:${name}@example.com`],
    personaId: `persona-${name}`,
    roles,
    sessionId: '',
  };
}
const ann = caller('ann');
const bob = caller('bob');

function limits(
  settings: Partial<LimitSettings>,
  owned: Record<string, number> = {},
): CallerLimits {
  return new CallerLimits({
    settings: { ...DEFAULT_LIMITS, ...settings },
    ownedConversations: (identity) => owned[identity] ?? 0,
    now: () => 0,
  });
}

function refusal(action: () => unknown): LimitError {
  try {
    action();
  } catch (error) {
    if (error instanceof LimitError) return error;
    throw error;
  }
  throw new Error('expected a LimitError');
}

describe('CallerLimits: conversations', () => {
  it('refuses at the count the cache shows, per caller', () => {
    const owned = { [ann.identity]: 2 };
    const l = limits({ conversations: 2 }, owned);
    const error = refusal(() => l.reserveConversation(ann));
    expect([error.limit, error.details.current, error.details.max]).toEqual([
      'conversations',
      2,
      2,
    ]);
    expect(() => l.reserveConversation(bob)()).not.toThrow();
  });

  it('counts creates in flight, so concurrent creates cannot all take the last place', () => {
    const owned: Record<string, number> = { [ann.identity]: 1 };
    const l = limits({ conversations: 3 }, owned);
    const first = l.reserveConversation(ann);
    const second = l.reserveConversation(ann);
    // 1 owned + 2 in flight = 3: the limit.
    expect(refusal(() => l.reserveConversation(ann)).details.current).toBe(3);
    // The first lands in the cache while still in flight (its turn runs): not counted twice.
    owned[ann.identity] = 2;
    expect(refusal(() => l.reserveConversation(ann)).details.current).toBe(3);
    first();
    second();
    owned[ann.identity] = 3;
    expect(refusal(() => l.reserveConversation(ann)).details.current).toBe(3);
    // One is deleted: its place is free again once nothing is in flight.
    owned[ann.identity] = 2;
    expect(() => l.reserveConversation(ann)).not.toThrow();
  });

  it('gives the place back when a create fails, once however often release is called', () => {
    const l = limits({ conversations: 1 });
    const release = l.reserveConversation(ann);
    expect(() => l.reserveConversation(ann)).toThrow(LimitError);
    release();
    release();
    const again = l.reserveConversation(ann);
    expect(() => l.reserveConversation(ann)).toThrow(LimitError);
    again();
  });

  it('is off at 0', () => {
    const l = limits({ conversations: 0 }, { [ann.identity]: 1_000 });
    for (let i = 0; i < 10; i += 1) expect(typeof l.reserveConversation(ann)).toBe('function');
  });
});

describe('CallerLimits: streams and requests', () => {
  it('counts streams per caller and frees a slot once per release', () => {
    const l = limits({ streams: 2 });
    const one = l.openStream(ann);
    l.openStream(ann);
    expect(refusal(() => l.openStream(ann)).details).toMatchObject({ current: 2, max: 2 });
    l.openStream(bob);
    one();
    one();
    expect(l.streamsOf(ann)).toBe(1);
    l.openStream(ann);
    expect(() => l.openStream(ann)).toThrow(LimitError);
  });

  it('scales every limit of an edge by edgeScale', () => {
    const edge = caller('bot', ['edge']);
    const l = limits({
      streams: 1,
      conversations: 1,
      requestsPerSecond: 1,
      burst: 1,
      edgeScale: 2,
    });
    l.openStream(edge);
    l.openStream(edge);
    expect(() => l.openStream(edge)).toThrow(LimitError);
    l.reserveConversation(edge);
    l.reserveConversation(edge);
    expect(() => l.reserveConversation(edge)).toThrow(LimitError);
    l.admitRequest(edge);
    l.admitRequest(edge);
    expect(refusal(() => l.admitRequest(edge)).message).toContain(
      'POLYCHROME_LIMIT_REQUEST_BURST=1 times POLYCHROME_LIMIT_EDGE_SCALE=2 for an edge',
    );
  });

  it('is answered 429 resource_exhausted with Retry-After and the details, in the API error shape', () => {
    const l = limits({ requestsPerSecond: 0.25, burst: 1 });
    l.admitRequest(ann);
    const answer = errorAnswer(
      refusal(() => l.admitRequest(ann)),
      'req-1',
    );
    expect(answer.status).toBe(429);
    expect(answer.headers).toEqual({ 'retry-after': '4' });
    expect(answer.body.error).toMatchObject({
      code: 'resource_exhausted',
      details: {
        limit: 'requests',
        scope: 'caller, per replica',
        perSecond: 0.25,
        setting: 'POLYCHROME_LIMIT_REQUESTS_PER_SECOND',
        retryAfterSeconds: 4,
      },
    });
  });
});

describe('countOwnedConversations', () => {
  const object = (namespace: string, owner: unknown, deleting = false) => ({
    metadata: { namespace, ...(deleting ? { deletionTimestamp: '2026-01-01T00:00:00Z' } : {}) },
    spec: { owner },
  });

  it('counts the owner’s objects in the namespace that are not being deleted', () => {
    const objects = [
      object('default', ann.identity),
      object('default', ann.identity),
      object('default', ann.identity, true),
      // Another namespace: a tenant writing spec.owner there cannot use up ann's place.
      object('team-a', ann.identity),
      object('default', bob.identity),
      object('default', undefined),
      { metadata: { namespace: 'default' } },
    ];
    expect(countOwnedConversations(objects, 'default', ann.identity)).toBe(2);
    expect(countOwnedConversations(objects, 'default', bob.identity)).toBe(1);
  });
});
