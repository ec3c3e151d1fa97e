import { describe, expect, it } from '@jest/globals';
import {
  decideAcquire,
  isHeldLeaseStale,
  leaseNameFor,
  observe,
  type LeaseRecord,
} from './lease-rules';

const held = (holder: string, rv = '10', transitions = 3): LeaseRecord => ({
  holder,
  leaseDurationMs: 15_000,
  transitions,
  resourceVersion: rv,
});

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
    expect(decideAcquire(record, observation, 'me', now)).toEqual(expected);
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
