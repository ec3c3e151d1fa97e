import { describe, expect, it } from '@jest/globals';
import {
  decideAcquire,
  isHeldLeaseStale,
  leaseLabelsFor,
  leaseNameFor,
  observe,
  type LeaseRecord,
} from './lease-rules';

const held = (holder: string, rv = '10', transitions = 3): LeaseRecord => ({
  holder,
  transitions,
  resourceVersion: rv,
});

/** The configured lease duration of every case below. */
const DURATION_MS = 15_000;

describe('decideAcquire', () => {
  it.each([
    ['absent lease', undefined, undefined, 0, { action: 'create' }],
    ['our own lease', held('me'), undefined, 0, { action: 'renew', fencingToken: 3 }],
    ['released lease', held(''), undefined, 0, { action: 'take_over', fencingToken: 4 }],
    [
      'first sight of a live lease: wait a whole duration',
      held('other'),
      undefined,
      1_000,
      { action: 'wait', holder: 'other', retryAtMs: 16_000 },
    ],
    [
      'unchanged for less than a duration',
      held('other'),
      { resourceVersion: '10', observedAtMs: 1_000 },
      15_999,
      { action: 'wait', holder: 'other', retryAtMs: 16_000 },
    ],
    [
      'unchanged for a whole duration',
      held('other'),
      { resourceVersion: '10', observedAtMs: 1_000 },
      16_000,
      { action: 'take_over', fencingToken: 4 },
    ],
    [
      'renewed since we looked (resourceVersion moved): the clock restarts',
      held('other', '11'),
      { resourceVersion: '10', observedAtMs: 1_000 },
      20_000,
      { action: 'wait', holder: 'other', retryAtMs: 35_000 },
    ],
  ] as const)('%s', (_name, record, observation, now, expected) => {
    expect(decideAcquire(record, observation, 'me', now, DURATION_MS)).toEqual(expected);
  });
});

describe('decideAcquire judges expiry by the configured duration, never by the record', () => {
  // What a writer of the Lease could put in leaseDurationSeconds is not part of the record
  // the rules read; toRecord (conversation-leases.ts) leaves it out. Here the configured
  // duration alone moves the expiry: the same record, seen at the same times.
  const seen = { resourceVersion: '10', observedAtMs: 1_000 };
  it.each([
    // A holder that asked for 999999 s is still taken over after the configured 15 s.
    [
      'configured 15 s, just before',
      15_000,
      15_999,
      { action: 'wait', holder: 'other', retryAtMs: 16_000 },
    ],
    ['configured 15 s, at expiry', 15_000, 16_000, { action: 'take_over', fencingToken: 4 }],
    // A holder that asked for 1 s keeps the lease for the whole configured minute.
    [
      'configured 60 s, 59 s later',
      60_000,
      60_000,
      { action: 'wait', holder: 'other', retryAtMs: 61_000 },
    ],
    ['configured 60 s, at expiry', 60_000, 61_000, { action: 'take_over', fencingToken: 4 }],
  ] as const)('%s', (_name, durationMs, now, expected) => {
    expect(decideAcquire(held('other'), seen, 'me', now, durationMs)).toEqual(expected);
  });

  it('ignores a duration a Lease writer put in the record', () => {
    const huge = { ...held('other'), leaseDurationMs: 999_999_000 } as LeaseRecord;
    const tiny = { ...held('other'), leaseDurationMs: 1 } as LeaseRecord;
    // Huge: does not extend expiry past the configured duration.
    expect(decideAcquire(huge, seen, 'me', 16_000, DURATION_MS)).toEqual({
      action: 'take_over',
      fencingToken: 4,
    });
    // Tiny: does not shorten it.
    expect(decideAcquire(tiny, seen, 'me', 2_000, DURATION_MS)).toEqual({
      action: 'wait',
      holder: 'other',
      retryAtMs: 16_000,
    });
  });
});

describe('observe', () => {
  it('keeps the first sighting while the record does not change', () => {
    const first = observe(held('other'), undefined, 5);
    expect(observe(held('other'), first, 99)).toBe(first);
    expect(observe(held('other', '11'), first, 99)).toEqual({
      resourceVersion: '11',
      observedAtMs: 99,
    });
  });
});

describe('isHeldLeaseStale', () => {
  it('gives a held lease up once renewals have failed for a whole duration', () => {
    expect(isHeldLeaseStale(1_000, 15_000, 15_999)).toBe(false);
    expect(isHeldLeaseStale(1_000, 15_000, 16_000)).toBe(true);
  });
});

describe('leaseNameFor', () => {
  it('names the lease after the conversation uid', () => {
    expect(leaseNameFor('0b9e-42')).toBe('conv-0b9e-42');
  });
});

describe('leaseLabelsFor', () => {
  it("labels the lease with the conversation's namespace, name and uid", () => {
    expect(leaseLabelsFor({ namespace: 'team-a', name: 'hello', uid: '0b9e-42' })).toEqual({
      'app.kubernetes.io/managed-by': 'polychrome',
      'polychrome.dev/conversation-namespace': 'team-a',
      'polychrome.dev/conversation': 'hello',
      'polychrome.dev/conversation-uid': '0b9e-42',
    });
  });

  it('leaves out a name too long for a label value; the uid still finds it', () => {
    const labels = leaseLabelsFor({ namespace: 'team-a', name: 'x'.repeat(64), uid: 'u' });
    expect(labels).not.toHaveProperty(['polychrome.dev/conversation']);
    expect(labels).toMatchObject({ 'polychrome.dev/conversation-uid': 'u' });
    expect(leaseLabelsFor({ namespace: 'n', name: 'x'.repeat(63), uid: 'u' })).toHaveProperty([
      'polychrome.dev/conversation',
    ]);
  });
});
