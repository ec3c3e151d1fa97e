import { describe, expect, it } from '@jest/globals';
import type { ConversationStatus } from '../api/v1alpha1';
import { applyTurnStatus } from './turn-status';

const T0 = '2026-11-30T10:00:00.000Z';
const T1 = '2026-11-30T10:05:00.000Z';

const ready: ConversationStatus = {
  phase: 'Closed',
  closedTime: '2026-11-29T10:00:00.000Z',
  sandbox: { podName: 'conv-a', endpoint: '127.0.1.2:7070' },
  conditions: [
    {
      type: 'Ready',
      status: 'True',
      reason: 'SandboxReady',
      message: 'harness pod conv-a is ready',
      lastTransitionTime: T0,
      observedGeneration: 1,
    },
    {
      type: 'Progressing',
      status: 'False',
      reason: 'SandboxReady',
      message: 'idle',
      lastTransitionTime: T0,
      observedGeneration: 1,
    },
  ],
};

describe('turn status', () => {
  it('marks a running turn, reopens the conversation and keeps reconciler fields', () => {
    const next = applyTurnStatus(
      ready,
      2,
      { kind: 'running', turnId: 'turn_1', lastTurnTime: T1 },
      undefined,
      T1,
    );
    expect(next.currentTurn).toBe('turn_1');
    expect(next.lastTurnTime).toBe(T1);
    expect(next).not.toHaveProperty('closedTime');
    expect(next.phase).toBe('Running');
    expect(next.sandbox).toEqual(ready.sandbox);
    const progressing = next.conditions?.find((c) => c.type === 'Progressing');
    expect(progressing).toMatchObject({
      status: 'True',
      reason: 'TurnRunning',
      lastTransitionTime: T1,
      observedGeneration: 2,
    });
    // Ready is untouched: the reconciler owns it.
    expect(next.conditions?.find((c) => c.type === 'Ready')).toEqual(ready.conditions?.[0]);
  });

  it('keeps the transition time while Progressing stays True and names the pending approval', () => {
    const running = applyTurnStatus(
      ready,
      1,
      { kind: 'running', turnId: 't', lastTurnTime: T0 },
      undefined,
      T0,
    );
    const paused = applyTurnStatus(
      running,
      1,
      { kind: 'awaiting_approval', turnId: 't', requestId: 'apr_1' },
      { head: 12, lastSignedRoot: 'ab'.repeat(32), keyId: 'k1' },
      T1,
    );
    const progressing = paused.conditions?.find((c) => c.type === 'Progressing');
    expect(progressing?.reason).toBe('AwaitingApproval');
    expect(progressing?.lastTransitionTime).toBe(T0);
    expect(progressing?.message).toContain('apr_1');
    expect(paused.phase).toBe('AwaitingApproval');
    expect(paused.currentTurn).toBe('t');
    expect(paused.journal).toEqual({ head: 12, lastSignedRoot: 'ab'.repeat(32), keyId: 'k1' });
  });

  it('clears the turn when it settles and quarantines an ambiguous one', () => {
    const running = applyTurnStatus(
      ready,
      1,
      { kind: 'running', turnId: 't', lastTurnTime: T0 },
      undefined,
      T0,
    );
    const settled = applyTurnStatus(running, 1, { kind: 'settled', turnId: 't' }, undefined, T1);
    expect(settled).not.toHaveProperty('currentTurn');
    expect(settled.phase).toBe('Ready');
    expect(settled.conditions?.find((c) => c.type === 'Progressing')?.status).toBe('False');

    const ambiguous = applyTurnStatus(
      running,
      1,
      { kind: 'ambiguous', turnId: 't', toolCallId: 'toolu_9', reason: 'crashed mid-call' },
      undefined,
      T1,
    );
    expect(ambiguous.phase).toBe('Degraded');
    expect(ambiguous.conditions?.find((c) => c.type === 'Degraded')).toMatchObject({
      status: 'True',
      reason: 'TurnAmbiguous',
    });
    expect(ambiguous.conditions?.find((c) => c.type === 'Degraded')?.message).toContain('toolu_9');
    // A later settled turn leaves the quarantine in place for an admin.
    const after = applyTurnStatus(ambiguous, 1, { kind: 'settled', turnId: 'u' }, undefined, T1);
    expect(after.phase).toBe('Degraded');
    expect(after.conditions?.find((c) => c.type === 'Degraded')?.reason).toBe('TurnAmbiguous');
  });

  it('takes the turn time from any change, so a coalesced write still resets the idle timer', () => {
    const settled = applyTurnStatus(
      ready,
      1,
      { kind: 'settled', turnId: 't', lastTurnTime: T1 },
      undefined,
      T1,
    );
    expect(settled.lastTurnTime).toBe(T1);
    expect(settled).not.toHaveProperty('closedTime');
    const without = applyTurnStatus(ready, 1, { kind: 'settled', turnId: 't' }, undefined, T1);
    expect(without.closedTime).toBe(ready.closedTime);
  });
});
