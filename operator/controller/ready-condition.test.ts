import { describe, expect, it } from '@jest/globals';
import { isReadyTransition, isSameReadyStatus, nextReadyStatus } from './ready-condition';

const t0 = new Date('2026-12-01T10:00:00.123Z');
const t1 = new Date('2026-12-01T10:05:00.000Z');
const ok = { status: 'True', reason: 'Resolved', message: 'fine' } as const;
const bad = { status: 'False', reason: 'SecretNotFound', message: 'missing' } as const;

describe('nextReadyStatus', () => {
  it('stamps the generation and the time, in whole seconds', () => {
    expect(nextReadyStatus(undefined, ok, 3, t0)).toEqual({
      observedGeneration: 3,
      conditions: [
        {
          type: 'Ready',
          status: 'True',
          observedGeneration: 3,
          lastTransitionTime: '2026-12-01T10:00:00Z',
          reason: 'Resolved',
          message: 'fine',
        },
      ],
    });
  });

  it('moves lastTransitionTime only when the status changes', () => {
    const first = nextReadyStatus(undefined, bad, 1, t0);
    const sameStatus = nextReadyStatus(first, { ...bad, reason: 'SecretKeyMissing' }, 2, t1);
    expect(sameStatus.conditions?.[0]?.lastTransitionTime).toBe('2026-12-01T10:00:00Z');
    const flipped = nextReadyStatus(first, ok, 2, t1);
    expect(flipped.conditions?.[0]?.lastTransitionTime).toBe('2026-12-01T10:05:00Z');
  });

  it('writes nothing when nothing changed, and calls a status or reason change a transition', () => {
    const first = nextReadyStatus(undefined, bad, 1, t0);
    const again = nextReadyStatus(first, bad, 1, t1);
    expect(isSameReadyStatus(first, again)).toBe(true);
    expect(isReadyTransition(first, again)).toBe(false);
    expect(isSameReadyStatus(first, nextReadyStatus(first, bad, 2, t1))).toBe(false);
    const otherMessage = nextReadyStatus(first, { ...bad, message: 'other' }, 1, t1);
    expect(isSameReadyStatus(first, otherMessage)).toBe(false);
    expect(isReadyTransition(first, otherMessage)).toBe(false);
    expect(isReadyTransition(first, nextReadyStatus(first, ok, 1, t1))).toBe(true);
    expect(isReadyTransition(undefined, first)).toBe(true);
    expect(isSameReadyStatus(undefined, first)).toBe(false);
  });
});
