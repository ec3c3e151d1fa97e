import { describe, expect, it } from '@jest/globals';
import type { Conversation } from '../api/v1alpha1/conversation-types';
import type { ConversationStatus } from '../api/v1alpha1/conversation-status';
import { planReconcile } from '../controller/plan';
import { isSameStatus, reportStatus } from '../controller/report';
import type { AgentSandboxObservation, ConversationSnapshot } from '../controller/snapshot';
import {
  NOW,
  agentSnapshot,
  boundClaim,
  claim,
  conversation,
  pod,
  sandbox,
} from '../controller/snapshot-fixtures';
import { applyTurnStatus, type TurnStatusChange } from './turn-status';

const T1 = new Date(NOW.getTime() + 60_000).toISOString();
const T2 = new Date(NOW.getTime() + 120_000).toISOString();

const readyChildren = {
  claim: boundClaim(true),
  sandbox: sandbox(true),
  pod: pod(true, { name: 'sb-1' }),
};

/** One reconcile pass, every action succeeding: the status the reconciler writes. */
function reconciled(snapshot: ConversationSnapshot, now = NOW): Conversation {
  const plan = planReconcile(snapshot, now);
  return {
    ...snapshot.conversation,
    status: reportStatus(snapshot, plan, { completed: plan.actions }, now),
  };
}

/** The turn writer's write on `from`. */
function turn(from: Conversation, change: TurnStatusChange, at = T1): Conversation {
  return { ...from, status: applyTurnStatus(from, change, undefined, at) };
}

function summary(status: ConversationStatus | undefined): Record<string, string> {
  const out: Record<string, string> = { phase: status?.phase ?? '' };
  for (const c of status?.conditions ?? []) out[c.type] = `${c.status}/${c.reason}`;
  return out;
}

const ready = reconciled(agentSnapshot(conversation(), readyChildren));

describe('turn status', () => {
  it('writes the running turn as facts and derives Running from them', () => {
    const closed = { ...ready, status: { ...ready.status, closedTime: NOW.toISOString() } };
    const next = turn(closed, { kind: 'running', turnId: 'turn_1', lastTurnTime: T1 }).status;
    expect(next?.currentTurn).toBe('turn_1');
    expect(next?.turns).toEqual({ current: { turnId: 'turn_1', state: 'running' } });
    expect(next?.lastTurnTime).toBe(T1);
    expect(next).not.toHaveProperty('closedTime');
    expect(next?.sandbox).toEqual(ready.status?.sandbox);
    expect(summary(next)).toEqual({
      phase: 'Running',
      Ready: 'True/SandboxReady',
      Progressing: 'True/TurnRunning',
      Degraded: 'False/Healthy',
    });
    // Ready is the reconciler's verdict, kept as it was (transition time included).
    expect(next?.conditions?.find((c) => c.type === 'Ready')).toEqual(
      ready.status?.conditions?.find((c) => c.type === 'Ready'),
    );
    expect(next?.conditions?.find((c) => c.type === 'Progressing')?.lastTransitionTime).toBe(T1);
  });

  it('keeps the transition time while Progressing stays True and names the pending approval', () => {
    const running = turn(ready, { kind: 'running', turnId: 't', lastTurnTime: T1 });
    const paused = applyTurnStatus(
      running,
      { kind: 'awaiting_approval', turnId: 't', requestId: 'apr_1' },
      { head: 12, lastSignedRoot: 'ab'.repeat(32), keyId: 'k1' },
      T2,
    );
    const progressing = paused.conditions?.find((c) => c.type === 'Progressing');
    expect(progressing?.reason).toBe('AwaitingApproval');
    expect(progressing?.lastTransitionTime).toBe(T1);
    expect(progressing?.message).toContain('apr_1');
    expect(paused.phase).toBe('AwaitingApproval');
    expect(paused.turns?.current).toEqual({
      turnId: 't',
      state: 'awaiting_approval',
      requestId: 'apr_1',
    });
    expect(paused.journal).toEqual({ head: 12, lastSignedRoot: 'ab'.repeat(32), keyId: 'k1' });
  });

  it('records the journal keys a mark names and keeps them through marks that name none', () => {
    const k1 = { keyId: 'a'.repeat(32), publicKey: `${'A'.repeat(43)}=` };
    const k2 = { keyId: 'b'.repeat(32), publicKey: `${'B'.repeat(43)}=` };
    const mark = { head: 4, lastSignedRoot: 'ab'.repeat(32), keyId: k1.keyId };
    const first = applyTurnStatus(
      ready,
      { kind: 'settled', turnId: 't1' },
      { ...mark, publicKeys: [k1] },
      T1,
    );
    expect(first.journal).toEqual({ ...mark, publicKeys: [k1] });
    // A mark whose keys could not be learned leaves the recorded ones.
    const second = applyTurnStatus(
      { ...ready, status: first },
      { kind: 'settled', turnId: 't2' },
      { ...mark, head: 8 },
      T2,
    );
    expect(second.journal).toEqual({ ...mark, head: 8, publicKeys: [k1] });
    const rotated = applyTurnStatus(
      { ...ready, status: second },
      { kind: 'settled', turnId: 't3' },
      { ...mark, head: 12, keyId: k2.keyId, publicKeys: [k1, k2] },
      T2,
    );
    expect(rotated.journal?.publicKeys).toEqual([k1, k2]);
    // A change without a mark touches no key.
    const running = applyTurnStatus(
      { ...ready, status: rotated },
      { kind: 'running', turnId: 't4' },
      undefined,
      T2,
    );
    expect(running.journal).toEqual(rotated.journal);
  });

  it('a settled turn is Progressing False Idle, exactly as the reconciler says it', () => {
    const running = turn(ready, { kind: 'running', turnId: 't', lastTurnTime: T1 });
    const settled = turn(running, { kind: 'settled', turnId: 't' }, T2).status;
    expect(settled).not.toHaveProperty('currentTurn');
    expect(settled).not.toHaveProperty('turns');
    expect(summary(settled)).toEqual(summary(ready.status));
    expect(settled?.conditions?.find((c) => c.type === 'Progressing')).toMatchObject({
      status: 'False',
      reason: 'Idle',
      message: 'no turn in flight',
    });
  });

  it('records a quarantine and keeps it, Degraded TurnAmbiguous, through later turns', () => {
    const running = turn(ready, { kind: 'running', turnId: 't', lastTurnTime: T1 });
    const ambiguous = turn(running, {
      kind: 'ambiguous',
      turnId: 't',
      toolCallId: 'toolu_9',
      reason: 'crashed mid-call',
    });
    expect(ambiguous.status?.turns).toEqual({
      quarantined: { turnId: 't', toolCallId: 'toolu_9', reason: 'crashed mid-call', since: T1 },
    });
    expect(summary(ambiguous.status)).toEqual({
      phase: 'Degraded',
      Ready: 'True/SandboxReady',
      Progressing: 'False/Idle',
      Degraded: 'True/TurnAmbiguous',
    });
    expect(ambiguous.status?.conditions?.find((c) => c.type === 'Degraded')?.message).toContain(
      'toolu_9',
    );
    const next = turn(ambiguous, { kind: 'running', turnId: 'u', lastTurnTime: T2 }, T2);
    const after = turn(next, { kind: 'settled', turnId: 'u' }, T2);
    expect(after.status?.turns?.quarantined?.turnId).toBe('t');
    expect(summary(after.status)).toMatchObject({
      phase: 'Degraded',
      Degraded: 'True/TurnAmbiguous',
    });
  });

  describe('a rolled-back journal', () => {
    const ROOT = 'ab'.repeat(32);
    const NEW_ROOT = 'cd'.repeat(32);
    const mark = (head: number, root = ROOT) => ({ head, lastSignedRoot: root, keyId: 'k1' });
    const at96 = { ...ready, status: { ...ready.status, journal: mark(96) } };
    const rollback = { checkpointHead: 96, checkpointRoot: ROOT, journalHead: 73 };
    const rolledBack = turn(at96, { kind: 'journal_rolled_back', rollback });

    it('records the rollback once, with when it was found, and derives Degraded JournalRolledBack', () => {
      expect(rolledBack.status?.journal).toEqual({
        ...mark(96),
        rollback: { ...rollback, since: T1 },
      });
      expect(summary(rolledBack.status)).toMatchObject({
        phase: 'Degraded',
        Degraded: 'True/JournalRolledBack',
      });
      const degraded = rolledBack.status?.conditions?.find((c) => c.type === 'Degraded');
      expect(degraded?.message).toContain(
        'the state plane holds 73 entries, but status.journal records 96',
      );
      // Found again later: the first finding's time stays.
      const again = turn(rolledBack, { kind: 'journal_rolled_back', rollback }, T2);
      expect(again.status?.journal?.rollback?.since).toBe(T1);
    });

    it('never moves the checkpoint back, except by an accepted rollback', () => {
      const lower = {
        ...at96,
        status: applyTurnStatus(at96, { kind: 'settled', turnId: 't' }, mark(80, NEW_ROOT), T1),
      };
      expect(lower.status?.journal).toEqual(mark(96));
      const higher = applyTurnStatus(
        at96,
        { kind: 'settled', turnId: 't' },
        mark(99, NEW_ROOT),
        T1,
      );
      expect(higher.journal).toEqual(mark(99, NEW_ROOT));
      // While rolled back, a late mark of a turn does not clear the finding either.
      const late = applyTurnStatus(
        rolledBack,
        { kind: 'settled', turnId: 't' },
        mark(75, NEW_ROOT),
        T2,
      );
      expect(late.journal).toEqual({ ...mark(96), rollback: { ...rollback, since: T1 } });
      const accepted = applyTurnStatus(
        rolledBack,
        { kind: 'rollback_accepted' },
        mark(75, NEW_ROOT),
        T2,
      );
      expect(accepted.journal).toEqual(mark(75, NEW_ROOT));
      expect(summary(accepted)).toMatchObject({ Degraded: 'False/Healthy' });
    });

    it('clears the finding when the journal holds the checkpoint again, keeping the checkpoint', () => {
      const restored = applyTurnStatus(rolledBack, { kind: 'journal_restored' }, undefined, T2);
      expect(restored.journal).toEqual(mark(96));
      expect(summary(restored)).toMatchObject({ Degraded: 'False/Healthy' });
    });
  });

  it('takes the turn time from any change, so a coalesced write still resets the idle timer', () => {
    const closed = { ...ready, status: { ...ready.status, closedTime: NOW.toISOString() } };
    const settled = turn(closed, { kind: 'settled', turnId: 't', lastTurnTime: T1 }).status;
    expect(settled?.lastTurnTime).toBe(T1);
    expect(settled).not.toHaveProperty('closedTime');
    const without = turn(closed, { kind: 'settled', turnId: 't' }).status;
    expect(without?.closedTime).toBe(NOW.toISOString());
  });

  // The issue this guards: two writers computing the same status by different rules. After
  // every turn write, the reconciler's next pass over the same children must find nothing
  // to write (one derivation), whatever the sandbox's state.
  const changes: readonly TurnStatusChange[] = [
    { kind: 'running', turnId: 't', lastTurnTime: T1 },
    { kind: 'awaiting_approval', turnId: 't', requestId: 'apr_1' },
    { kind: 'awaiting_answer', turnId: 't', requestId: 'q_1' },
    { kind: 'settled', turnId: 't' },
    { kind: 'ambiguous', turnId: 't', toolCallId: 'toolu_1', reason: 'crashed' },
    { kind: 'ambiguous', turnId: 't', toolCallId: '', reason: 'forged outcome' },
    {
      kind: 'journal_rolled_back',
      rollback: { checkpointHead: 9, checkpointRoot: 'ab'.repeat(32), journalHead: 4 },
    },
    { kind: 'journal_restored' },
    { kind: 'rollback_accepted' },
  ];
  const sandboxes: readonly [string, Partial<Omit<AgentSandboxObservation, 'backend'>>][] = [
    ['ready', readyChildren],
    ['pending (claim unbound)', { claim: claim() }],
    ['warm pool missing', { warmPool: undefined, templateFound: undefined }],
  ];
  describe.each(sandboxes)('the reconciler agrees with every turn write: sandbox %s', (_, kids) => {
    const specs = [
      ['a valid spec', {}],
      ['a retention that cannot be used', { retention: '9999999999h' }],
    ] as const;
    it.each(specs.flatMap(([what, spec]) => changes.map((c) => [c.kind, what, spec, c] as const)))(
      '%s, %s',
      (_kind, _what, spec, change) => {
        const before = reconciled(agentSnapshot(conversation(spec), kids));
        const written = turn(before, change);
        const again = reconciled(agentSnapshot(written, kids), new Date(T2)).status;
        expect(again).toEqual(written.status);
        expect(isSameStatus(again, written.status)).toBe(true);
      },
    );
  });
});
