import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import {
  ApiException,
  CoreV1Api,
  CustomObjectsApi,
  EventsV1Api,
  NodeV1Api,
  PatchStrategy,
  setHeaderOptions,
  KubeConfig,
} from '@kubernetes/client-node';
import type { RequestContext, V1Pod } from '@kubernetes/client-node';
import pino from 'pino';
import { ConversationResource } from '../../operator/api/v1alpha1/conversation-types';
import { validMinimalConversationSpec } from '../../operator/api/v1alpha1/conversation-cases';
import type { ConversationSpec } from '../../operator/api/v1alpha1/conversation-spec';
import { ManualClock } from '../../operator/controller/clock';
import { ConversationController } from '../../operator/controller/conversation-controller';
import { apiFailureOf } from '../../operator/controller/kube-api-errors';
import { pollUntil } from '../../hack/lib/processes';
import { randomBytes } from 'node:crypto';
import {
  apiErrorMessage,
  createConversationObject,
  dropConversationFinalizers,
  field,
  freshNamespace,
  kubeConfig,
} from './support/kube';
import { sandboxCore, sandboxExtensions } from './support/sandbox';

// The Conversation controller runs in-process against the shared API server, where the
// agent-sandbox controller turns our SandboxClaims into Sandboxes and pods. There is no
// kubelet yet (hack's local node is being written): until it lands, each test makes a pod
// Ready by writing pod status through the status subresource, as a kubelet would.
const { group, version, plural } = ConversationResource;
const ext = sandboxExtensions;
const sandboxes = { ...sandboxCore, plural: 'sandboxes' } as const;
const MINUTE = 60_000;
const YEAR = 365 * 24 * 60 * MINUTE;
const BLOCKED_RECHECK_TEST_MS = 1_000;
const poll = { timeoutMs: 45_000, intervalMs: 200 };
const escapeRegExp = (text: string): string => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

describe('Conversation controller on a real API server', () => {
  let kc: KubeConfig;
  let ns: { name: string; dispose: () => Promise<void> };
  let objects: CustomObjectsApi;
  let core: CoreV1Api;
  let eventsApi: EventsV1Api;
  let controller: ConversationController;
  const clock = new ManualClock(new Date());

  beforeAll(async () => {
    kc = await kubeConfig();
    ns = await freshNamespace(kc, 'ctrl');
    objects = kc.makeApiClient(CustomObjectsApi);
    core = kc.makeApiClient(CoreV1Api);
    eventsApi = kc.makeApiClient(EventsV1Api);
    try {
      await kc.makeApiClient(NodeV1Api).createRuntimeClass({
        body: { metadata: { name: 'gvisor' }, handler: 'runsc' },
      });
    } catch (err: unknown) {
      if (!(err instanceof ApiException && err.code === 409)) throw err;
    }
    const namespace = ns.name;
    await objects.createNamespacedCustomObject({
      ...ext,
      namespace,
      plural: 'sandboxtemplates',
      body: {
        apiVersion: `${ext.group}/${ext.version}`,
        kind: 'SandboxTemplate',
        metadata: { name: 'polychrome-harness' },
        spec: {
          podTemplate: {
            spec: {
              runtimeClassName: 'gvisor',
              automountServiceAccountToken: false,
              containers: [
                {
                  name: 'harness',
                  image: 'polychrome/harness:dev',
                  ports: [{ containerPort: 7070 }],
                },
              ],
            },
          },
        },
      },
    });
    await objects.createNamespacedCustomObject({
      ...ext,
      namespace,
      plural: 'sandboxwarmpools',
      body: {
        apiVersion: `${ext.group}/${ext.version}`,
        kind: 'SandboxWarmPool',
        metadata: { name: 'polychrome-harness' },
        spec: { replicas: 0, sandboxTemplateRef: { name: 'polychrome-harness' } },
      },
    });
    controller = new ConversationController({
      kubeConfig: kc,
      logger: pino({ level: process.env['POLYCHROME_TEST_LOG'] ?? 'silent' }),
      clock,
      namespace,
      baseDelayMs: 50,
      maxDelayMs: 2_000,
      // A missing warm pool or template is looked for again on a timer (nothing watches
      // them); shortened from 30 s so the recovery tests see it without a long wait, and
      // their reads are reused for less than that, so the recheck reads afresh.
      blockedRecheckMs: BLOCKED_RECHECK_TEST_MS,
      sharedReadTtlMs: BLOCKED_RECHECK_TEST_MS / 2,
    });
    await controller.start();
  });

  afterAll(async () => {
    await controller.close();
    // Our finalizers would hold the namespace once the controller is gone: drop them.
    await dropConversationFinalizers(kc, ns.name);
    await ns.dispose();
  });

  const create = async (
    name: string,
    spec: ConversationSpec = validMinimalConversationSpec,
  ): Promise<void> => {
    await createConversationObject(kc, ns.name, name, spec);
  };
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
  const getClaim = async (name: string): Promise<unknown> =>
    objects
      .getNamespacedCustomObject({ ...ext, plural: 'sandboxclaims', namespace: ns.name, name })
      .catch((err: unknown) => {
        if (err instanceof ApiException && err.code === 404) return undefined;
        throw err;
      });
  const getPod = async (name: string): Promise<V1Pod | undefined> =>
    core.readNamespacedPod({ namespace: ns.name, name }).catch((err: unknown) => {
      if (err instanceof ApiException && err.code === 404) return undefined;
      throw err;
    });
  const patchStatus = async (name: string, status: Record<string, unknown>): Promise<void> => {
    // As the turn code does: a merge patch of the status subresource.
    await objects.patchNamespacedCustomObjectStatus(
      { group, version, plural, namespace: ns.name, name, body: { status } },
      setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
    );
  };
  /** Plays the kubelet: the pod runs, is Ready and has an IP. */
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

  it('adds the finalizer, claims a sandbox and reports Ready with the endpoint', async () => {
    await create('c1');
    const claim = await waitFor('the claim of c1', () => getClaim('c1'));
    expect(field(claim, 'spec', 'warmPoolRef', 'name')).toBe('polychrome-harness');
    expect(field(claim, 'metadata', 'ownerReferences')).toMatchObject([
      { kind: 'Conversation', name: 'c1', controller: true },
    ]);
    expect(field(await get('c1'), 'metadata', 'finalizers')).toEqual(['polychrome.dev/cleanup']);

    const pending = await waitFor('c1 to report SandboxPending', async () => {
      const obj = await get('c1');
      return field(condition(obj, 'Progressing'), 'reason') === 'SandboxPending' ? obj : undefined;
    });
    expect(field(pending, 'status', 'phase')).toBe('Pending');

    const sandboxName = await waitFor('the claim to name its Sandbox', async () => {
      const name = field(await getClaim('c1'), 'status', 'sandbox', 'name');
      return typeof name === 'string' && name !== '' ? name : undefined;
    });
    const sandbox: unknown = await objects.getNamespacedCustomObject({
      ...sandboxes,
      namespace: ns.name,
      name: sandboxName,
    });
    const annotated = field(sandbox, 'metadata', 'annotations', 'agents.x-k8s.io/pod-name');
    const podName = typeof annotated === 'string' && annotated !== '' ? annotated : sandboxName;
    await markPodReady(podName, '10.244.0.11');

    const ready = await waitFor('c1 to be Ready', async () => {
      const obj = await get('c1');
      return field(condition(obj, 'Ready'), 'status') === 'True' ? obj : undefined;
    });
    expect(field(ready, 'status', 'phase')).toBe('Ready');
    expect(field(ready, 'status', 'sandbox')).toEqual({
      claimName: 'c1',
      sandboxName,
      podName,
      endpoint: '10.244.0.11:7070',
    });
    expect(field(ready, 'status', 'observedGeneration')).toBe(1);
    expect(field(condition(ready, 'Ready'), 'observedGeneration')).toBe(1);

    // The claim and the readiness are Kubernetes Events on c1 (conversation-events.test.ts
    // covers the rest of the lifecycle on the pod backend).
    const events = await waitFor('the Events of c1', async () => {
      const list = (await eventsApi.listNamespacedEvent({ namespace: ns.name })).items.filter(
        (e) => e.regarding?.name === 'c1' && e.regarding.uid === field(ready, 'metadata', 'uid'),
      );
      return list.some((e) => e.reason === 'SandboxReady') ? list : undefined;
    });
    expect(events.map((e) => [e.reason, e.note])).toEqual(
      expect.arrayContaining([
        [
          'SandboxClaimed',
          'created SandboxClaim c1 on warm pool polychrome-harness; waiting for agent-sandbox to bind a sandbox',
        ],
        [
          'SandboxReady',
          `harness pod ${podName} is ready at 10.244.0.11:7070; the conversation takes turns`,
        ],
      ]),
    );
  });

  it('moves observedGeneration after a spec change', async () => {
    await objects.patchNamespacedCustomObject(
      {
        group,
        version,
        plural,
        namespace: ns.name,
        name: 'c1',
        body: { spec: { agent: { maxSteps: 3 } } },
      },
      setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
    );
    const obj = await waitFor('observedGeneration 2', async () => {
      const o = await get('c1');
      return field(o, 'status', 'observedGeneration') === 2 ? o : undefined;
    });
    expect(field(condition(obj, 'Ready'), 'observedGeneration')).toBe(2);
    expect(field(condition(obj, 'Ready'), 'status')).toBe('True');
  });

  it('reports a missing warm pool as Degraded with what to do', async () => {
    await create('c-nopool', {
      ...validMinimalConversationSpec,
      sandbox: { warmPool: 'absent-pool' },
    });
    const degraded = await waitFor('Degraded WarmPoolMissing', async () => {
      const c = condition(await get('c-nopool'), 'Degraded');
      return field(c, 'reason') === 'WarmPoolMissing' ? c : undefined;
    });
    expect(field(degraded, 'status')).toBe('True');
    expect(field(degraded, 'message')).toBe(
      `SandboxWarmPool absent-pool not found in namespace ${ns.name}: label the namespace so the operator installs it (kubectl label namespace ${ns.name} polychrome.dev/enabled=true), or set spec.sandbox.warmPool`,
    );
  });

  it('closes an idle conversation (injected clock), releases the claim, and reopens on a turn', async () => {
    await create('c-idle', { ...validMinimalConversationSpec, idleTimeout: '30m' });
    await waitFor('the claim of c-idle', () => getClaim('c-idle'));
    await patchStatus('c-idle', {
      lastTurnTime: clock
        .now()
        .toISOString()
        .replace(/\.\d{3}Z$/, 'Z'),
    });
    clock.advance(31 * MINUTE);
    controller.enqueue(ns.name, 'c-idle');
    const closed = await waitFor('c-idle to close', async () => {
      const obj = await get('c-idle');
      return field(obj, 'status', 'phase') === 'Closed' ? obj : undefined;
    });
    expect(field(condition(closed, 'Ready'), 'reason')).toBe('Closed');
    expect(typeof field(closed, 'status', 'closedTime')).toBe('string');
    expect(field(closed, 'status', 'sandbox')).toBeUndefined();
    await waitFor('the claim of c-idle to go', async () =>
      (await getClaim('c-idle')) === undefined ? true : undefined,
    );

    // Reopen: the turn code stamps lastTurnTime and clears closedTime (docs/operator.md).
    clock.advance(MINUTE);
    await patchStatus('c-idle', {
      lastTurnTime: clock
        .now()
        .toISOString()
        .replace(/\.\d{3}Z$/, 'Z'),
      closedTime: null,
    });
    await waitFor('a new claim for c-idle', () => getClaim('c-idle'));
    const reopened = await waitFor('c-idle to reopen', async () => {
      const obj = await get('c-idle');
      return field(obj, 'status', 'phase') === 'Pending' ? obj : undefined;
    });
    expect(field(reopened, 'status', 'closedTime')).toBeUndefined();
  });

  it('deletes a closed conversation after its retention', async () => {
    await create('c-ret', { ...validMinimalConversationSpec, idleTimeout: '1m', retention: '1h' });
    await waitFor('the claim of c-ret', () => getClaim('c-ret'));
    await patchStatus('c-ret', {
      lastTurnTime: clock
        .now()
        .toISOString()
        .replace(/\.\d{3}Z$/, 'Z'),
    });
    clock.advance(2 * MINUTE);
    controller.enqueue(ns.name, 'c-ret');
    await waitFor('c-ret to close', async () =>
      field(await get('c-ret'), 'status', 'phase') === 'Closed' ? true : undefined,
    );
    clock.advance(61 * MINUTE);
    controller.enqueue(ns.name, 'c-ret');
    await waitFor('c-ret to be deleted', async () =>
      (await get('c-ret')) === undefined ? true : undefined,
    );
  });

  it('retention closes but never deletes a conversation Argo CD tracks, or one with retention never', async () => {
    const spec = { ...validMinimalConversationSpec, idleTimeout: '1m', retention: '1h' };
    await createConversationObject(kc, ns.name, 'c-argo', spec, {
      annotations: {
        'argocd.argoproj.io/tracking-id': `support:polychrome.dev/Conversation:${ns.name}/c-argo`,
      },
    });
    await createConversationObject(kc, ns.name, 'c-argo-label', spec, {
      labels: { 'app.kubernetes.io/instance': 'support' },
    });
    // The CRD accepts `never`, and only in retention.
    await create('c-never', { ...spec, retention: 'never' });
    // The control: the same spec, untracked, is deleted at the same clock.
    await create('c-plain', spec);
    const names = ['c-argo', 'c-argo-label', 'c-never', 'c-plain'];
    for (const name of names) {
      await waitFor(`the claim of ${name}`, () => getClaim(name));
      await patchStatus(name, {
        lastTurnTime: clock
          .now()
          .toISOString()
          .replace(/\.\d{3}Z$/, 'Z'),
      });
    }
    clock.advance(2 * MINUTE);
    for (const name of names) controller.enqueue(ns.name, name);
    for (const name of names) {
      await waitFor(`${name} to close`, async () =>
        field(await get(name), 'status', 'phase') === 'Closed' ? true : undefined,
      );
    }
    // Past the 1h retention: the control goes; a spec change on the others makes their next
    // pass at this clock observable (observedGeneration 2), rather than a sleep.
    clock.advance(61 * MINUTE);
    for (const name of names) controller.enqueue(ns.name, name);
    await waitFor('c-plain to be deleted', async () =>
      (await get('c-plain')) === undefined ? true : undefined,
    );
    const held = {
      'c-argo': 'it is managed by Argo CD (annotation argocd.argoproj.io/tracking-id)',
      'c-argo-label': 'it is managed by Argo CD (label app.kubernetes.io/instance)',
      'c-never': 'spec.retention is never',
    };
    for (const [name, why] of Object.entries(held)) {
      await objects.patchNamespacedCustomObject(
        {
          group,
          version,
          plural,
          namespace: ns.name,
          name,
          body: { spec: { agent: { maxSteps: 3 } } },
        },
        setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
      );
      const after = await waitFor(`${name} observedGeneration 2`, async () => {
        const obj = await get(name);
        return field(obj, 'status', 'observedGeneration') === 2 ? obj : undefined;
      });
      expect(field(after, 'metadata', 'deletionTimestamp')).toBeUndefined();
      expect(field(after, 'status', 'phase')).toBe('Closed');
      expect(field(condition(after, 'Ready'), 'message')).toMatch(
        new RegExp(`; the object is kept, never deleted by retention: ${escapeRegExp(why)}$`),
      );
      expect(field(condition(after, 'Degraded'), 'reason')).toBe('Healthy');
    }
    const refused = await createConversationObject(kc, ns.name, 'c-never-idle', {
      ...spec,
      idleTimeout: 'never',
    }).then(() => 'created', apiErrorMessage);
    expect(refused).toMatch(/spec\.idleTimeout: [^\n]*should match/);
  });

  it('plain pod backend: creates the pod, reports Ready, recreates a deleted pod', async () => {
    await create('c-pod', { ...validMinimalConversationSpec, sandbox: { backend: 'pod' } });
    const pod = await waitFor('pod c-pod', () => getPod('c-pod'));
    expect(pod.spec?.runtimeClassName).toBe('gvisor');
    expect(pod.spec?.automountServiceAccountToken).toBe(false);
    expect(pod.spec?.containers[0]?.securityContext?.capabilities?.drop).toEqual(['ALL']);
    expect(pod.metadata?.ownerReferences).toMatchObject([
      { kind: 'Conversation', name: 'c-pod', controller: true },
    ]);
    await markPodReady('c-pod', '10.244.0.12');
    await waitFor('c-pod Ready with its endpoint', async () =>
      field(await get('c-pod'), 'status', 'sandbox', 'endpoint') === '10.244.0.12:7070'
        ? true
        : undefined,
    );

    const firstUid = pod.metadata?.uid;
    await core.deleteNamespacedPod({ namespace: ns.name, name: 'c-pod', gracePeriodSeconds: 0 });
    const again = await waitFor('pod c-pod to be recreated', async () => {
      const p = await getPod('c-pod');
      return p !== undefined && p.metadata?.uid !== firstUid ? p : undefined;
    });
    expect(again.metadata?.labels?.['polychrome.dev/conversation-uid']).toBe(
      field(await get('c-pod'), 'metadata', 'uid'),
    );
  });

  it('on delete, releases the claim and then drops the finalizer', async () => {
    await objects.deleteNamespacedCustomObject({
      group,
      version,
      plural,
      namespace: ns.name,
      name: 'c1',
    });
    await waitFor('c1 to be gone', async () =>
      (await get('c1')) === undefined ? true : undefined,
    );
    await waitFor('the claim of c1 to be gone', async () =>
      (await getClaim('c1')) === undefined ? true : undefined,
    );
  });
  const createPodTemplate = async (name: string, runtimeClassName?: string): Promise<void> => {
    await core.createNamespacedPodTemplate({
      namespace: ns.name,
      body: {
        metadata: { name },
        template: {
          spec: {
            ...(runtimeClassName === undefined ? {} : { runtimeClassName }),
            containers: [
              {
                name: 'harness',
                image: 'polychrome/harness:dev',
                ports: [{ containerPort: 7070 }],
              },
            ],
          },
        },
      },
    });
  };
  const degradedWith = (name: string, reason: string) =>
    waitFor(`${name} Degraded ${reason}`, async () => {
      const obj = await get(name);
      const c = condition(obj, 'Degraded');
      return field(c, 'status') === 'True' && field(c, 'reason') === reason ? obj : undefined;
    });
  const healthy = (name: string) =>
    waitFor(`${name} Degraded False`, async () => {
      const obj = await get(name);
      return field(condition(obj, 'Degraded'), 'status') === 'False' ? obj : undefined;
    });

  it('a warm pool whose SandboxTemplate is missing is Degraded until the template appears', async () => {
    await objects.createNamespacedCustomObject({
      ...ext,
      namespace: ns.name,
      plural: 'sandboxwarmpools',
      body: {
        apiVersion: `${ext.group}/${ext.version}`,
        kind: 'SandboxWarmPool',
        metadata: { name: 'pool-late-template' },
        spec: { replicas: 0, sandboxTemplateRef: { name: 'late-template' } },
      },
    });
    await create('c-notmpl', {
      ...validMinimalConversationSpec,
      sandbox: { warmPool: 'pool-late-template' },
    });
    const degraded = await degradedWith('c-notmpl', 'SandboxTemplateMissing');
    expect(field(degraded, 'status', 'phase')).toBe('Degraded');
    expect(field(condition(degraded, 'Degraded'), 'message')).toBe(
      `SandboxTemplate late-template, named by SandboxWarmPool pool-late-template, not found in namespace ${ns.name}: label the namespace so the operator installs it (kubectl label namespace ${ns.name} polychrome.dev/enabled=true), or point the pool at an existing template`,
    );
    expect(field(condition(degraded, 'Ready'), 'reason')).toBe('SandboxTemplateMissing');

    await objects.createNamespacedCustomObject({
      ...ext,
      namespace: ns.name,
      plural: 'sandboxtemplates',
      body: {
        apiVersion: `${ext.group}/${ext.version}`,
        kind: 'SandboxTemplate',
        metadata: { name: 'late-template' },
        spec: {
          podTemplate: {
            spec: {
              runtimeClassName: 'gvisor',
              containers: [{ name: 'harness', image: 'polychrome/harness:dev' }],
            },
          },
        },
      },
    });
    // No enqueue: the blocked pass asked for a timed recheck (or agent-sandbox's claim
    // update wakes the claim watch first); either way the controller notices on its own.
    const recovered = await healthy('c-notmpl');
    expect(field(condition(recovered, 'Degraded'), 'reason')).toBe('Healthy');
    expect(field(condition(recovered, 'Ready'), 'reason')).toBe('SandboxPending');
    expect(field(recovered, 'status', 'phase')).toBe('Pending');
  });

  it('pod backend: a named PodTemplate that is missing is Degraded, no pod, until it appears', async () => {
    await create('c-nopodtmpl', {
      ...validMinimalConversationSpec,
      sandbox: { backend: 'pod', template: 'late-pod-template' },
    });
    const degraded = await degradedWith('c-nopodtmpl', 'SandboxTemplateMissing');
    expect(field(condition(degraded, 'Degraded'), 'message')).toBe(
      `PodTemplate late-pod-template not found in namespace ${ns.name}: create it, or remove spec.sandbox.template to use the built-in harness pod spec`,
    );
    expect(await getPod('c-nopodtmpl')).toBeUndefined();

    // Nothing watches PodTemplates and no child exists to wake us: only the timed recheck
    // can create the pod.
    await createPodTemplate('late-pod-template');
    const pod = await waitFor('pod c-nopodtmpl', () => getPod('c-nopodtmpl'));
    expect(pod.spec?.containers[0]?.image).toBe('polychrome/harness:dev');
    await healthy('c-nopodtmpl');
  });

  it('pod backend: a missing RuntimeClass is Degraded RuntimeClassMissing until it exists', async () => {
    // A name no test creates: the shared cluster may already have `gvisor`.
    const runtimeClass = `kata-missing-${randomBytes(3).toString('hex')}`;
    const nodeApi = kc.makeApiClient(NodeV1Api);

    // The real rejection, as classifyCreateFailure reads it: 403, Forbidden, the plugin's text.
    const probe = await core
      .createNamespacedPod({
        namespace: ns.name,
        body: {
          metadata: { name: 'probe-runtime-class' },
          spec: { runtimeClassName: runtimeClass, containers: [{ name: 'c', image: 'x' }] },
        },
      })
      .then(
        () => undefined,
        (err: unknown) => err,
      );
    expect(apiFailureOf(probe)).toEqual({
      code: 403,
      reason: 'Forbidden',
      message: `pods "probe-runtime-class" is forbidden: pod rejected: RuntimeClass "${runtimeClass}" not found`,
    });

    await createPodTemplate('rc-template', runtimeClass);
    await create('c-rc', {
      ...validMinimalConversationSpec,
      sandbox: { backend: 'pod', template: 'rc-template' },
    });
    try {
      const degraded = await degradedWith('c-rc', 'RuntimeClassMissing');
      expect(field(degraded, 'status', 'phase')).toBe('Degraded');
      expect(field(condition(degraded, 'Degraded'), 'message')).toBe(
        `RuntimeClass "${runtimeClass}" not found, so admission rejected pod c-rc in namespace ${ns.name}: create RuntimeClass "${runtimeClass}" for a runtime installed on the nodes (or set the sandbox template's runtimeClassName); the pod is retried with backoff`,
      );
      expect(field(condition(degraded, 'Ready'), 'reason')).toBe('RuntimeClassMissing');
      expect(field(condition(degraded, 'Progressing'), 'status')).toBe('False');
      expect(await getPod('c-rc')).toBeUndefined();

      // The failed pass is retried with backoff; once the RuntimeClass exists the create
      // goes through.
      await nodeApi.createRuntimeClass({
        body: { metadata: { name: runtimeClass }, handler: 'kata' },
      });
      const pod = await waitFor('pod c-rc', () => getPod('c-rc'));
      expect(pod.spec?.runtimeClassName).toBe(runtimeClass);
      await markPodReady('c-rc', '10.244.0.13');
      const ready = await waitFor('c-rc Ready', async () => {
        const obj = await get('c-rc');
        return field(condition(obj, 'Ready'), 'status') === 'True' ? obj : undefined;
      });
      expect(field(condition(ready, 'Degraded'), 'reason')).toBe('Healthy');
      expect(field(ready, 'status', 'sandbox', 'endpoint')).toBe('10.244.0.13:7070');
    } finally {
      await nodeApi.deleteRuntimeClass({ name: runtimeClass }).catch(() => undefined);
    }
  });

  // Last in the file: it moves the shared clock centuries ahead.
  it('a closed conversation with an overflowing retention is Degraded RetentionInvalid and never deleted', async () => {
    // `9999999999999h` matches the CRD's DURATION_PATTERN (digits and a unit, 14 of the 32
    // characters allowed) but is ~3.6e25 ns, past Go's int64 Duration, so duration.ts refuses it.
    const retention = '9999999999999h';
    await create('c-badret', { ...validMinimalConversationSpec, idleTimeout: '1m', retention });
    await waitFor('the claim of c-badret', () => getClaim('c-badret'));
    await patchStatus('c-badret', {
      lastTurnTime: clock
        .now()
        .toISOString()
        .replace(/\.\d{3}Z$/, 'Z'),
    });
    clock.advance(2 * MINUTE);
    controller.enqueue(ns.name, 'c-badret');
    const closed = await waitFor('c-badret to close', async () => {
      const obj = await get('c-badret');
      return typeof field(obj, 'status', 'closedTime') === 'string' ? obj : undefined;
    });
    const degraded = condition(closed, 'Degraded');
    expect(field(degraded, 'status')).toBe('True');
    expect(field(degraded, 'reason')).toBe('RetentionInvalid');
    expect(field(degraded, 'message')).toBe(
      `spec.retention "${retention}" cannot be used (invalid duration "${retention}": overflows a 64-bit count of nanoseconds); the object will not be deleted automatically: set spec.retention to a duration such as 24h`,
    );
    expect(field(condition(closed, 'Ready'), 'reason')).toBe('Closed');

    // Past any retention Go could represent (~292 years). A spec change makes the next pass
    // observable (observedGeneration moves), so the assertion below follows a pass that ran
    // at the advanced time, not a sleep.
    clock.advance(300 * YEAR);
    await objects.patchNamespacedCustomObject(
      {
        group,
        version,
        plural,
        namespace: ns.name,
        name: 'c-badret',
        body: { spec: { agent: { maxSteps: 3 } } },
      },
      setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
    );
    const after = await waitFor('c-badret observedGeneration 2', async () => {
      const obj = await get('c-badret');
      return field(obj, 'status', 'observedGeneration') === 2 ? obj : undefined;
    });
    expect(field(after, 'metadata', 'deletionTimestamp')).toBeUndefined();
    expect(field(condition(after, 'Degraded'), 'reason')).toBe('RetentionInvalid');
    expect(field(condition(after, 'Ready'), 'reason')).toBe('Closed');
    expect(await get('c-badret')).toBeDefined();
  });

  it('makes no claim while the template disallows env, says which field and what to change, and claims with env once it allows', async () => {
    const namespace = ns.name;
    const template = {
      apiVersion: `${ext.group}/${ext.version}`,
      kind: 'SandboxTemplate',
      metadata: { name: 'strict' },
      spec: {
        podTemplate: {
          spec: {
            runtimeClassName: 'gvisor',
            automountServiceAccountToken: false,
            containers: [{ name: 'harness', image: 'polychrome/harness:dev' }],
          },
        },
      },
    };
    await objects.createNamespacedCustomObject({
      ...ext,
      namespace,
      plural: 'sandboxtemplates',
      body: template,
    });
    await objects.createNamespacedCustomObject({
      ...ext,
      namespace,
      plural: 'sandboxwarmpools',
      body: {
        apiVersion: `${ext.group}/${ext.version}`,
        kind: 'SandboxWarmPool',
        metadata: { name: 'strict' },
        spec: { replicas: 0, sandboxTemplateRef: { name: 'strict' } },
      },
    });
    const server = { name: 'tickets', transport: 'http' as const, url: 'https://t.example/mcp' };
    await create('tools-strict', {
      ...validMinimalConversationSpec,
      tools: { mcpServers: [server], requireApproval: ['tickets/*'] },
      sandbox: { warmPool: 'strict' },
    });
    const degraded = await waitFor('tools-strict to be Degraded', async () => {
      const obj = await get('tools-strict');
      return field(condition(obj, 'Degraded'), 'reason') === 'SpecFieldUnsupported'
        ? obj
        : undefined;
    });
    expect(field(degraded, 'status', 'phase')).toBe('Degraded');
    expect(field(condition(degraded, 'Degraded'), 'message')).toBe(
      'SandboxTemplate strict has envVarsInjectionPolicy Disallowed, so a SandboxClaim cannot give the harness spec.tools.mcpServers and spec.tools.requireApproval: set spec.envVarsInjectionPolicy: Allowed on the template (config/sandbox does), or use backend pod',
    );
    // Nothing was claimed with the fields dropped.
    expect(await getClaim('tools-strict')).toBeUndefined();

    await objects.patchNamespacedCustomObject(
      {
        ...ext,
        namespace,
        plural: 'sandboxtemplates',
        name: 'strict',
        body: { spec: { envVarsInjectionPolicy: 'Allowed' } },
      },
      setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
    );
    const claim = await waitFor('the claim of tools-strict', () => getClaim('tools-strict'));
    expect(field(claim, 'spec', 'env')).toEqual([
      // The API server defaulted timeoutMs.
      {
        name: 'HARNESS_MCP_SERVERS',
        value: JSON.stringify([{ ...server, timeoutMs: 60_000 }]),
        containerName: 'harness',
      },
      { name: 'HARNESS_REQUIRE_APPROVAL', value: 'tickets/*', containerName: 'harness' },
    ]);
    // agent-sandbox accepted it: the Sandbox's pod carries the variables.
    const sandboxName = await waitFor('the claim to name its Sandbox', async () => {
      const name = field(await getClaim('tools-strict'), 'status', 'sandbox', 'name');
      return typeof name === 'string' && name !== '' ? name : undefined;
    });
    const pod = await waitFor(`pod ${sandboxName}`, () => getPod(sandboxName));
    expect(pod.spec?.containers[0]?.env?.map((e) => e.name)).toEqual([
      'HARNESS_MCP_SERVERS',
      'HARNESS_REQUIRE_APPROVAL',
    ]);
    const healthy = await waitFor('tools-strict to be no longer Degraded', async () => {
      const obj = await get('tools-strict');
      return field(condition(obj, 'Degraded'), 'status') === 'False' ? obj : undefined;
    });
    expect(field(condition(healthy, 'Degraded'), 'reason')).toBe('Healthy');
  });
});

/** A KubeConfig that records every API request made through clients built from it. */
class CountingKubeConfig extends KubeConfig {
  readonly requests: string[] = [];
  override async applySecurityAuthentication(context: RequestContext): Promise<void> {
    const url = new URL(context.getUrl());
    this.requests.push(`${context.getHttpMethod()} ${url.pathname}`);
    await super.applySecurityAuthentication(context);
  }
}

describe('Conversation controller requests (reads come from its informer caches)', () => {
  let admin: KubeConfig;
  let counted: CountingKubeConfig;
  let ns: { name: string; dispose: () => Promise<void> };
  let controller: ConversationController;
  let passes = 0;

  beforeAll(async () => {
    admin = await kubeConfig();
    ns = await freshNamespace(admin, 'ctrl-req');
    counted = new CountingKubeConfig();
    counted.loadFromString(admin.exportConfig());
    controller = new ConversationController({
      kubeConfig: counted,
      logger: pino({ level: process.env['POLYCHROME_TEST_LOG'] ?? 'silent' }),
      namespace: ns.name,
      baseDelayMs: 50,
      maxDelayMs: 2_000,
      // Longer than the test: the default PodTemplate's absence is read once.
      sharedReadTtlMs: 10 * MINUTE,
      onPass: () => {
        passes += 1;
      },
    });
    await controller.start();
  });

  afterAll(async () => {
    await controller.close();
    await dropConversationFinalizers(admin, ns.name);
    await ns.dispose();
  });

  it('a Conversation made Ready reads nothing with GETs; a pass with everything cached sends nothing', async () => {
    const objects = admin.makeApiClient(CustomObjectsApi);
    const core = admin.makeApiClient(CoreV1Api);
    const name = 'c-count';
    counted.requests.length = 0;
    await createConversationObject(admin, ns.name, name, {
      ...validMinimalConversationSpec,
      sandbox: { backend: 'pod' },
    });
    const pod = await pollUntil(
      `pod ${name}`,
      () =>
        core.readNamespacedPod({ namespace: ns.name, name }).catch((err: unknown) => {
          if (err instanceof ApiException && err.code === 404) return undefined;
          throw err;
        }),
      poll,
    );
    pod.status = {
      phase: 'Running',
      podIP: '10.244.0.21',
      podIPs: [{ ip: '10.244.0.21' }],
      conditions: [{ type: 'Ready', status: 'True', lastTransitionTime: new Date() }],
    };
    await core.replaceNamespacedPodStatus({ namespace: ns.name, name, body: pod });
    await pollUntil(
      `${name} Ready`,
      async () => {
        const obj: unknown = await objects.getNamespacedCustomObject({
          group,
          version,
          plural,
          namespace: ns.name,
          name,
        });
        return field(obj, 'status', 'sandbox', 'endpoint') === '10.244.0.21:7070'
          ? true
          : undefined;
      },
      poll,
    );

    const conversationPath = `/apis/${group}/${version}/namespaces/${ns.name}/${plural}/${name}`;
    const podPath = `/api/v1/namespaces/${ns.name}/pods/${name}`;
    // Kubernetes Events are writes of their own: one create each for SandboxClaimed and
    // SandboxReady, nothing else (docs/operator.md, Events).
    const eventWrites = (): string[] =>
      counted.requests.filter((r) => r.includes('/events.k8s.io/'));
    await pollUntil(
      'the Event writes',
      () => Promise.resolve(eventWrites().length >= 2 ? true : undefined),
      poll,
    );
    await controller.eventsSettled();
    const eventsPath = `/apis/events.k8s.io/v1/namespaces/${ns.name}/events`;
    expect(eventWrites()).toEqual([`POST ${eventsPath}`, `POST ${eventsPath}`]);
    const lifecycle = counted.requests.filter((r) => !r.includes('/events.k8s.io/'));
    // The default PodTemplate is absent (the built-in spec): read once, then reused.
    expect(lifecycle.filter((r) => r.startsWith('GET '))).toEqual([
      `GET /api/v1/namespaces/${ns.name}/podtemplates/polychrome-harness`,
    ]);
    expect(lifecycle.filter((r) => !r.startsWith('PUT '))).toEqual([
      `GET /api/v1/namespaces/${ns.name}/podtemplates/polychrome-harness`,
      `PATCH ${conversationPath}`,
      `POST /api/v1/namespaces/${ns.name}/pods`,
    ]);
    // One status write per change of status (Pending, then Ready), nothing else.
    const statusWrites = lifecycle.filter((r) => r.startsWith('PUT '));
    expect(new Set(statusWrites)).toEqual(new Set([`PUT ${conversationPath}/status`]));
    expect(statusWrites.length).toBeGreaterThanOrEqual(2);
    expect(lifecycle).not.toContain(`GET ${podPath}`);

    // A pass for a Conversation whose objects are all cached: no request at all. (Let the
    // pass that wrote Ready finish first.)
    await new Promise((resolve) => setTimeout(resolve, 500));
    counted.requests.length = 0;
    const before = passes;
    controller.enqueue(ns.name, name);
    await pollUntil('the pass', () => Promise.resolve(passes > before ? true : undefined), poll);
    expect(counted.requests).toEqual([]);
  });
});
