import { describe, expect, it } from '@jest/globals';
import type { Action, ReconcilePlan } from './plan';
import { BLOCKED_RECHECK_MS, Lifecycle, STALE_READ_RECHECK_MS, planReconcile } from './plan';
import { reportStatus } from './report';
import type { ConversationSnapshot } from './snapshot';
import {
  NOW,
  UID,
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
const TRACKING_ID = 'chat:polychrome.dev/Conversation:team/c1';
const ago = (ms: number): string => new Date(NOW.getTime() - ms).toISOString();
const kinds = (plan: ReconcilePlan): string[] => plan.actions.map((a: Action) => a.kind);

interface Case {
  readonly name: string;
  readonly snapshot: ConversationSnapshot;
  readonly actions: readonly string[];
  readonly lifecycle: string;
  readonly writeStatus?: boolean;
  readonly requeueAfterMs?: number;
}

const cases: Case[] = [
  {
    name: 'a new Conversation gets the finalizer first, and nothing else',
    snapshot: agentSnapshot(conversation({}, undefined, { finalizers: [] })),
    actions: ['add-finalizer'],
    lifecycle: Lifecycle.Open,
    writeStatus: false,
  },
  {
    name: 'a missing claim is created',
    snapshot: agentSnapshot(conversation()),
    actions: ['create-claim'],
    lifecycle: Lifecycle.Open,
  },
  {
    name: 'a claim without a Sandbox is waited on',
    snapshot: agentSnapshot(conversation(), { claim: claim() }),
    actions: [],
    lifecycle: Lifecycle.Open,
  },
  {
    name: 'a ready sandbox needs nothing (an idle pass)',
    snapshot: agentSnapshot(conversation(), {
      claim: boundClaim(true),
      sandbox: sandbox(true),
      pod: pod(true, { name: 'sb-1' }),
    }),
    actions: [],
    lifecycle: Lifecycle.Open,
  },
  {
    name: 'a missing warm pool still gets a claim, and a recheck',
    snapshot: agentSnapshot(conversation(), { warmPool: undefined, templateFound: undefined }),
    actions: ['create-claim'],
    lifecycle: Lifecycle.Open,
    requeueAfterMs: BLOCKED_RECHECK_MS,
  },
  ...(['WarmPoolNotFound', 'TemplateNotFound'] as const).map((reason): Case => ({
    name: `a claim whose controller reports ${reason} while our read found it waits, and looks again once that read is stale`,
    snapshot: agentSnapshot(conversation(), {
      claim: claim({
        conditions: [
          {
            type: 'Ready',
            status: 'False',
            reason,
            message: 'not found',
            observedGeneration: 1,
          },
        ],
      }),
    }),
    actions: [],
    lifecycle: Lifecycle.Open,
    requeueAfterMs: STALE_READ_RECHECK_MS,
  })),
  {
    name: 'a changed warm pool replaces the claim',
    snapshot: agentSnapshot(conversation({ sandbox: { warmPool: 'other' } }), { claim: claim() }),
    actions: ['delete-claim'],
    lifecycle: Lifecycle.Open,
  },
  {
    name: 'idle past the deadline closes: the claim is released',
    snapshot: agentSnapshot(conversation({ idleTimeout: '30m' }, { lastTurnTime: ago(HOUR) }), {
      claim: boundClaim(true),
      sandbox: sandbox(true),
    }),
    actions: ['delete-claim'],
    lifecycle: Lifecycle.Closing,
    requeueAfterMs: 24 * HOUR,
  },
  {
    name: 'idle before the deadline waits for it',
    snapshot: agentSnapshot(conversation({ idleTimeout: '2h' }, { lastTurnTime: ago(HOUR) }), {
      claim: claim(),
    }),
    actions: [],
    lifecycle: Lifecycle.Open,
    requeueAfterMs: HOUR,
  },
  {
    name: 'an absent idleTimeout never closes',
    snapshot: agentSnapshot(conversation({}, { lastTurnTime: ago(100 * HOUR) }), {
      claim: claim(),
    }),
    actions: [],
    lifecycle: Lifecycle.Open,
  },
  {
    name: 'a zero idleTimeout never closes',
    snapshot: agentSnapshot(
      conversation({ idleTimeout: '0s' }, { lastTurnTime: ago(100 * HOUR) }),
      {
        claim: claim(),
      },
    ),
    actions: [],
    lifecycle: Lifecycle.Open,
  },
  {
    name: 'a missing lastTurnTime never closes',
    snapshot: agentSnapshot(conversation({ idleTimeout: '1s' }, {}), { claim: claim() }),
    actions: [],
    lifecycle: Lifecycle.Open,
  },
  {
    name: 'a turn in flight keeps the conversation open past its deadline',
    snapshot: agentSnapshot(
      conversation({ idleTimeout: '30m' }, { lastTurnTime: ago(HOUR), currentTurn: 't-1' }),
      { claim: claim() },
    ),
    actions: [],
    lifecycle: Lifecycle.Open,
  },
  {
    name: 'closed: a claim that is still there is released; retention is armed',
    snapshot: agentSnapshot(
      conversation({ idleTimeout: '30m' }, { lastTurnTime: ago(3 * HOUR), closedTime: ago(HOUR) }),
      { claim: claim() },
    ),
    actions: ['delete-claim'],
    lifecycle: Lifecycle.Closed,
    requeueAfterMs: 23 * HOUR,
  },
  {
    name: 'closed and retention elapsed: the object is deleted',
    snapshot: agentSnapshot(
      conversation({ retention: '1h' }, { lastTurnTime: ago(5 * HOUR), closedTime: ago(2 * HOUR) }),
    ),
    actions: ['delete-conversation'],
    lifecycle: Lifecycle.Closed,
  },
  {
    name: 'closed with a malformed retention: never deleted',
    snapshot: agentSnapshot(
      conversation(
        { retention: '3 days' },
        { lastTurnTime: ago(900 * HOUR), closedTime: ago(800 * HOUR) },
      ),
    ),
    actions: [],
    lifecycle: Lifecycle.Closed,
  },
  {
    name: 'closed with an overflowing retention: never deleted',
    snapshot: agentSnapshot(
      conversation({ retention: '9999999999h' }, { closedTime: ago(800 * HOUR) }),
    ),
    actions: [],
    lifecycle: Lifecycle.Closed,
  },
  // Retention never fights GitOps: Git would recreate a deleted object with a new uid.
  ...(
    [
      [
        'Argo CD tracking annotation',
        { annotations: { 'argocd.argoproj.io/tracking-id': TRACKING_ID } },
      ],
      ['Argo CD default tracking label', { labels: { 'app.kubernetes.io/instance': 'chat' } }],
      ['Argo CD custom tracking label', { labels: { 'argocd.argoproj.io/instance': 'chat' } }],
      ['Flux kustomize label', { labels: { 'kustomize.toolkit.fluxcd.io/name': 'apps' } }],
      ['Flux helm label', { labels: { 'helm.toolkit.fluxcd.io/name': 'chat' } }],
      ['an empty tracking label', { labels: { 'app.kubernetes.io/instance': '' } }],
    ] as const
  ).map(([what, meta]): Case => ({
    name: `closed past its retention with the ${what}: closed, not deleted, no requeue`,
    snapshot: agentSnapshot(
      conversation(
        { retention: '1h' },
        { lastTurnTime: ago(5 * HOUR), closedTime: ago(2 * HOUR) },
        meta,
      ),
    ),
    actions: [],
    lifecycle: Lifecycle.Closed,
  })),
  {
    name: 'closed past its retention with a claim left and a tracking label: only the claim goes',
    snapshot: agentSnapshot(
      conversation(
        { retention: '1h' },
        { lastTurnTime: ago(5 * HOUR), closedTime: ago(2 * HOUR) },
        { labels: { 'app.kubernetes.io/instance': 'chat' } },
      ),
      { claim: claim() },
    ),
    actions: ['delete-claim'],
    lifecycle: Lifecycle.Closed,
  },
  {
    name: 'closed long ago with retention never: closed, not deleted, no requeue',
    snapshot: agentSnapshot(
      conversation(
        { retention: 'never' },
        { lastTurnTime: ago(900 * HOUR), closedTime: ago(800 * HOUR) },
      ),
    ),
    actions: [],
    lifecycle: Lifecycle.Closed,
  },
  {
    name: 'closing a managed conversation arms no retention deadline',
    snapshot: agentSnapshot(
      conversation(
        { idleTimeout: '30m' },
        { lastTurnTime: ago(HOUR) },
        { annotations: { 'argocd.argoproj.io/tracking-id': TRACKING_ID } },
      ),
      { claim: claim() },
    ),
    actions: ['delete-claim'],
    lifecycle: Lifecycle.Closing,
  },
  {
    name: 'other app.kubernetes.io labels and argocd annotations do not hold: deleted',
    snapshot: agentSnapshot(
      conversation(
        { retention: '1h' },
        { lastTurnTime: ago(5 * HOUR), closedTime: ago(2 * HOUR) },
        {
          labels: { 'app.kubernetes.io/name': 'chat', 'app.kubernetes.io/part-of': 'support' },
          annotations: { 'argocd.argoproj.io/sync-wave': '1' },
        },
      ),
    ),
    actions: ['delete-conversation'],
    lifecycle: Lifecycle.Closed,
  },
  {
    name: 'a turn after closing reopens: a new claim is created',
    snapshot: agentSnapshot(
      conversation({ idleTimeout: '30m' }, { lastTurnTime: ago(1000), closedTime: ago(HOUR) }),
    ),
    actions: ['create-claim'],
    lifecycle: Lifecycle.Open,
    requeueAfterMs: 30 * 60_000 - 1000,
  },
  {
    name: 'deletion with a claim: the claim is deleted, the finalizer stays',
    snapshot: agentSnapshot(conversation({}, undefined, { deletionTimestamp: ago(1000) }), {
      claim: claim(),
    }),
    actions: ['delete-claim'],
    lifecycle: Lifecycle.Deleting,
    writeStatus: true,
  },
  {
    name: 'deletion while the claim is going: wait',
    snapshot: agentSnapshot(conversation({}, undefined, { deletionTimestamp: ago(1000) }), {
      claim: claim({ deleting: true }),
    }),
    actions: [],
    lifecycle: Lifecycle.Deleting,
    writeStatus: true,
  },
  {
    name: 'deletion once the claim is gone: the finalizer is removed last',
    snapshot: agentSnapshot(conversation({}, undefined, { deletionTimestamp: ago(1000) })),
    actions: ['remove-finalizer'],
    lifecycle: Lifecycle.Deleting,
    writeStatus: false,
  },
  {
    name: 'deletion without our finalizer: nothing to do',
    snapshot: agentSnapshot(
      conversation({}, undefined, { deletionTimestamp: ago(1000), finalizers: ['other/x'] }),
    ),
    actions: [],
    lifecycle: Lifecycle.Deleting,
    writeStatus: false,
  },
  {
    name: 'pod backend: a missing pod is created',
    snapshot: podSnapshot(conversation({ sandbox: { backend: 'pod' } })),
    actions: ['create-pod'],
    lifecycle: Lifecycle.Open,
  },
  {
    name: 'pod backend: a current pod is left alone',
    snapshot: podSnapshot(conversation({ sandbox: { backend: 'pod' } }), {
      pod: pod(true, {
        annotations: currentPodAnnotations(conversation({ sandbox: { backend: 'pod' } })),
      }),
    }),
    actions: [],
    lifecycle: Lifecycle.Open,
  },
  {
    name: 'pod backend: a pod built from an older spec is replaced',
    snapshot: podSnapshot(conversation({ sandbox: { backend: 'pod' } }), {
      pod: pod(true, { annotations: { 'polychrome.dev/pod-spec-hash': 'stale' } }),
    }),
    actions: ['delete-pod'],
    lifecycle: Lifecycle.Open,
  },
  {
    name: 'pod backend: a failed pod is replaced',
    snapshot: podSnapshot(conversation({ sandbox: { backend: 'pod' } }), {
      pod: pod(false, { phase: 'Failed', statusReason: 'Evicted' }),
    }),
    actions: ['delete-pod'],
    lifecycle: Lifecycle.Open,
  },
  {
    name: 'pod backend: a named PodTemplate that is missing blocks creation',
    snapshot: podSnapshot(conversation({ sandbox: { backend: 'pod', template: 'mine' } }), {
      templateName: 'mine',
      templateExplicit: true,
    }),
    actions: [],
    lifecycle: Lifecycle.Open,
    requeueAfterMs: BLOCKED_RECHECK_MS,
  },
  // What a pass sees right after our own writes, before the informer caches catch up
  // (recent-writes.ts lays the objects our writes returned over the cache).
  {
    name: 'pod backend: the pod our create returned (Pending, unscheduled) is not created again',
    snapshot: podSnapshot(conversation({ sandbox: { backend: 'pod' } }), {
      pod: pod(false, {
        annotations: currentPodAnnotations(conversation({ sandbox: { backend: 'pod' } })),
      }),
    }),
    actions: [],
    lifecycle: Lifecycle.Open,
  },
  {
    name: 'pod backend: a pod we deleted (seen as deleting until the cache shows it) is not deleted again',
    snapshot: podSnapshot(conversation({ sandbox: { backend: 'pod' } }), {
      pod: pod(false, { phase: 'Failed', deleting: true }),
    }),
    actions: [],
    lifecycle: Lifecycle.Open,
  },
  {
    name: 'the claim our create returned (no status yet) is not created again',
    snapshot: agentSnapshot(conversation(), { claim: claim() }),
    actions: [],
    lifecycle: Lifecycle.Open,
  },
  {
    name: 'closed: a claim we deleted (seen as deleting) is not deleted again',
    snapshot: agentSnapshot(
      conversation({ idleTimeout: '30m' }, { lastTurnTime: ago(2 * HOUR), closedTime: ago(HOUR) }),
      { claim: claim({ deleting: true }) },
    ),
    actions: [],
    lifecycle: Lifecycle.Closed,
    requeueAfterMs: 23 * HOUR,
  },
  {
    name: 'pod backend: a pod that is not ours is never touched',
    snapshot: podSnapshot(conversation({ sandbox: { backend: 'pod' } }), {
      pod: pod(true, { owners: [] }),
    }),
    actions: [],
    lifecycle: Lifecycle.Open,
  },
];

describe('planReconcile', () => {
  it.each(cases.map((c) => [c.name, c] as const))('%s', (_name, c) => {
    const plan = planReconcile(c.snapshot, NOW);
    expect(kinds(plan)).toEqual(c.actions);
    expect(plan.lifecycle).toBe(c.lifecycle);
    expect(plan.writeStatus).toBe(c.writeStatus ?? true);
    expect(plan.requeueAfterMs).toBe(c.requeueAfterMs);
  });

  it('a shorter blockedRecheckMs shortens the recheck of a missing template, and only that', () => {
    const missing = agentSnapshot(conversation(), { templateFound: false });
    expect(planReconcile(missing, NOW, { blockedRecheckMs: 1_000 }).requeueAfterMs).toBe(1_000);
    const idleSoon = conversation(
      { idleTimeout: '30m' },
      { lastTurnTime: new Date(NOW.getTime() - 30 * 60_000 + 2_000).toISOString() },
    );
    // The idle deadline (2 s away) is sooner than the recheck: the soonest wins.
    expect(
      planReconcile(agentSnapshot(idleSoon, { templateFound: false }), NOW, {
        blockedRecheckMs: 5_000,
      }).requeueAfterMs,
    ).toBe(2_000);
    expect(
      planReconcile(agentSnapshot(conversation(), { claim: claim() }), NOW, {
        blockedRecheckMs: 1_000,
      }).requeueAfterMs,
    ).toBeUndefined();
  });

  it('builds the claim from the Conversation: name, warm pool, owner, labels', () => {
    const plan = planReconcile(agentSnapshot(conversation({ sandbox: { warmPool: 'gpu' } })), NOW);
    const [action] = plan.actions;
    expect(action).toEqual({
      kind: 'create-claim',
      claim: {
        apiVersion: 'extensions.agents.x-k8s.io/v1beta1',
        kind: 'SandboxClaim',
        metadata: {
          name: 'c1',
          namespace: 'team',
          labels: {
            'app.kubernetes.io/name': 'polychrome-harness',
            'app.kubernetes.io/part-of': 'polychrome',
            'app.kubernetes.io/managed-by': 'polychrome-control-plane',
            'polychrome.dev/conversation-uid': UID,
          },
          ownerReferences: [
            {
              apiVersion: 'polychrome.dev/v1alpha1',
              kind: 'Conversation',
              name: 'c1',
              uid: UID,
              controller: true,
              blockOwnerDeletion: true,
            },
          ],
        },
        spec: { warmPoolRef: { name: 'gpu' } },
      },
    });
  });

  it('closing records closedTime now and deletes the claim it observed (uid precondition)', () => {
    const plan = planReconcile(
      agentSnapshot(conversation({ idleTimeout: '30m' }, { lastTurnTime: ago(HOUR) }), {
        claim: claim(),
      }),
      NOW,
    );
    expect(plan.closedTime).toBe('2026-11-30T12:00:00Z');
    expect(plan.actions).toEqual([
      {
        kind: 'delete-claim',
        name: 'c1',
        uid: 'claim-uid',
        why: 'idle for 30m since the last turn',
      },
    ]);
  });

  it('reports a malformed retention and idleTimeout without throwing', () => {
    const plan = planReconcile(
      agentSnapshot(
        conversation({ retention: '3 days', idleTimeout: '1d' }, { lastTurnTime: ago(HOUR) }),
      ),
      NOW,
    );
    expect(plan.retention).toEqual({
      value: '3 days',
      error:
        'invalid duration "3 days": expected a number followed by a unit (h, m, s, ms, us, ns)',
    });
    expect(plan.idle.error).toBe('invalid duration "1d": unknown unit "d"');
    expect(kinds(plan)).toEqual(['create-claim']);
  });

  it('retention never is a valid retention, not RetentionInvalid, and arms no deadline', () => {
    const plan = planReconcile(
      agentSnapshot(conversation({ retention: 'never' }, { closedTime: ago(HOUR) })),
      NOW,
    );
    expect(plan.retention).toEqual({ value: 'never' });
    expect(plan.retentionHold).toBe('spec.retention is never');
    expect(plan.requeueAfterMs).toBeUndefined();
  });

  it('the same snapshot plans the same actions (deterministic)', () => {
    const snapshot = agentSnapshot(conversation());
    expect(planReconcile(snapshot, NOW)).toEqual(planReconcile(snapshot, NOW));
  });
});

describe('spec fields a backend cannot honour', () => {
  const mcp = { name: 'tickets', transport: 'http' as const, url: 'https://t.example/mcp' };
  const withTools = conversation({ tools: { mcpServers: [mcp], requireApproval: ['tickets/*'] } });
  const disallowing = {
    envVarsInjectionPolicy: 'Disallowed',
    podSpec: { containers: [{ name: 'harness' }] },
  };
  const passOf = (snapshot: ConversationSnapshot) => {
    const plan = planReconcile(snapshot, NOW);
    const status = reportStatus(snapshot, plan, { completed: plan.actions }, NOW);
    return { plan, status, degraded: status.conditions?.find((c) => c.type === 'Degraded') };
  };

  it('the claim carries the tools as env, in the harness container', () => {
    const [action] = planReconcile(agentSnapshot(withTools), NOW).actions;
    expect(action?.kind).toBe('create-claim');
    expect(action?.kind === 'create-claim' ? action.claim.spec.env : undefined).toEqual([
      {
        name: 'HARNESS_MCP_SERVERS',
        value: JSON.stringify([mcp]),
        containerName: 'harness',
      },
      { name: 'HARNESS_REQUIRE_APPROVAL', value: 'tickets/*', containerName: 'harness' },
    ]);
  });

  it('a claim whose env is no longer what the tools need is replaced, but not mid-turn', () => {
    const stale = claim({ env: [{ name: 'HARNESS_MCP_SERVERS', value: '[]' }] });
    expect(kinds(planReconcile(agentSnapshot(withTools, { claim: stale }), NOW))).toEqual([
      'delete-claim',
    ]);
    const busy = conversation(
      { tools: { mcpServers: [mcp] } },
      { currentTurn: 't-1', lastTurnTime: NOW.toISOString() },
    );
    expect(kinds(planReconcile(agentSnapshot(busy, { claim: stale }), NOW))).toEqual([]);
    // A claim made before tools existed, for a conversation without tools: kept.
    expect(kinds(planReconcile(agentSnapshot(conversation(), { claim: claim() }), NOW))).toEqual(
      [],
    );
  });

  it('a template that disallows env: no claim, Degraded SpecFieldUnsupported naming the fields, rechecked', () => {
    const { plan, status, degraded } = passOf(agentSnapshot(withTools, { template: disallowing }));
    expect(plan.actions).toEqual([]);
    expect(plan.requeueAfterMs).toBe(BLOCKED_RECHECK_MS);
    expect(status.phase).toBe('Degraded');
    expect(degraded).toMatchObject({ status: 'True', reason: 'SpecFieldUnsupported' });
    expect(degraded?.message).toBe(
      'SandboxTemplate polychrome-harness has envVarsInjectionPolicy Disallowed, so a SandboxClaim cannot give the harness spec.tools.mcpServers and spec.tools.requireApproval: set spec.envVarsInjectionPolicy: Allowed on the template (config/sandbox does), or use backend pod',
    );
    // The same template serves a conversation without those fields.
    const plain = passOf(agentSnapshot(conversation(), { template: disallowing }));
    expect(kinds(plain.plan)).toEqual(['create-claim']);
    expect(plain.degraded?.status).toBe('False');
  });

  it('an existing claim is kept (not replaced by nothing) while a field cannot be honoured', () => {
    const { plan, degraded: d } = passOf(
      agentSnapshot(withTools, { template: disallowing, claim: claim() }),
    );
    expect(plan.actions).toEqual([]);
    expect(d?.reason).toBe('SpecFieldUnsupported');
  });

  it('pod backend: a PodTemplate whose HARNESS_MCP_SERVERS comes from valueFrom gets no pod, and says so', () => {
    const c = conversation({ sandbox: { backend: 'pod' }, tools: { mcpServers: [mcp] } });
    const templateSpec = {
      containers: [
        {
          name: 'harness',
          image: 'polychrome/harness:test',
          env: [
            {
              name: 'HARNESS_MCP_SERVERS',
              valueFrom: { configMapKeyRef: { name: 'm', key: 'k' } },
            },
          ],
        },
      ],
    };
    const { plan, degraded: d } = passOf(podSnapshot(c, { templateSpec }));
    expect(plan.actions).toEqual([]);
    expect(d).toMatchObject({ status: 'True', reason: 'SpecFieldUnsupported' });
    expect(d?.message).toContain(
      'PodTemplate polychrome-harness (container harness) sets HARNESS_MCP_SERVERS through valueFrom',
    );
    // Inline JSON is merged, as before.
    const inline = {
      containers: [
        { ...templateSpec.containers[0]!, env: [{ name: 'HARNESS_MCP_SERVERS', value: '[]' }] },
      ],
    };
    expect(kinds(planReconcile(podSnapshot(c, { templateSpec: inline }), NOW))).toEqual([
      'create-pod',
    ]);
  });
});
