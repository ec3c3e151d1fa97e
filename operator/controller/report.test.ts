import { describe, expect, it } from '@jest/globals';
import type { Condition, ConversationStatus } from '../api/v1alpha1/conversation-status';
import type { ConversationSnapshot } from './snapshot';
import { planReconcile } from './plan';
import type { ActOutcome } from './report';
import { isSameStatus, reportStatus } from './report';
import {
  NOW,
  agentSnapshot,
  boundClaim,
  claim,
  conversation,
  currentPodAnnotations,
  pod,
  podSnapshot,
  sandbox,
} from './snapshot-fixtures';

const HOUR = 3_600_000;
/** A claim at generation 2 whose Ready False `ClaimExpired` was written for `observedGeneration`. */
const expiredClaim = (observedGeneration: number): ReturnType<typeof claim> =>
  claim({
    generation: 2,
    conditions: [
      { type: 'Ready', status: 'False', reason: 'ClaimExpired', message: 'x', observedGeneration },
    ],
  });
const ago = (ms: number): string => new Date(NOW.getTime() - ms).toISOString();

/** Plans, pretends every action succeeded (or the first failed), and reports. */
function pass(
  snapshot: ConversationSnapshot,
  now: Date = NOW,
  fail = false,
): { status: ConversationStatus; outcome: ActOutcome } {
  const plan = planReconcile(snapshot, now);
  const [first] = plan.actions;
  const outcome: ActOutcome =
    fail && first !== undefined
      ? { completed: [], failed: { action: first, message: '403: forbidden' } }
      : { completed: plan.actions };
  return { status: reportStatus(snapshot, plan, outcome, now), outcome };
}

function condition(status: ConversationStatus, type: string): Condition | undefined {
  return status.conditions?.find((c) => c.type === type);
}

function summary(status: ConversationStatus): Record<string, string> {
  const out: Record<string, string> = { phase: status.phase ?? '' };
  for (const c of status.conditions ?? []) out[c.type] = `${c.status}/${c.reason}`;
  return out;
}

describe('reportStatus', () => {
  it.each([
    [
      'claim created this pass',
      agentSnapshot(conversation()),
      {
        phase: 'Pending',
        Ready: 'False/SandboxPending',
        Progressing: 'True/SandboxPending',
        Degraded: 'False/Healthy',
      },
    ],
    [
      'claim without a Sandbox',
      agentSnapshot(conversation(), { claim: claim() }),
      {
        phase: 'Pending',
        Ready: 'False/SandboxPending',
        Progressing: 'True/SandboxPending',
        Degraded: 'False/Healthy',
      },
    ],
    [
      'Sandbox not ready yet',
      agentSnapshot(conversation(), {
        claim: boundClaim(false),
        sandbox: sandbox(false),
      }),
      {
        phase: 'Pending',
        Ready: 'False/SandboxPending',
        Progressing: 'True/SandboxPending',
        Degraded: 'False/Healthy',
      },
    ],
    [
      'Sandbox ready',
      agentSnapshot(conversation(), {
        claim: boundClaim(true),
        sandbox: sandbox(true),
        pod: pod(true, { name: 'sb-1' }),
      }),
      {
        phase: 'Ready',
        Ready: 'True/SandboxReady',
        Progressing: 'False/Idle',
        Degraded: 'False/Healthy',
      },
    ],
    [
      "Sandbox ready, but the claim's Ready True is from an older generation",
      agentSnapshot(conversation(), {
        claim: boundClaim(true, { generation: 2 }),
        sandbox: sandbox(true),
        pod: pod(true, { name: 'sb-1' }),
      }),
      {
        phase: 'Pending',
        Ready: 'False/SandboxPending',
        Progressing: 'True/SandboxPending',
        Degraded: 'False/Healthy',
      },
    ],
    [
      'a claim failure reason from an older generation does not block',
      agentSnapshot(conversation(), {
        claim: expiredClaim(1),
      }),
      {
        phase: 'Pending',
        Ready: 'False/SandboxPending',
        Progressing: 'True/SandboxPending',
        Degraded: 'False/Healthy',
      },
    ],
    [
      'a claim failure reason for the current generation blocks',
      agentSnapshot(conversation(), {
        claim: expiredClaim(2),
      }),
      {
        phase: 'Degraded',
        Ready: 'False/SandboxFailed',
        Progressing: 'False/SandboxFailed',
        Degraded: 'True/SandboxFailed',
      },
    ],
    [
      'warm pool missing',
      agentSnapshot(conversation(), {
        warmPool: undefined,
        templateFound: undefined,
        claim: claim(),
      }),
      {
        phase: 'Degraded',
        Ready: 'False/WarmPoolMissing',
        Progressing: 'False/WarmPoolMissing',
        Degraded: 'True/WarmPoolMissing',
      },
    ],
    [
      'template of the pool missing',
      agentSnapshot(conversation(), { templateFound: false, claim: claim() }),
      {
        phase: 'Degraded',
        Ready: 'False/SandboxTemplateMissing',
        Progressing: 'False/SandboxTemplateMissing',
        Degraded: 'True/SandboxTemplateMissing',
      },
    ],
    [
      'Sandbox pod failed',
      agentSnapshot(conversation(), {
        claim: boundClaim(false),
        sandbox: sandbox(false, {
          conditions: [
            { type: 'Ready', status: 'False', reason: 'PodFailed', message: 'Pod failed' },
          ],
        }),
      }),
      {
        phase: 'Degraded',
        Ready: 'False/SandboxFailed',
        Progressing: 'False/SandboxFailed',
        Degraded: 'True/SandboxFailed',
      },
    ],
    [
      'idle close',
      agentSnapshot(conversation({ idleTimeout: '30m' }, { lastTurnTime: ago(HOUR) }), {
        claim: claim(),
      }),
      {
        phase: 'Closed',
        Ready: 'False/Closed',
        Progressing: 'False/Closed',
        Degraded: 'False/Healthy',
      },
    ],
    [
      'deleting',
      agentSnapshot(conversation({}, undefined, { deletionTimestamp: ago(1000) }), {
        claim: claim(),
      }),
      {
        phase: 'Terminating',
        Ready: 'False/Terminating',
        Progressing: 'True/Terminating',
        Degraded: 'False/Healthy',
      },
    ],
    [
      'malformed retention on a ready conversation',
      agentSnapshot(conversation({ retention: '3 days' }), {
        claim: boundClaim(true),
        sandbox: sandbox(true),
      }),
      {
        phase: 'Degraded',
        Ready: 'True/SandboxReady',
        Progressing: 'False/Idle',
        Degraded: 'True/RetentionInvalid',
      },
    ],
    [
      'plain pod ready',
      podSnapshot(conversation({ sandbox: { backend: 'pod' } }), {
        pod: pod(true, {
          annotations: currentPodAnnotations(conversation({ sandbox: { backend: 'pod' } })),
        }),
      }),
      {
        phase: 'Ready',
        Ready: 'True/SandboxReady',
        Progressing: 'False/Idle',
        Degraded: 'False/Healthy',
      },
    ],
    [
      'plain pod, named PodTemplate missing',
      podSnapshot(conversation({ sandbox: { backend: 'pod', template: 'mine' } }), {
        templateName: 'mine',
        templateExplicit: true,
      }),
      {
        phase: 'Degraded',
        Ready: 'False/SandboxTemplateMissing',
        Progressing: 'False/SandboxTemplateMissing',
        Degraded: 'True/SandboxTemplateMissing',
      },
    ],
  ])('%s', (_name, snapshot, expected) => {
    expect(summary(pass(snapshot).status)).toEqual(expected);
  });

  it('Ready carries the endpoint podIP:7070 and status.sandbox names claim, Sandbox and pod', () => {
    const { status } = pass(
      agentSnapshot(conversation(), {
        claim: boundClaim(true),
        sandbox: sandbox(true, { podName: 'sb-1-pod' }),
        pod: pod(true, { name: 'sb-1-pod', podIP: '10.9.8.7' }),
      }),
    );
    expect(status.sandbox).toEqual({
      claimName: 'c1',
      sandboxName: 'sb-1',
      podName: 'sb-1-pod',
      endpoint: '10.9.8.7:7070',
    });
    expect(condition(status, 'Ready')).toEqual({
      type: 'Ready',
      status: 'True',
      observedGeneration: 1,
      lastTransitionTime: '2026-11-30T12:00:00Z',
      reason: 'SandboxReady',
      message: 'harness pod sb-1-pod is ready at 10.9.8.7:7070',
    });
  });

  it('a claim without a Sandbox says what it waits for', () => {
    const { status } = pass(agentSnapshot(conversation(), { claim: claim() }));
    expect(condition(status, 'Progressing')?.message).toBe(
      'waiting for SandboxClaim c1 to be bound to a Sandbox',
    );
    expect(status.sandbox).toEqual({ claimName: 'c1' });
  });

  it('a missing warm pool has an actionable message', () => {
    const { status } = pass(
      agentSnapshot(conversation(), { warmPool: undefined, templateFound: undefined }),
    );
    expect(condition(status, 'Degraded')?.message).toBe(
      'SandboxWarmPool polychrome-harness not found in namespace team: label the namespace so the operator installs it (kubectl label namespace team polychrome.dev/enabled=true), or set spec.sandbox.warmPool',
    );
  });

  describe('a pod create rejected for a missing RuntimeClass', () => {
    const podConversation = conversation(
      { sandbox: { backend: 'pod' } },
      { observedGeneration: 0 },
    );
    const rejectedPass = (
      runtimeClassName: string,
      snapshot = podSnapshot(podConversation),
    ): ConversationStatus => {
      const plan = planReconcile(snapshot, NOW);
      const [create] = plan.actions;
      if (create?.kind !== 'create-pod')
        throw new Error(`expected create-pod, got ${create?.kind}`);
      const outcome: ActOutcome = {
        completed: [],
        failed: {
          action: create,
          message: `403: pods "c1" is forbidden: pod rejected: RuntimeClass "${runtimeClassName}" not found`,
          cause: { kind: 'runtime-class-missing', runtimeClassName },
        },
      };
      return reportStatus(snapshot, plan, outcome, NOW);
    };

    it('is Degraded RuntimeClassMissing with the gVisor install steps', () => {
      const status = rejectedPass('gvisor');
      expect(summary(status)).toEqual({
        phase: 'Degraded',
        Ready: 'False/RuntimeClassMissing',
        Progressing: 'False/RuntimeClassMissing',
        Degraded: 'True/RuntimeClassMissing',
      });
      expect(condition(status, 'Degraded')?.message).toBe(
        'RuntimeClass "gvisor" not found, so admission rejected pod c1 in namespace team: install gVisor on the nodes and apply config/cluster/runtime-class.yaml (or set the sandbox template\'s runtimeClassName); the pod is retried with backoff',
      );
      expect(status.observedGeneration).toBe(0);
      expect(status.sandbox).toBeUndefined();
    });

    it('names another RuntimeClass and asks for it to be created', () => {
      expect(condition(rejectedPass('kata-fc'), 'Degraded')?.message).toBe(
        'RuntimeClass "kata-fc" not found, so admission rejected pod c1 in namespace team: create RuntimeClass "kata-fc" for a runtime installed on the nodes (or set the sandbox template\'s runtimeClassName); the pod is retried with backoff',
      );
    });

    it('a failure without a classified cause stays SandboxPending with the API text', () => {
      const status = pass(podSnapshot(podConversation), NOW, true).status;
      expect(summary(status)).toEqual({
        phase: 'Pending',
        Ready: 'False/SandboxPending',
        Progressing: 'True/SandboxPending',
        Degraded: 'False/Healthy',
      });
      expect(condition(status, 'Ready')?.message).toBe(
        'could not create the sandbox: 403: forbidden',
      );
    });

    it('recovers once the pod is created: Degraded False, Progressing SandboxPending', () => {
      const degraded = rejectedPass('gvisor');
      const next = pass(
        podSnapshot(conversation({ sandbox: { backend: 'pod' } }, degraded)),
      ).status;
      expect(summary(next)).toEqual({
        phase: 'Pending',
        Ready: 'False/SandboxPending',
        Progressing: 'True/SandboxPending',
        Degraded: 'False/Healthy',
      });
      expect(condition(next, 'Ready')?.message).toBe(
        'waiting for pod c1 to become Ready (phase Pending)',
      );
    });
  });

  // The pass after a create sees the new child (from the cache, or the object the create
  // returned) and must not rewrite the status the creating pass wrote.
  it.each([
    [
      'pod',
      (status?: ConversationStatus) =>
        podSnapshot(conversation({ sandbox: { backend: 'pod' } }, status)),
      (status: ConversationStatus) =>
        podSnapshot(conversation({ sandbox: { backend: 'pod' } }, status), {
          pod: pod(false, {
            annotations: currentPodAnnotations(conversation({ sandbox: { backend: 'pod' } })),
          }),
        }),
    ],
    [
      'claim',
      (status?: ConversationStatus) => agentSnapshot(conversation({}, status)),
      (status: ConversationStatus) => agentSnapshot(conversation({}, status), { claim: claim() }),
    ],
  ])('the pass after creating the %s has nothing to write', (_kind, before, after) => {
    const created = pass(before()).status;
    const next = pass(after(created)).status;
    expect(isSameStatus(next, created)).toBe(true);
  });

  it('a malformed retention names the bad value', () => {
    const { status } = pass(
      agentSnapshot(conversation({ retention: '3 days' }), { claim: claim() }),
    );
    expect(condition(status, 'Degraded')?.message).toBe(
      'spec.retention "3 days" cannot be used (invalid duration "3 days": expected a number followed by a unit (h, m, s, ms, us, ns)); the object will not be deleted automatically: set spec.retention to a duration such as 24h',
    );
  });

  it('observedGeneration moves only after a clean pass; conditions describe the new generation', () => {
    const snapshot = agentSnapshot(
      conversation(
        { sandbox: { warmPool: 'other' } },
        { observedGeneration: 1 },
        { generation: 2 },
      ),
      { claim: claim() },
    );
    const failed = pass(snapshot, NOW, true).status;
    expect(failed.observedGeneration).toBe(1);
    expect(condition(failed, 'Ready')?.observedGeneration).toBe(2);
    expect(pass(snapshot).status.observedGeneration).toBe(2);
  });

  it('keeps lastTransitionTime while a condition keeps its status, and moves it on a change', () => {
    const first = pass(agentSnapshot(conversation(), { claim: claim() })).status;
    const later = new Date(NOW.getTime() + 60_000);
    // Same status (Ready False), different reason: the transition time stays.
    const blocked = pass(
      agentSnapshot(conversation({}, first), {
        claim: claim(),
        warmPool: undefined,
        templateFound: undefined,
      }),
      later,
    ).status;
    expect(condition(blocked, 'Ready')?.lastTransitionTime).toBe('2026-11-30T12:00:00Z');
    // Degraded flipped False → True: a new transition time.
    expect(condition(blocked, 'Degraded')?.lastTransitionTime).toBe('2026-11-30T12:01:00Z');
  });

  it('an idle pass reproduces the stored status exactly (nothing to write)', () => {
    const children = {
      claim: boundClaim(true),
      sandbox: sandbox(true),
      pod: pod(true, { name: 'sb-1' }),
    };
    const first = pass(
      agentSnapshot(conversation({ idleTimeout: '1h' }, { lastTurnTime: ago(60_000) }), children),
    ).status;
    const again = pass(
      agentSnapshot(conversation({ idleTimeout: '1h' }, first), children),
      new Date(NOW.getTime() + 5 * 60_000),
    );
    expect(again.outcome.completed).toEqual([]);
    expect(isSameStatus(again.status, first)).toBe(true);
  });

  it('closing records closedTime, drops status.sandbox and says why', () => {
    const { status } = pass(
      agentSnapshot(
        conversation(
          { idleTimeout: '30m' },
          { lastTurnTime: ago(HOUR), sandbox: { claimName: 'c1' } },
        ),
        {
          claim: claim(),
        },
      ),
    );
    expect(status.closedTime).toBe('2026-11-30T12:00:00Z');
    expect(status.sandbox).toBeUndefined();
    expect(condition(status, 'Ready')?.message).toBe(
      'closed at 2026-11-30T12:00:00Z after 30m without a turn; the next turn reopens it; the object is deleted 24h after closing',
    );
  });

  it('a closed conversation that retention holds says why it stays, and stays Healthy', () => {
    const managed = pass(
      agentSnapshot(
        conversation(
          { retention: '1h' },
          { lastTurnTime: ago(5 * HOUR), closedTime: '2026-11-30T10:00:00Z' },
          {
            annotations: {
              'argocd.argoproj.io/tracking-id': 'chat:polychrome.dev/Conversation:team/c1',
            },
          },
        ),
      ),
    );
    expect(managed.outcome.completed).toEqual([]);
    expect(managed.status.phase).toBe('Closed');
    expect(condition(managed.status, 'Ready')?.message).toBe(
      'closed at 2026-11-30T10:00:00Z; the next turn reopens it; the object is kept, never deleted by retention: it is managed by Argo CD (annotation argocd.argoproj.io/tracking-id)',
    );
    expect(condition(managed.status, 'Degraded')?.reason).toBe('Healthy');
    const never = pass(
      agentSnapshot(
        conversation({ retention: 'never', idleTimeout: '30m' }, { lastTurnTime: ago(HOUR) }),
        { claim: claim() },
      ),
    );
    expect(condition(never.status, 'Progressing')?.message).toBe(
      'closed at 2026-11-30T12:00:00Z after 30m without a turn; the next turn reopens it; the object is kept, never deleted by retention: spec.retention is never',
    );
  });

  it('a failed close leaves the conversation open', () => {
    const { status } = pass(
      agentSnapshot(conversation({ idleTimeout: '30m' }, { lastTurnTime: ago(HOUR) }), {
        claim: claim(),
      }),
      NOW,
      true,
    );
    expect(status.closedTime).toBeUndefined();
    expect(status.phase).toBe('Pending');
  });

  it('a reopened conversation clears closedTime', () => {
    const { status } = pass(
      agentSnapshot(conversation({}, { lastTurnTime: ago(1000), closedTime: ago(HOUR) })),
    );
    expect(status.closedTime).toBeUndefined();
    expect(status.lastTurnTime).toBe(ago(1000));
    expect(status.sandbox).toEqual({ claimName: 'c1' });
  });

  it('derives Progressing and phase from the turn code’s facts and carries the facts over', () => {
    const turns = {
      current: { turnId: 't-1', state: 'awaiting_approval' as const, requestId: 'apr_1' },
    };
    const { status } = pass(
      agentSnapshot(conversation({}, { currentTurn: 't-1', turns, journal: { head: 4 } }), {
        claim: boundClaim(true),
        sandbox: sandbox(true),
      }),
    );
    expect(condition(status, 'Progressing')).toMatchObject({
      status: 'True',
      reason: 'AwaitingApproval',
      message: 'turn t-1 waits for approval apr_1: answer it with POST .../approvals/apr_1',
    });
    expect(condition(status, 'Ready')).toMatchObject({ status: 'True', reason: 'SandboxReady' });
    expect(status.phase).toBe('AwaitingApproval');
    expect(status.currentTurn).toBe('t-1');
    expect(status.turns).toEqual(turns);
    expect(status.journal).toEqual({ head: 4 });
  });

  it('an object from an older operator with only currentTurn counts the turn as running', () => {
    const { status } = pass(
      agentSnapshot(conversation({}, { currentTurn: 't-1' }), {
        claim: boundClaim(true),
        sandbox: sandbox(true),
      }),
    );
    expect(summary(status)).toEqual({
      phase: 'Running',
      Ready: 'True/SandboxReady',
      Progressing: 'True/TurnRunning',
      Degraded: 'False/Healthy',
    });
  });

  it('keeps Degraded TurnAmbiguous while status.turns.quarantined is set, and drops it after', () => {
    const quarantined = {
      turnId: 't-0',
      toolCallId: 'toolu_9',
      reason: 'crashed mid-call',
      since: '2026-11-30T11:00:00Z',
    };
    const held = pass(
      agentSnapshot(conversation({}, { turns: { quarantined } }), { claim: claim() }),
    ).status;
    expect(condition(held, 'Degraded')).toMatchObject({ status: 'True', reason: 'TurnAmbiguous' });
    expect(condition(held, 'Degraded')?.message).toContain('toolu_9');
    expect(held.phase).toBe('Degraded');
    expect(held.turns).toEqual({ quarantined });
    // An admin removed the record: the next pass is Healthy again.
    const { turns: _removed, ...repaired } = held;
    const after = pass(agentSnapshot(conversation({}, repaired), { claim: claim() })).status;
    expect(summary(after)).toMatchObject({ phase: 'Pending', Degraded: 'False/Healthy' });
  });
});

describe('isSameStatus', () => {
  it('ignores key order and tells different values apart', () => {
    expect(
      isSameStatus(
        { phase: 'Ready', observedGeneration: 1 },
        { observedGeneration: 1, phase: 'Ready' },
      ),
    ).toBe(true);
    expect(isSameStatus({ phase: 'Ready' }, { phase: 'Pending' })).toBe(false);
    expect(isSameStatus(undefined, {})).toBe(true);
  });
});
