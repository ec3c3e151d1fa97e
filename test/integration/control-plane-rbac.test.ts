import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import {
  ApiException,
  CoordinationV1Api,
  CoreV1Api,
  CustomObjectsApi,
  EventsV1Api,
  type KubeConfig,
} from '@kubernetes/client-node';
import { execFileSync } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { defaultBinDir, repoRoot } from '../../hack/lib/paths';
import { LocalNode } from '../../hack/lib/local-node';
import { pollUntil } from '../../hack/lib/processes';
import { ConversationResource } from '../../operator/api/v1alpha1/conversation-types';
import { ConversationController } from '../../operator/controller/conversation-controller';
import { ConversationLeases } from '../../operator/lease/conversation-leases';
import { leaseOwnership } from '../../operator/lease/lease-ownership';
import { CONTROL_PLANE_POD_LABELS, PeerEndpoints } from '../../operator/public-api/peer-endpoints';
import {
  createConversationObject,
  dropConversationFinalizers,
  field,
  freshNamespace,
  kubeConfig,
  sharedCluster,
} from './support/kube';
import {
  CONTROL_PLANE_NAMESPACE,
  deleteProcessPod,
  PEER_HOST,
  writeProcessPod,
} from './support/peer-pods';
import { createSandboxPool, ensureRuntimeClass } from './support/sandbox';

// The control plane runs here as exactly the identity config/rbac and config/cluster grant
// (the polychrome-control-plane ServiceAccount), against the real API server with RBAC on, as
// two replicas sharing the conversations through their leases. A verb missing from
// config/cluster/cluster-role.yaml makes a pass fail and these tests time out on the status they wait
// for. Pods are run by hack's local node in simulate mode (Running and Ready, no process).
const { group, version, plural } = ConversationResource;
const serviceAccountUser = 'system:serviceaccount:polychrome-system:polychrome-control-plane';
const poll = { timeoutMs: 45_000, intervalMs: 250 };

interface Replica {
  identity: string;
  leases: ConversationLeases;
  controller: ConversationController;
  notOwned: number;
}

describe('control plane as its own least-privilege identity, two replicas', () => {
  let admin: KubeConfig;
  let asOperator: KubeConfig;
  let ns: { name: string; dispose: () => Promise<void> };
  let node: LocalNode;
  let nodeDir: string;
  const replicas: Replica[] = [];

  const startReplica = async (identity: string): Promise<Replica> => {
    const leases = new ConversationLeases({
      kubeConfig: asOperator,
      namespace: CONTROL_PLANE_NAMESPACE,
      identity,
      leaseDurationMs: 4_000,
      renewIntervalMs: 1_000,
    });
    const replica: Replica = {
      identity,
      leases,
      notOwned: 0,
      controller: new ConversationController({
        kubeConfig: asOperator,
        logger: pino({ level: process.env['POLYCHROME_TEST_LOG'] ?? 'silent' }),
        namespace: ns.name,
        baseDelayMs: 50,
        maxDelayMs: 2_000,
        ownership: leaseOwnership(leases),
        beforeFinalizerRemoved: (ref) => leases.retire(ref),
        events: { reportingInstance: identity },
        onPass: ({ result }) => {
          if (result === 'not_owned') replica.notOwned++;
        },
      }),
    };
    leases.start();
    await replica.controller.start();
    replicas.push(replica);
    return replica;
  };
  const stopReplica = async (replica: Replica): Promise<void> => {
    await replica.controller.close();
    await replica.leases.close();
  };

  const objects = (): CustomObjectsApi => admin.makeApiClient(CustomObjectsApi);
  const create = (name: string, spec: object): Promise<unknown> =>
    createConversationObject(admin, ns.name, name, spec);
  const get = (name: string): Promise<unknown> =>
    objects().getNamespacedCustomObject({ group, version, plural, namespace: ns.name, name });
  const waitReady = (name: string): Promise<unknown> =>
    pollUntil(
      `${name} to be Ready`,
      async () => {
        const obj = await get(name);
        return field(obj, 'status', 'phase') === 'Ready' &&
          typeof field(obj, 'status', 'sandbox', 'endpoint') === 'string'
          ? obj
          : undefined;
      },
      poll,
    );
  const leaseHolder = async (uid: string): Promise<string | undefined> =>
    (
      await admin
        .makeApiClient(CoordinationV1Api)
        .readNamespacedLease({ namespace: CONTROL_PLANE_NAMESPACE, name: `conv-${uid}` })
    ).spec?.holderIdentity;

  beforeAll(async () => {
    admin = await kubeConfig();
    const cluster = await sharedCluster();
    // The base creates the namespace, the ServiceAccount, the ClusterRole and its binding
    // (config/default leaves out the Kubernetes door, whose APIService no pod here backs).
    execFileSync(join(defaultBinDir, 'kubectl'), [
      `--kubeconfig=${cluster.kubeconfigPath}`,
      'apply',
      '--server-side',
      '-k',
      join(repoRoot, 'config', 'default'),
    ]);
    asOperator = await kubeConfig(
      await cluster.mintUser(serviceAccountUser, [
        'system:serviceaccounts',
        'system:serviceaccounts:polychrome-system',
      ]),
    );
    ns = await freshNamespace(admin, 'rbac');
    await ensureRuntimeClass(admin);
    await createSandboxPool(admin, {
      namespace: ns.name,
      template: 'polychrome-harness',
      pool: 'polychrome-harness',
      podTemplate: {
        spec: {
          runtimeClassName: 'gvisor',
          automountServiceAccountToken: false,
          containers: [{ name: 'harness', image: 'polychrome/harness:dev' }],
        },
      },
    });
    nodeDir = await mkdtemp(join(tmpdir(), 'rbac-node-'));
    node = new LocalNode({
      kubeConfig: admin,
      name: `rbac-${ns.name}`,
      stateDir: nodeDir,
      namespaces: [ns.name],
      simulate: true,
    });
    await node.start();
    await startReplica('replica-a');
    await startReplica('replica-b');
  });

  afterAll(async () => {
    await Promise.allSettled(replicas.map((r) => stopReplica(r)));
    await node.close();
    await dropConversationFinalizers(admin, ns.name);
    await ns.dispose();
    await rm(nodeDir, { recursive: true, force: true });
  });

  it('is refused what config/rbac does not grant', async () => {
    const core = asOperator.makeApiClient(CoreV1Api);
    await expect(core.listNamespacedSecret({ namespace: ns.name })).rejects.toMatchObject({
      code: 403,
    });
    await expect(core.deleteNamespace({ name: ns.name })).rejects.toMatchObject({ code: 403 });
    // Not even one Secret by name: a ModelConfig's key is readable only where its namespace
    // grants it (agent-resources.test.ts).
    await expect(
      core.readNamespacedSecret({ namespace: ns.name, name: 'anthropic-key' }),
    ).rejects.toMatchObject({ code: 403 });
    // Leases only in its own namespace: none in a conversation's, not even to read.
    const tenantLeases = asOperator.makeApiClient(CoordinationV1Api);
    for (const attempt of [
      () => tenantLeases.readNamespacedLease({ namespace: ns.name, name: 'conv-x' }),
      () =>
        tenantLeases.createNamespacedLease({
          namespace: ns.name,
          body: { metadata: { name: 'conv-x' }, spec: {} },
        }),
      () => tenantLeases.deleteNamespacedLease({ namespace: ns.name, name: 'conv-x' }),
    ]) {
      await expect(attempt()).rejects.toMatchObject({ code: 403 });
    }
    // In its own namespace it reads and writes them one by one, never lists or watches.
    await expect(
      tenantLeases.listNamespacedLease({ namespace: CONTROL_PLANE_NAMESPACE }),
    ).rejects.toMatchObject({ code: 403 });
    // Events: create and patch only; it cannot read them, nor delete what it or anyone wrote.
    const events = asOperator.makeApiClient(EventsV1Api);
    await expect(events.listNamespacedEvent({ namespace: ns.name })).rejects.toMatchObject({
      code: 403,
    });
    await expect(
      events.deleteCollectionNamespacedEvent({ namespace: ns.name }),
    ).rejects.toMatchObject({ code: 403 });
    await expect(
      asOperator.makeApiClient(CoreV1Api).deleteNamespacedEvent({ namespace: ns.name, name: 'x' }),
    ).rejects.toMatchObject({ code: 403 });
  });

  it('reads Agents and ModelConfigs and writes their status, never the objects', async () => {
    const asCp = asOperator.makeApiClient(CustomObjectsApi);
    const at = (plural: string, name: string) => ({
      group,
      version,
      plural,
      namespace: ns.name,
      name,
    });
    for (const [kind, plural, spec] of [
      ['Agent', 'agents', { modelRef: { name: 'm' } }],
      ['ModelConfig', 'modelconfigs', { provider: 'openai', model: 'gpt-5' }],
    ] as const) {
      const body = { apiVersion: `${group}/${version}`, kind, metadata: { name: 'rbac' }, spec };
      await expect(
        asCp.createNamespacedCustomObject({ group, version, plural, namespace: ns.name, body }),
      ).rejects.toMatchObject({ code: 403 });
      await objects().createNamespacedCustomObject({
        group,
        version,
        plural,
        namespace: ns.name,
        body,
      });
      await asCp.listNamespacedCustomObject({ group, version, plural, namespace: ns.name });
      const read: unknown = await asCp.getNamespacedCustomObject(at(plural, 'rbac'));
      await asCp.replaceNamespacedCustomObjectStatus({
        ...at(plural, 'rbac'),
        body: { ...(read as object), status: { observedGeneration: 1 } },
      });
      await expect(
        asCp.patchNamespacedCustomObject({
          ...at(plural, 'rbac'),
          body: [{ op: 'add', path: '/metadata/labels', value: { x: 'y' } }],
        }),
      ).rejects.toMatchObject({ code: 403 });
      await expect(asCp.deleteNamespacedCustomObject(at(plural, 'rbac'))).rejects.toMatchObject({
        code: 403,
      });
    }
  });

  it("finds a peer replica's Pod in its own namespace by the watch config/rbac grants", async () => {
    const name = `${ns.name}-peer`;
    const peers = new PeerEndpoints({
      kubeConfig: asOperator,
      namespace: CONTROL_PLANE_NAMESPACE,
      log: pino({ level: process.env['POLYCHROME_TEST_LOG'] ?? 'silent' }),
    });
    try {
      await peers.start();
      await writeProcessPod(admin, {
        namespace: CONTROL_PLANE_NAMESPACE,
        name,
        labels: CONTROL_PLANE_POD_LABELS,
        peerPort: 18443,
        podIP: PEER_HOST,
      });
      // Seen through the watch, not a GET: a refused list or watch would leave it unknown.
      const found = await pollUntil(
        `${name} in the peer cache`,
        () => Promise.resolve(peers.find(name)),
        poll,
      );
      expect(found).toEqual({ host: PEER_HOST, port: 18443 });
      await deleteProcessPod(admin, CONTROL_PLANE_NAMESPACE, name);
      await pollUntil(
        `${name} to leave the peer cache`,
        () => Promise.resolve(peers.find(name) === undefined ? true : undefined),
        poll,
      );
    } finally {
      await peers.close();
      await deleteProcessPod(admin, CONTROL_PLANE_NAMESPACE, name);
    }
  });

  it('brings conversations on both backends to Ready, one lease holder each', async () => {
    const names = ['sb-1', 'sb-2', 'sb-3', 'pod-1', 'pod-2', 'pod-3'];
    for (const name of names) {
      await create(name, {
        agent: { systemPrompt: 'test' },
        ...(name.startsWith('pod') ? { sandbox: { backend: 'pod' } } : {}),
      });
    }
    for (const name of names) {
      const ready = await waitReady(name);
      const uid = String(field(ready, 'metadata', 'uid'));
      expect(['replica-a', 'replica-b']).toContain(await leaseHolder(uid));
      expect(field(ready, 'metadata', 'finalizers')).toEqual(['polychrome.dev/cleanup']);
    }
    // Each holder wrote its Events as this identity (a refused write is only logged, so
    // the Event itself is the proof): SandboxReady once per conversation, by its lease holder.
    const adminEvents = admin.makeApiClient(EventsV1Api);
    for (const name of names) {
      const uid = String(field(await get(name), 'metadata', 'uid'));
      const ready = await pollUntil(
        `the SandboxReady Event of ${name}`,
        async () =>
          (await adminEvents.listNamespacedEvent({ namespace: ns.name })).items.find(
            (e) => e.regarding?.uid === uid && e.reason === 'SandboxReady',
          ),
        poll,
      );
      expect(ready.reportingInstance).toBe(await leaseHolder(uid));
      expect(ready.reportingController).toBe('polychrome.dev/control-plane');
    }
    // The replica without the lease stood back at least once for each conversation.
    expect(replicas.reduce((n, r) => n + r.notOwned, 0)).toBeGreaterThanOrEqual(names.length);
  });

  it('hands a stopped replica’s conversations to the other, which still cleans up on delete', async () => {
    const name = 'handover';
    await create(name, { agent: { systemPrompt: 'test' }, sandbox: { backend: 'pod' } });
    const uid = String(field(await waitReady(name), 'metadata', 'uid'));
    const holderName = await leaseHolder(uid);
    const holder = replicas.find((r) => r.identity === holderName);
    const other = replicas.find((r) => r.identity !== holderName);
    if (holder === undefined || other === undefined)
      throw new Error(`no replica named ${String(holderName)}`);
    await stopReplica(holder);
    // Stopping released the lease: the other replica deletes on its next pass.
    await objects().deleteNamespacedCustomObject({
      group,
      version,
      plural,
      namespace: ns.name,
      name,
    });
    await pollUntil(
      `${name} to be cleaned up and removed by ${other.identity}`,
      async () => {
        try {
          await get(name);
          return undefined;
        } catch (err: unknown) {
          if (err instanceof ApiException && err.code === 404) return true;
          throw err;
        }
      },
      poll,
    );
    await expect(
      admin.makeApiClient(CoreV1Api).readNamespacedPod({ namespace: ns.name, name }),
    ).rejects.toMatchObject({ code: 404 });
    // Its Lease went with it, deleted by the control plane (no owner reference reaches it).
    await expect(leaseHolder(uid)).rejects.toMatchObject({ code: 404 });
  });
});
