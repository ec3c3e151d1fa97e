import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import {
  CoordinationV1Api,
  CustomObjectsApi,
  PatchStrategy,
  setHeaderOptions,
  type KubeConfig,
} from '@kubernetes/client-node';
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ensureDevCerts, type DevCerts } from '../../hack/lib/dev-certs';
import { defaultBinDir, repoRoot } from '../../hack/lib/local-cluster';
import { LocalNode } from '../../hack/lib/local-node';
import { freePort, isAlive, pollUntil } from '../../hack/lib/processes';
import { startStateProcess, type StateProcess } from '../../state/server/testdata/state-process';
import {
  field,
  freshNamespace,
  kubeConfig,
  sharedCluster,
  dropConversationFinalizers,
} from './support/kube';
import { ensureRuntimeClass } from './support/sandbox';

// The real control-plane process (operator/main.ts) as its ServiceAccount identity, with the
// real state-plane process: not ready until the state plane link is up; two replicas share
// conversations through their leases; a SIGKILLed replica's leases are taken over after
// they expire; SIGTERM releases leases and exits 0.
const serviceAccountUser = 'system:serviceaccount:polychrome-system:polychrome-control-plane';
const conversations = {
  group: 'polychrome.dev',
  version: 'v1alpha1',
  plural: 'conversations',
} as const;
const LEASE_MS = 3_000;

interface ControlPlane {
  identity: string;
  child: ChildProcess;
  healthPort: number;
  exited: Promise<number | NodeJS.Signals | null>;
  logs: string[];
}

describe('control-plane process', () => {
  let admin: KubeConfig;
  let operatorKubeconfig: string;
  let ns: { name: string; dispose: () => Promise<void> };
  let dir: string;
  let certs: DevCerts;
  let statePort: number;
  let state: StateProcess | undefined;
  let node: LocalNode;
  const planes: ControlPlane[] = [];

  const startControlPlane = async (identity: string): Promise<ControlPlane> => {
    const healthPort = await freePort();
    const child = spawn(
      process.execPath,
      ['--import', 'tsx', join(repoRoot, 'operator', 'main.ts')],
      {
        cwd: repoRoot,
        stdio: ['ignore', 'pipe', 'pipe'],
        env: {
          PATH: process.env.PATH ?? '',
          POLYCHROME_IDENTITY: identity,
          POLYCHROME_KUBECONFIG: operatorKubeconfig,
          POLYCHROME_WATCH_NAMESPACE: ns.name,
          POLYCHROME_AGENT_SANDBOX: 'false',
          POLYCHROME_STATE_ADDRESS: `localhost:${statePort}`,
          POLYCHROME_STATE_CA: certs.ca.certPath,
          POLYCHROME_STATE_CERT: certs.controlPlane.certPath,
          POLYCHROME_STATE_KEY: certs.controlPlane.keyPath,
          POLYCHROME_HEALTH_HOST: '127.0.0.1',
          POLYCHROME_HEALTH_PORT: String(healthPort),
          POLYCHROME_LEASE_DURATION_MS: String(LEASE_MS),
          POLYCHROME_LEASE_RENEW_MS: '1000',
          POLYCHROME_LOG_LEVEL: 'info',
        },
      },
    );
    const logs: string[] = [];
    child.stdout?.on('data', (chunk: Buffer) => logs.push(chunk.toString()));
    child.stderr?.on('data', (chunk: Buffer) => logs.push(chunk.toString()));
    const exited = new Promise<number | NodeJS.Signals | null>((resolve) =>
      child.on('exit', (code, signal) => resolve(signal ?? code)),
    );
    const plane = { identity, child, healthPort, exited, logs };
    planes.push(plane);
    return plane;
  };
  const readyz = async (plane: ControlPlane): Promise<number> => {
    try {
      return (await fetch(`http://127.0.0.1:${plane.healthPort}/readyz`)).status;
    } catch {
      return 0; // not listening yet
    }
  };
  const waitReady = (plane: ControlPlane): Promise<true> =>
    pollUntil(
      `${plane.identity} /readyz`,
      async () => {
        if (!isAlive(plane.child.pid ?? 0))
          throw new Error(`${plane.identity} exited:\n${plane.logs.join('')}`);
        return (await readyz(plane)) === 200 ? true : undefined;
      },
      { timeoutMs: 60_000, intervalMs: 200 },
    );
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
        .readNamespacedLease({ namespace: ns.name, name: `conv-${uid}` })
    ).spec?.holderIdentity;

  beforeAll(async () => {
    admin = await kubeConfig();
    const cluster = await sharedCluster();
    execFileSync(join(defaultBinDir, 'kubectl'), [
      `--kubeconfig=${cluster.kubeconfigPath}`,
      'apply',
      '--server-side',
      '-k',
      join(repoRoot, 'config'),
    ]);
    operatorKubeconfig = await cluster.mintUser(serviceAccountUser, [
      'system:serviceaccounts',
      'system:serviceaccounts:polychrome-system',
    ]);
    ns = await freshNamespace(admin, 'cpproc');
    await ensureRuntimeClass(admin);
    dir = await mkdtemp(join(tmpdir(), 'cp-process-'));
    certs = await ensureDevCerts(join(dir, 'pki'));
    statePort = await freePort();
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
    for (const plane of planes) if (isAlive(plane.child.pid ?? 0)) plane.child.kill('SIGKILL');
    await Promise.all(planes.map((p) => p.exited));
    state?.child.kill('SIGKILL');
    if (state !== undefined) await state.exited;
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
      async () => ((await readyz(a)) === 503 ? true : undefined),
      {
        timeoutMs: 60_000,
        intervalMs: 200,
      },
    );
    state = await startStateProcess(certs, join(dir, 'state-data'), {
      STATE_PORT: String(statePort),
    });
    await waitReady(a);
    expect(a.logs.join('')).toMatch(/state plane link up/);
  });

  it('shares conversations with a second replica, one lease holder each', async () => {
    const b = await startControlPlane('cp-b');
    await waitReady(b);
    const names = ['p1', 'p2', 'p3', 'p4'];
    const uids = await Promise.all(names.map((n) => createConversation(n)));
    for (const name of names) await waitConversationReady(name);
    for (const uid of uids) expect(['cp-a', 'cp-b']).toContain(await holderOf(uid));
  });

  it('takes over a SIGKILLed replica’s leases after they expire, and releases on SIGTERM', async () => {
    const uid = await createConversation('p5');
    await waitConversationReady('p5');
    const holderName = await holderOf(uid);
    const holder = planes.find((p) => p.identity === holderName);
    const survivor = planes.find((p) => p.identity !== holderName && isAlive(p.child.pid ?? 0));
    if (holder === undefined || survivor === undefined)
      throw new Error(`no live replica besides ${String(holderName)}`);
    holder.child.kill('SIGKILL');
    expect(await holder.exited).toBe('SIGKILL');
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

    survivor.child.kill('SIGTERM');
    expect(await survivor.exited).toBe(0);
    // Released, so another replica need not wait for expiry.
    expect(await holderOf(uid)).toBe('');
  });
});
