import { describe, expect, it } from '@jest/globals';
import { ObjectKind } from './kube-api';
import { RecentWrites } from './recent-writes';

const obj = (uid: string, resourceVersion: string, extra: Record<string, unknown> = {}) => ({
  metadata: { namespace: 'team', name: 'c1', uid, resourceVersion, ...extra },
});

function fixture(ttlMs = 30_000): { recent: RecentWrites; advance: (ms: number) => void } {
  let now = 1_000;
  return {
    recent: new RecentWrites({ ttlMs, now: () => now }),
    advance: (ms) => {
      now += ms;
    },
  };
}

describe('RecentWrites', () => {
  describe('a pod we created', () => {
    const created = obj('new', '10');
    it.each([
      ['not in the cache yet: the created pod', undefined, created],
      ['the cache holds the previous pod of the name: the created pod', obj('old', '5'), created],
      ['the cache has it: the cache', obj('new', '10'), obj('new', '10')],
      ['the cache has a later version: the cache', obj('new', '12'), obj('new', '12')],
    ])('%s', (_name, cached, seen) => {
      const { recent } = fixture();
      recent.wrote(ObjectKind.Pod, created);
      expect(recent.resolve(ObjectKind.Pod, 'team', 'c1', cached)).toEqual(seen);
    });

    it('is dropped once the cache has it, and on its watch event', () => {
      const { recent } = fixture();
      recent.wrote(ObjectKind.Pod, created);
      recent.resolve(ObjectKind.Pod, 'team', 'c1', obj('new', '11'));
      expect(recent.size).toBe(0);
      recent.wrote(ObjectKind.Pod, created);
      // An event about the previous pod of the name does not drop it.
      expect(recent.observe(ObjectKind.Pod, obj('old', '6'), true)).toBe(false);
      expect(recent.size).toBe(1);
      expect(recent.observe(ObjectKind.Pod, obj('new', '10'), false)).toBe(true);
      expect(recent.size).toBe(0);
      expect(recent.resolve(ObjectKind.Pod, 'team', 'c1', undefined)).toBeUndefined();
    });

    it('stands in for the cache for ttlMs at most', () => {
      const { recent, advance } = fixture(1_000);
      recent.wrote(ObjectKind.Pod, created);
      advance(999);
      expect(recent.resolve(ObjectKind.Pod, 'team', 'c1', undefined)).toEqual(created);
      advance(1);
      expect(recent.resolve(ObjectKind.Pod, 'team', 'c1', undefined)).toBeUndefined();
    });

    it('drops expired entries as new ones are written', () => {
      const { recent, advance } = fixture(1_000);
      recent.wrote(ObjectKind.Pod, created);
      advance(1_000);
      recent.wrote(ObjectKind.Claim, created);
      expect(recent.size).toBe(1);
    });
  });

  describe('the Conversation after our status write', () => {
    const written = obj('u', '20', { finalizers: ['polychrome.dev/cleanup'] });
    it.each([
      ['the cache is older: what we wrote', obj('u', '19'), written],
      ['the cache has our write: the cache', obj('u', '20'), obj('u', '20')],
      // Someone wrote after us, and the cache already has it (our echo came first).
      ['the cache is newer: the cache', obj('u', '21'), obj('u', '21')],
      ['the cache is newer by a digit: the cache', obj('u', '100'), obj('u', '100')],
      ['another object of the name: the cache', obj('other', '30'), obj('other', '30')],
      ['gone from the cache: gone', undefined, undefined],
    ])('%s', (_name, cached, seen) => {
      const { recent } = fixture();
      recent.wrote(ObjectKind.Conversation, written);
      expect(recent.resolve(ObjectKind.Conversation, 'team', 'c1', cached)).toEqual(seen);
    });

    it('recognises the echo of our write (and only it), then lets the cache speak', () => {
      const { recent } = fixture();
      recent.wrote(ObjectKind.Conversation, written);
      // An event from before our write, delivered late: not ours, the entry stays.
      expect(recent.observe(ObjectKind.Conversation, obj('u', '19'), false)).toBe(false);
      expect(recent.resolve(ObjectKind.Conversation, 'team', 'c1', obj('u', '19'))).toEqual(
        written,
      );
      expect(recent.observe(ObjectKind.Conversation, obj('u', '20'), false)).toBe(true);
      expect(recent.observe(ObjectKind.Conversation, obj('u', '20'), false)).toBe(false);
      expect(recent.resolve(ObjectKind.Conversation, 'team', 'c1', obj('u', '21'))).toEqual(
        obj('u', '21'),
      );
    });

    it('a later event drops it when our echo arrived before our write returned', () => {
      // The watch can deliver the echo of a write before the write's response is read, so
      // the entry is recorded after its echo. The next event (another writer's, such as
      // the turn code's lastTurnTime) must still let the cache speak: otherwise every
      // pass sees our stale object, writes nothing, and the Conversation waits out the TTL.
      const { recent } = fixture();
      expect(recent.observe(ObjectKind.Conversation, obj('u', '20'), false)).toBe(false);
      recent.wrote(ObjectKind.Conversation, written);
      expect(recent.observe(ObjectKind.Conversation, obj('u', '21'), false)).toBe(false);
      expect(recent.size).toBe(0);
      expect(recent.resolve(ObjectKind.Conversation, 'team', 'c1', obj('u', '21'))).toEqual(
        obj('u', '21'),
      );
    });

    it('falls back to equality for resourceVersions that do not compare', () => {
      const { recent } = fixture();
      const opaque = obj('u', 'b7', { finalizers: [] });
      recent.wrote(ObjectKind.Conversation, opaque);
      expect(recent.resolve(ObjectKind.Conversation, 'team', 'c1', obj('u', 'c1'))).toEqual(opaque);
      expect(recent.observe(ObjectKind.Conversation, obj('u', 'c1'), false)).toBe(false);
      expect(recent.size).toBe(1);
      expect(recent.observe(ObjectKind.Conversation, obj('u', 'b7'), false)).toBe(true);
      expect(recent.size).toBe(0);
    });

    it('a conflicting write forgets it (the cache relisted past our write)', () => {
      const { recent } = fixture();
      recent.wrote(ObjectKind.Conversation, written);
      recent.forget(ObjectKind.Conversation, 'team', 'c1');
      expect(recent.resolve(ObjectKind.Conversation, 'team', 'c1', obj('u', '25'))).toEqual(
        obj('u', '25'),
      );
    });

    it('a delete event drops it', () => {
      const { recent } = fixture();
      recent.wrote(ObjectKind.Conversation, written);
      expect(recent.observe(ObjectKind.Conversation, obj('u', '21'), true)).toBe(false);
      expect(recent.size).toBe(0);
    });
  });

  describe('a pod we deleted', () => {
    it('is seen as being deleted until the cache shows it so, or shows it gone', () => {
      const { recent } = fixture();
      recent.deleted(ObjectKind.Pod, 'team', 'c1', 'p1');
      const seen = recent.resolve(ObjectKind.Pod, 'team', 'c1', obj('p1', '7'));
      expect(seen).toMatchObject({
        metadata: { uid: 'p1', deletionTimestamp: expect.any(String) },
      });
      expect(recent.size).toBe(1);
      const deleting = obj('p1', '8', { deletionTimestamp: '2026-01-01T00:00:00Z' });
      expect(recent.resolve(ObjectKind.Pod, 'team', 'c1', deleting)).toEqual(deleting);
      expect(recent.size).toBe(0);
    });

    it.each([
      ['gone', undefined],
      ['replaced by another pod of the name', obj('p2', '9')],
    ])('the cache shows it %s: the cache', (_name, cached) => {
      const { recent } = fixture();
      recent.deleted(ObjectKind.Pod, 'team', 'c1', 'p1');
      expect(recent.resolve(ObjectKind.Pod, 'team', 'c1', cached)).toEqual(cached);
      expect(recent.size).toBe(0);
    });

    it('its delete event drops the entry', () => {
      const { recent } = fixture();
      recent.deleted(ObjectKind.Pod, 'team', 'c1', 'p1');
      expect(recent.observe(ObjectKind.Pod, obj('p1', '8'), true)).toBe(false);
      expect(recent.size).toBe(0);
    });
  });
});
