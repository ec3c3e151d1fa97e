import { describe, expect, it } from '@jest/globals';
import { claimReadiness, currentClaimReady } from './claim-ready';
import type { ObservedCondition } from './snapshot';
import { claim } from './snapshot-fixtures';

const ready = (over: Partial<ObservedCondition> = {}): ObservedCondition => ({
  type: 'Ready',
  status: 'True',
  reason: 'DependenciesReady',
  message: 'Pod is Ready',
  observedGeneration: 2,
  ...over,
});
const waiting = 'waiting for SandboxClaim c1 to be Ready';

describe('claimReadiness', () => {
  it.each<[string, number | undefined, ObservedCondition[], string | undefined]>([
    ['Ready True for the current generation', 2, [ready()], undefined],
    [
      'Ready True for the current generation among other conditions',
      2,
      [{ type: 'Finished', status: 'False', observedGeneration: 2 }, ready()],
      undefined,
    ],
    ['no condition yet', 2, [], `${waiting}: no Ready condition yet`],
    [
      'another condition only',
      2,
      [{ type: 'Finished', status: 'True', observedGeneration: 2 }],
      `${waiting}: no Ready condition yet`,
    ],
    [
      'a stale Ready True from an older generation',
      2,
      [ready({ observedGeneration: 1 })],
      `${waiting}: its Ready condition is for generation 1, the claim is at generation 2 (agent-sandbox has not observed it yet; agent-sandbox v1.0 or later is needed)`,
    ],
    [
      'a Ready True from a newer generation than the one read (a stale read of the claim)',
      2,
      [ready({ observedGeneration: 3 })],
      `${waiting}: its Ready condition is for generation 3, the claim is at generation 2 (agent-sandbox has not observed it yet; agent-sandbox v1.0 or later is needed)`,
    ],
    [
      'a Ready True with no observedGeneration',
      2,
      [ready({ observedGeneration: undefined })],
      `${waiting}: its Ready condition records no observedGeneration, the claim is at generation 2 (agent-sandbox has not observed it yet; agent-sandbox v1.0 or later is needed)`,
    ],
    [
      'a claim read without metadata.generation',
      undefined,
      [ready()],
      `${waiting}: the claim has no metadata.generation`,
    ],
    [
      'Ready False for the current generation',
      2,
      [ready({ status: 'False', reason: 'SandboxNotReady', message: 'Sandbox is not ready' })],
      `${waiting}: SandboxNotReady: Sandbox is not ready`,
    ],
    [
      'Ready Unknown for the current generation, no reason',
      2,
      [ready({ status: 'Unknown', reason: undefined, message: undefined })],
      `${waiting}: Unknown`,
    ],
  ])('%s', (_name, generation, conditions, message) => {
    const observed = claim({ conditions, generation });
    const verdict = claimReadiness(observed);
    expect(verdict).toEqual(message === undefined ? { ready: true } : { ready: false, message });
  });
});

describe('currentClaimReady', () => {
  it('returns the Ready condition written for the claim’s generation', () => {
    const condition = ready({ status: 'False', reason: 'ClaimExpired' });
    expect(currentClaimReady(claim({ generation: 2, conditions: [condition] }))).toBe(condition);
  });

  it.each<[string, number | undefined, ObservedCondition[]]>([
    ['stale', 2, [ready({ observedGeneration: 1 })]],
    ['without observedGeneration', 2, [ready({ observedGeneration: undefined })]],
    ['on a claim without generation', undefined, [ready()]],
    ['absent', 2, []],
  ])('returns nothing for a Ready condition %s', (_name, generation, conditions) => {
    expect(currentClaimReady(claim({ generation, conditions }))).toBeUndefined();
  });
});
