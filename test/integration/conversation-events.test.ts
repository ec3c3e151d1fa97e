import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import {
  ApiException,
  CoreV1Api,
  CustomObjectsApi,
  EventsV1Api,
  PatchStrategy,
  setHeaderOptions,
} from '@kubernetes/client-node';
import type { EventsV1Event, KubeConfig, V1Pod } from '@kubernetes/client-node';
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import pino from 'pino';
import { defaultBinDir } from '../../hack/lib/paths';
import { pollUntil } from '../../hack/lib/processes';
import { ConversationResource } from '../../operator/api/v1alpha1/conversation-types';
import { validMinimalConversationSpec } from '../../operator/api/v1alpha1/conversation-cases';
import { ManualClock } from '../../operator/controller/clock';
import { ConversationController } from '../../operator/controller/conversation-controller';
import {
  createConversationObject,
  dropConversationFinalizers,
  field,
  freshNamespace,
  kubeConfig,
  sharedCluster,
} from './support/kube';
import { ensureRuntimeClass } from './support/sandbox';

// Kubernetes Events on Conversations, written by the in-process controller to the shared
// API server and read back through events.k8s.io/v1 and `kubectl describe`. Pod backend;
// the test plays the kubelet (pod status through the status subresource), and the
// reconciler's clock is a ManualClock (the Events carry the wall time).
const { group, version, plural } = ConversationResource;
const MINUTE = 60_000;
const poll = { timeoutMs: 45_000, intervalMs: 200 };
const INSTANCE = 'events-test-replica';
const rfc3339 = (d: Date): string => d.toISOString().replace(/\.\d{3}Z$/u, 'Z');

describe('Kubernetes Events on Conversations', () => {
  let kc: KubeConfig;
  let kubeconfigPath: string;
  let ns: { name: string; dispose: () => Promise<void> };
  let objects: CustomObjectsApi;
  let core: CoreV1Api;
  let eventsApi: EventsV1Api;
  let controller: ConversationController;
  let passes = 0;
  const clock = new ManualClock(new Date());

  const startController = async (): Promise<ConversationController> => {
    const c = new ConversationController({
      kubeConfig: kc,
      logger: pino({ level: process.env['POLYCHROME_TEST_LOG'] ?? 'silent' }),
      clock,
      namespace: ns.name,
      baseDelayMs: 50,
      maxDelayMs: 2_000,
      blockedRecheckMs: 1_000,
      sharedReadTtlMs: 500,
      agentSandbox: false,
      events: { reportingInstance: INSTANCE },
      onPass: () => {
        passes += 1;
      },
    });
    await c.start();
    return c;
  };

  beforeAll(async () => {
    kc = await kubeConfig();
    kubeconfigPath = (await sharedCluster()).kubeconfigPath;
    ns = await freshNamespace(kc, 'events');
    await ensureRuntimeClass(kc);
    objects = kc.makeApiClient(CustomObjectsApi);
    core = kc.makeApiClient(CoreV1Api);
    eventsApi = kc.makeApiClient(EventsV1Api);
    controller = await startController();
  });

  afterAll(async () => {
    await controller.close();
    await dropConversationFinalizers(kc, ns.name);
    await ns.dispose();
  });

  const get = async (name: string): Promise<unknown> =>
    objects
      .getNamespacedCustomObject({ group, version, plural, namespace: ns.name, name })
      .catch((err: unknown) => {
        if (err instanceof ApiException && err.code === 404) return undefined;
        throw err;
      });
  const condition = (obj: unknown, type: string): unknown => {
    const conditions = field(obj, 'status', 'conditions');
    return Array.isArray(conditions)
      ? conditions.find((c) => field(c, 'type') === type)
      : undefined;
  };
  const getPod = async (name: string): Promise<V1Pod | undefined> =>
    core.readNamespacedPod({ namespace: ns.name, name }).catch((err: unknown) => {
      if (err instanceof ApiException && err.code === 404) return undefined;
      throw err;
    });
  const merge = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);
  const patchStatus = async (name: string, status: Record<string, unknown>): Promise<void> => {
    await objects.patchNamespacedCustomObjectStatus(
      { group, version, plural, namespace: ns.name, name, body: { status } },
      merge,
    );
  };
  const patchSpec = async (name: string, spec: Record<string, unknown>): Promise<void> => {
    await objects.patchNamespacedCustomObject(
      { group, version, plural, namespace: ns.name, name, body: { spec } },
      merge,
    );
  };
  const markPodReady = async (podName: string, ip: string): Promise<void> => {
    const pod = await pollUntil(`pod ${podName}`, () => getPod(podName), poll);
    pod.status = {
      phase: 'Running',
      podIP: ip,
      podIPs: [{ ip }],
      conditions: [{ type: 'Ready', status: 'True', lastTransitionTime: new Date() }],
    };
    await core.replaceNamespacedPodStatus({ namespace: ns.name, name: podName, body: pod });
  };
  const waitFor = <T>(what: string, check: () => Promise<T | undefined>): Promise<T> =>
    pollUntil(what, check, poll);
  const waitStatus = (name: string, what: string, ok: (obj: unknown) => boolean) =>
    waitFor(`${name}: ${what}`, async () => {
      const obj = await get(name);
      return obj !== undefined && ok(obj) ? obj : undefined;
    });
  /** The Events about `name` (any uid), oldest first. */
  const eventsOf = async (name: string): Promise<EventsV1Event[]> =>
    (await eventsApi.listNamespacedEvent({ namespace: ns.name })).items
      .filter((e) => e.regarding?.name === name)
      .sort((a, b) => new Date(a.eventTime).getTime() - new Date(b.eventTime).getTime());
  const eventWith = (name: string, reason: string, count?: number) =>
    waitFor(`Event ${reason}${count === undefined ? '' : ` x${count}`} on ${name}`, async () =>
      (await eventsOf(name)).find(
        (e) => e.reason === reason && (count === undefined || (e.series?.count ?? 1) === count),
      ),
    );
  /** Occurrences by reason: 1 for an Event without a series, else its count. */
  const tally = (events: readonly EventsV1Event[]): Record<string, number> => {
    const out: Record<string, number> = {};
    for (const e of events) {
      const reason = e.reason ?? '';
      out[reason] = (out[reason] ?? 0) + (e.series?.count ?? 1);
    }
    return out;
  };

  it('drives a Conversation through claimed, ready, closed idle, reopened and a repeated Degraded reason; kubectl describe lists them', async () => {
    const name = 'ev1';
    await createConversationObject(kc, ns.name, name, {
      ...validMinimalConversationSpec,
      idleTimeout: '30m',
      sandbox: { backend: 'pod' },
    });
    const claimed = await eventWith(name, 'SandboxClaimed');
    const uid = field(await get(name), 'metadata', 'uid');
    expect(claimed).toMatchObject({
      type: 'Normal',
      action: 'ClaimSandbox',
      note: `created harness pod ${name}; waiting for it to become Ready`,
      reportingController: 'polychrome.dev/control-plane',
      reportingInstance: INSTANCE,
      regarding: {
        apiVersion: 'polychrome.dev/v1alpha1',
        kind: 'Conversation',
        namespace: ns.name,
        name,
        uid,
      },
    });
    // client-go's naming: <regarding name>.<unix nanoseconds in hex>.
    expect(claimed.metadata?.name).toMatch(new RegExp(`^${name}\\.[0-9a-f]+$`, 'u'));

    await markPodReady(name, '10.244.1.11');
    const ready = await eventWith(name, 'SandboxReady');
    expect(ready).toMatchObject({
      type: 'Normal',
      note: `harness pod ${name} is ready at 10.244.1.11:7070; the conversation takes turns`,
    });

    // Idle close: a turn 31 minutes ago on the reconciler's clock.
    await patchStatus(name, { lastTurnTime: rfc3339(clock.now()) });
    clock.advance(31 * MINUTE);
    controller.enqueue(ns.name, name);
    await waitStatus(name, 'Closed', (o) => field(o, 'status', 'phase') === 'Closed');
    const closed = await eventWith(name, 'ClosedIdle');
    expect(closed.note).toMatch(
      /^closed at \S+ after 30m without a turn; the next turn reopens it; the object is deleted 24h after closing$/u,
    );

    // Reopen as the turn code does; the new pod is claimed and becomes Ready again.
    clock.advance(MINUTE);
    await patchStatus(name, { lastTurnTime: rfc3339(clock.now()), closedTime: null });
    const reopened = await eventWith(name, 'Reopened');
    expect(reopened.type).toBe('Normal');
    await eventWith(name, 'SandboxClaimed', 2);
    await markPodReady(name, '10.244.1.11');
    await eventWith(name, 'SandboxReady', 2);

    // A Degraded reason, cleared, then again: one Warning Event with a series of 2.
    await patchSpec(name, { sandbox: { backend: 'pod', template: 'no-such-template' } });
    const degraded = await eventWith(name, 'SandboxTemplateMissing');
    expect(degraded).toMatchObject({
      type: 'Warning',
      action: 'Reconcile',
      note: `PodTemplate no-such-template not found in namespace ${ns.name}: create it, or remove spec.sandbox.template to use the built-in harness pod spec`,
    });
    expect(degraded.series).toBeUndefined();
    await patchSpec(name, { sandbox: { backend: 'pod', template: null } });
    await waitStatus(name, 'Ready again', (o) => field(condition(o, 'Ready'), 'status') === 'True');
    await patchSpec(name, { sandbox: { backend: 'pod', template: 'no-such-template' } });
    const repeated = await eventWith(name, 'SandboxTemplateMissing', 2);
    expect(repeated.metadata?.name).toBe(degraded.metadata?.name);
    expect(new Date(repeated.series?.lastObservedTime ?? 0).getTime()).toBeGreaterThan(
      new Date(repeated.eventTime).getTime(),
    );

    // A quarantined turn (the turn code's fact status.turns.quarantined, which the one
    // status owner turns into Degraded TurnAmbiguous), then its resolution.
    await patchSpec(name, { sandbox: { backend: 'pod', template: null } });
    await waitStatus(name, 'healthy', (o) => field(condition(o, 'Degraded'), 'status') === 'False');
    await patchStatus(name, {
      turns: {
        quarantined: {
          turnId: 't1',
          toolCallId: 'tc1',
          reason: 'the harness was lost',
          since: rfc3339(new Date()),
        },
      },
    });
    const quarantined = await eventWith(name, 'TurnQuarantined');
    expect(quarantined.type).toBe('Warning');
    expect(quarantined.note).toContain(
      'turn t1 is quarantined: the outcome of side-effecting tool call tc1 is unknown (the harness was lost)',
    );
    await patchStatus(name, { turns: { quarantined: null } });
    await eventWith(name, 'QuarantineResolved');
    await controller.eventsSettled();

    const all = await eventsOf(name);
    expect(new Set(all.map((e) => e.regarding?.uid))).toEqual(new Set([uid]));
    expect(tally(all)).toEqual({
      SandboxClaimed: 2,
      // Ready after the first pod, after the reopen, and after the first Degraded cleared:
      // the third is counted in memory, sent when the series is refreshed or ends.
      SandboxReady: 2,
      ClosedIdle: 1,
      Reopened: 1,
      SandboxTemplateMissing: 2,
      TurnQuarantined: 1,
      QuarantineResolved: 1,
    });

    // The real kubectl shows them in the Events section of `describe`.
    const described = execFileSync(
      join(defaultBinDir, 'kubectl'),
      [`--kubeconfig=${kubeconfigPath}`, 'describe', 'conversation', name, '-n', ns.name],
      { encoding: 'utf8' },
    );
    const section = described.slice(described.indexOf('\nEvents:'));
    expect(section).not.toMatch(/Events:\s+<none>/u);
    const rows = section.split('\n').filter((l) => /^\s+(Normal|Warning)\s/u.test(l));
    const row = (type: string, reason: string): string | undefined =>
      rows.find((l) => new RegExp(`^\\s+${type}\\s+${reason}\\s`, 'u').test(l));
    for (const [type, reason] of [
      ['Normal', 'SandboxClaimed'],
      ['Normal', 'SandboxReady'],
      ['Normal', 'ClosedIdle'],
      ['Normal', 'Reopened'],
      ['Warning', 'SandboxTemplateMissing'],
      ['Warning', 'TurnQuarantined'],
      ['Normal', 'QuarantineResolved'],
    ] as const) {
      const line = row(type, reason);
      expect(line).toBeDefined();
      expect(line).toContain('polychrome.dev/control-plane');
    }
    // A series shows its count in the Age column.
    expect(row('Warning', 'SandboxTemplateMissing')).toMatch(/\(x2 over /u);
    expect(row('Warning', 'SandboxTemplateMissing')).toContain(
      'PodTemplate no-such-template not found',
    );

    // On the wire, eventTime is a MicroTime (6 fractional digits), as the API requires.
    const raw: unknown = JSON.parse(
      execFileSync(
        join(defaultBinDir, 'kubectl'),
        [
          `--kubeconfig=${kubeconfigPath}`,
          'get',
          'events.v1.events.k8s.io',
          '-n',
          ns.name,
          '-o',
          'json',
        ],
        { encoding: 'utf8' },
      ),
    );
    const items = field(raw, 'items');
    const times = (Array.isArray(items) ? items : [])
      .filter((e) => field(e, 'regarding', 'name') === name)
      .map((e) => field(e, 'eventTime'));
    expect(times.length).toBe(all.length);
    for (const t of times) expect(t).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$/u);

    // A restarted control plane compares against the status the object has: no Event again.
    await controller.close();
    controller = await startController();
    const before = passes;
    controller.enqueue(ns.name, name);
    await waitFor('a pass after the restart', () =>
      Promise.resolve(passes > before ? true : undefined),
    );
    await controller.eventsSettled();
    expect(tally(await eventsOf(name))).toEqual(tally(all));
  });

  it('a conversation deleted by retention gets DeletedByRetention', async () => {
    const name = 'ev-ret';
    await createConversationObject(kc, ns.name, name, {
      ...validMinimalConversationSpec,
      idleTimeout: '1m',
      retention: '1h',
      sandbox: { backend: 'pod' },
    });
    await eventWith(name, 'SandboxClaimed');
    const uid = field(await get(name), 'metadata', 'uid');
    await patchStatus(name, { lastTurnTime: rfc3339(clock.now()) });
    clock.advance(2 * MINUTE);
    controller.enqueue(ns.name, name);
    await eventWith(name, 'ClosedIdle');
    clock.advance(61 * MINUTE);
    controller.enqueue(ns.name, name);
    await waitFor(`${name} to be deleted`, async () =>
      (await get(name)) === undefined ? true : undefined,
    );
    const deleted = await eventWith(name, 'DeletedByRetention');
    expect(deleted).toMatchObject({
      type: 'Normal',
      action: 'Delete',
      regarding: { kind: 'Conversation', name, uid },
    });
    expect(deleted.note).toMatch(
      new RegExp(
        `^deleting Conversation ${name}: retention 1h after closing at \\S+ has passed; `,
        'u',
      ),
    );
  });
});
