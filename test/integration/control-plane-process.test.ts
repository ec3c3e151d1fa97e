import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import {
  ApiException,
  CoordinationV1Api,
  CustomObjectsApi,
  PatchStrategy,
  setHeaderOptions,
  type KubeConfig,
} from '@kubernetes/client-node';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ensureDevCerts, type DevCerts } from '../../hack/lib/dev-certs';
import { ensureApprovalKey } from '../../hack/lib/harness-config';
import { ensureHarnessCa } from '../../hack/lib/harness-pki';
import { LocalNode } from '../../hack/lib/local-node';
import { pollUntil } from '../../hack/lib/processes';
import { ControlPlaneProcess, controlPlaneKubeconfig } from './support/control-plane';
import {
  field,
  freshNamespace,
  kubeConfig,
  sharedCluster,
  dropConversationFinalizers,
} from './support/kube';
import { CONTROL_PLANE_NAMESPACE } from './support/peer-pods';
import { ensureRuntimeClass } from './support/sandbox';
import { StatePlane } from './support/state-plane';

// The real control-plane process (operator/main.ts) as its ServiceAccount identity, with the
// real state-plane process: not ready until the state plane link is up; two replicas share
// conversations through their leases; a SIGKILLed replica's leases are taken over after
// they expire; SIGTERM releases leases and exits 0.
const conversations = {
  group: 'polychrome.dev',
  version: 'v1alpha1',
  plural: 'conversations',
} as const;
const LEASE_MS = 3_000;

describe('control-plane process', () => {
  let admin: KubeConfig;
  let operatorKubeconfig: string;
  let ns: { name: string; dispose: () => Promise<void> };
  let dir: string;
  let certs: DevCerts;
  let state: StatePlane;
  let node: LocalNode;
  let harnessCaFile: string;
  let approvalKeyFile: string;
  const planes: ControlPlaneProcess[] = [];

  const startControlPlane = async (identity: string): Promise<ControlPlaneProcess> => {
    const plane = await ControlPlaneProcess.create({
      identity,
      kubeconfig: operatorKubeconfig,
      namespace: ns.name,
      certs,
      stateAddress: state.address,
      harnessCaFile,
      approvalKeyFile,
      leaseDurationMs: LEASE_MS,
      leaseRenewMs: 1_000,
    });
    planes.push(plane);
    plane.start();
    return plane;
  };

  const createConversation = async (name: string): Promise<string> => {
    const created: unknown = await admin
      .makeApiClient(CustomObjectsApi)
      .createNamespacedCustomObject({
        ...conversations,
        namespace: ns.name,
        body: {
          apiVersion: 'polychrome.dev/v1alpha1',
          kind: 'Conversation',
          metadata: { name },
          spec: { agent: { systemPrompt: 'test' }, sandbox: { backend: 'pod' } },
        },
      });
    return String(field(created, 'metadata', 'uid'));
  };
  const waitConversationReady = (name: string): Promise<true> =>
    pollUntil(
      `${name} to be Ready`,
      async () => {
        const obj: unknown = await admin
          .makeApiClient(CustomObjectsApi)
          .getNamespacedCustomObject({ ...conversations, namespace: ns.name, name });
        return field(obj, 'status', 'phase') === 'Ready' ? true : undefined;
      },
      { timeoutMs: 60_000, intervalMs: 250 },
    );
  const holderOf = async (uid: string): Promise<string | undefined> =>
    (
      await admin
        .makeApiClient(CoordinationV1Api)
        .readNamespacedLease({ namespace: CONTROL_PLANE_NAMESPACE, name: `conv-${uid}` })
    ).spec?.holderIdentity;

  beforeAll(async () => {
    admin = await kubeConfig();
    operatorKubeconfig = await controlPlaneKubeconfig(await sharedCluster());
    ns = await freshNamespace(admin, 'cpproc');
    await ensureRuntimeClass(admin);
    dir = await mkdtemp(join(tmpdir(), 'cp-process-'));
    certs = await ensureDevCerts(join(dir, 'pki'));
    harnessCaFile = (await ensureHarnessCa(join(dir, 'harness-pki'))).certPath;
    approvalKeyFile = (await ensureApprovalKey(join(dir, 'approval-key.pem'))).privateKeyPath;
    state = await StatePlane.create(certs, join(dir, 'state-data'));
    node = new LocalNode({
      kubeConfig: admin,
      name: `cpproc-${ns.name}`,
      stateDir: join(dir, 'node'),
      namespaces: [ns.name],
      simulate: true,
    });
    await node.start();
  });

  afterAll(async () => {
    await Promise.all(planes.map((p) => p.kill('SIGKILL')));
    await state?.kill('SIGKILL');
    await node.close();
    await dropConversationFinalizers(admin, ns.name);
    await ns.dispose();
    await rm(dir, { recursive: true, force: true });
  });

  it('is not ready until its state plane link is up', async () => {
    const a = await startControlPlane('cp-a');
    // Serving its side port, but refusing readiness: no state plane yet.
    await pollUntil(
      'cp-a /readyz to answer',
      async () => ((await a.readyz()) === 503 ? true : undefined),
      {
        timeoutMs: 60_000,
        intervalMs: 200,
      },
    );
    await state.start();
    await a.waitReady();
    expect(a.log.text()).toMatch(/state plane link up/);
  });

  it('shares conversations with a second replica, one lease holder each', async () => {
    const b = await startControlPlane('cp-b');
    await b.waitReady();
    const names = ['p1', 'p2', 'p3', 'p4'];
    const uids = await Promise.all(names.map((n) => createConversation(n)));
    for (const name of names) await waitConversationReady(name);
    for (const uid of uids) expect(['cp-a', 'cp-b']).toContain(await holderOf(uid));
  });

  it('keeps the Ready condition of Agents and ModelConfigs (operator/main.ts starts that controller)', async () => {
    const api = admin.makeApiClient(CustomObjectsApi);
    const at = { group: 'polychrome.dev', version: 'v1alpha1', namespace: ns.name };
    await api.createNamespacedCustomObject({
      ...at,
      plural: 'agents',
      body: {
        apiVersion: 'polychrome.dev/v1alpha1',
        kind: 'Agent',
        metadata: { name: 'solo' },
        spec: { modelRef: { name: 'gateway' } },
      },
    });
    await api.createNamespacedCustomObject({
      ...at,
      plural: 'modelconfigs',
      body: {
        apiVersion: 'polychrome.dev/v1alpha1',
        kind: 'ModelConfig',
        metadata: { name: 'gateway' },
        spec: { provider: 'openai', model: 'llama-4-scout', baseUrl: 'http://gateway.models.svc' },
      },
    });
    await pollUntil(
      'Agent solo to be Ready',
      async () => {
        const agent: unknown = await api.getNamespacedCustomObject({
          ...at,
          plural: 'agents',
          name: 'solo',
        });
        const conditions = field(agent, 'status', 'conditions');
        return Array.isArray(conditions) &&
          conditions.some((c: unknown) => field(c, 'reason') === 'Resolved')
          ? true
          : undefined;
      },
      { timeoutMs: 30_000, intervalMs: 200 },
    );
  });

  it('keeps each Lease in its own namespace and deletes it with its Conversation', async () => {
    const uid = await createConversation('p6');
    await waitConversationReady('p6');
    expect(['cp-a', 'cp-b']).toContain(await holderOf(uid));
    await admin
      .makeApiClient(CustomObjectsApi)
      .deleteNamespacedCustomObject({ ...conversations, namespace: ns.name, name: 'p6' });
    await pollUntil(
      'p6 to be cleaned up and removed',
      async () => {
        try {
          await admin
            .makeApiClient(CustomObjectsApi)
            .getNamespacedCustomObject({ ...conversations, namespace: ns.name, name: 'p6' });
          return undefined;
        } catch (err: unknown) {
          if (err instanceof ApiException && err.code === 404) return true;
          throw err;
        }
      },
      { timeoutMs: 30_000, intervalMs: 250 },
    );
    // The holder deletes the Lease before the finalizer comes off. The other replica may
    // take it again while its cache still holds the Conversation, and deletes it when its
    // watch reports the deletion: gone soon after, and not made again.
    const leaseGone = async (): Promise<true | undefined> => {
      try {
        await holderOf(uid);
        return undefined;
      } catch (err: unknown) {
        if (err instanceof ApiException && err.code === 404) return true;
        throw err;
      }
    };
    await pollUntil('p6’s Lease to be deleted', leaseGone, { timeoutMs: 10_000, intervalMs: 100 });
    // Longer than a renewal interval and a requeue of the deleted Conversation's key.
    await new Promise((resolve) => setTimeout(resolve, 3_000));
    expect(await leaseGone()).toBe(true);
  });

  it('takes over a SIGKILLed replica’s leases after they expire, and releases on SIGTERM', async () => {
    const uid = await createConversation('p5');
    await waitConversationReady('p5');
    const holderName = await holderOf(uid);
    const holder = planes.find((p) => p.identity === holderName);
    const survivor = planes.find((p) => p.identity !== holderName && p.running);
    if (holder === undefined || survivor === undefined)
      throw new Error(`no live replica besides ${String(holderName)}`);
    expect(await holder.kill('SIGKILL')).toBe('SIGKILL');
    // The survivor reconciles p5 (resync or the next event) once the lease has expired.
    await admin.makeApiClient(CustomObjectsApi).patchNamespacedCustomObject(
      {
        ...conversations,
        namespace: ns.name,
        name: 'p5',
        body: { metadata: { annotations: { 'polychrome.dev/test-nudge': '1' } } },
      },
      setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
    );
    await pollUntil(
      `${survivor.identity} to take over p5`,
      async () => ((await holderOf(uid)) === survivor.identity ? true : undefined),
      { timeoutMs: 30_000, intervalMs: 250 },
    );

    expect(await survivor.kill('SIGTERM')).toBe(0);
    // Released, so another replica need not wait for expiry.
    expect(await holderOf(uid)).toBe('');
  });
});
