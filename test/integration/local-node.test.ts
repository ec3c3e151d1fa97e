import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import {
  ApiException,
  AuthenticationV1Api,
  CoordinationV1Api,
  CoreV1Api,
  CustomObjectsApi,
  type KubeConfig,
  type V1Container,
  type V1Pod,
} from '@kubernetes/client-node';
import { randomBytes, randomUUID } from 'node:crypto';
import { spawn } from 'node:child_process';
import {
  existsSync,
  mkdirSync,
  openSync,
  readdirSync,
  readFileSync,
  statSync,
  utimesSync,
  writeFileSync,
} from 'node:fs';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { localCommandAnnotation } from '../../hack/lib/local-node-pod';
import { LocalNode } from '../../hack/lib/local-node';
import { repoRoot } from '../../hack/lib/paths';
import { isAlive, pollUntil } from '../../hack/lib/processes';
import {
  createSandboxClaim,
  createSandboxPool,
  ensureRuntimeClass,
  sandboxCore,
  sandboxExtensions,
} from './support/sandbox';
import { field, freshNamespace, kubeConfig, sharedCluster } from './support/kube';

// The local node against the shared control plane: each node here has a name of its own
// and binds only pods of its own namespace, so other test files (whose pods must stay
// Pending, e.g. agent-sandbox.test.ts) never see it.

const ext = sandboxExtensions;
const agents = sandboxCore;

// Answers `/` with values from its env, fails readiness twice before passing, and counts
// the probes it saw on `/hits`.
const server = `
const http = require('http');
let probes = 0;
process.on('SIGTERM', () => { console.log('got SIGTERM'); process.exit(0); });
http.createServer((req, res) => {
  if (req.url === '/ready') { probes++; res.statusCode = probes >= 3 ? 200 : 503; return res.end(); }
  if (req.url === '/hits') return res.end(String(probes));
  res.end([process.env.GREETING, process.env.SUFFIX, process.env.POD_NAME, process.env.MAYBE ?? 'unset'].join(' '));
}).listen(8080, process.env.POD_IP, () => console.log('listening on ' + process.env.POD_IP));
`;

const node = (script: string): string => JSON.stringify([process.execPath, '-e', script]);

const readiness = {
  httpGet: { path: '/ready', port: 'http' },
  periodSeconds: 1,
  failureThreshold: 1,
} as const;

function podRef(pod: V1Pod): { namespace: string; name: string; uid: string } {
  const { namespace, name, uid } = pod.metadata ?? {};
  if (namespace === undefined || name === undefined || uid === undefined) {
    throw new Error('the API server returned a pod without namespace, name or uid');
  }
  return { namespace, name, uid };
}

function podBody(
  name: string,
  opts: {
    command?: string;
    container?: Partial<V1Container>;
    spec?: Partial<NonNullable<V1Pod['spec']>>;
  } = {},
): V1Pod {
  return {
    metadata: {
      name,
      ...(opts.command !== undefined
        ? { annotations: { [localCommandAnnotation]: opts.command } }
        : {}),
    },
    spec: {
      containers: [{ name: 'main', image: 'polychrome/test:dev', ...opts.container }],
      ...opts.spec,
    },
  };
}

describe('local node', () => {
  let kc: KubeConfig;
  let core: CoreV1Api;
  let ns: { name: string; dispose: () => Promise<void> };
  let stateDir: string;
  let local: LocalNode;
  const nodeName = `local-node-it-${randomBytes(3).toString('hex')}`;

  const readPod = (name: string, namespace = ns.name): Promise<V1Pod> =>
    core.readNamespacedPod({ name, namespace });

  const gone = (name: string): Promise<true> =>
    pollUntil(
      `pod ${name} to disappear`,
      async () => {
        try {
          await readPod(name);
          return undefined;
        } catch (err: unknown) {
          if (err instanceof ApiException && err.code === 404) return true;
          throw err;
        }
      },
      { timeoutMs: 30_000 },
    );

  const waitForPod = (
    what: string,
    name: string,
    check: (pod: V1Pod) => boolean,
    namespace = ns.name,
  ): Promise<V1Pod> =>
    pollUntil(
      `pod ${name} ${what}`,
      async () => {
        const pod = await readPod(name, namespace);
        return check(pod) ? pod : undefined;
      },
      { timeoutMs: 30_000, intervalMs: 100 },
    );

  const isReady = (pod: V1Pod): boolean =>
    pod.status?.conditions?.find((c) => c.type === 'Ready')?.status === 'True';

  // The second octet of a node's loopback block (its spec.podCIDR 127.k.0.0/16).
  const podPrefixOf = async (name: string): Promise<string> => {
    const cidr = (await core.readNode({ name })).spec?.podCIDR ?? '';
    const match = /^(127\.\d{1,3}\.)0\.0\/16$/.exec(cidr);
    if (match?.[1] === undefined) throw new Error(`node ${name} has podCIDR '${cidr}'`);
    return match[1];
  };
  const inBlock = (ip: string | undefined, prefix: string): boolean =>
    ip !== undefined && ip.startsWith(prefix) && /^127(\.\d{1,3}){3}$/.test(ip);

  const pidOf = (pod: V1Pod): number => {
    const id = pod.status?.containerStatuses?.[0]?.containerID ?? '';
    const match = /^local:\/\/(\d+)$/.exec(id);
    if (match === null) throw new Error(`containerID ${id} is not local://<pid>`);
    return Number(match[1]);
  };

  beforeAll(async () => {
    kc = await kubeConfig();
    core = kc.makeApiClient(CoreV1Api);
    ns = await freshNamespace(kc, 'local-node');
    stateDir = await mkdtemp(join(tmpdir(), 'polychrome-local-node-'));
    local = new LocalNode({
      kubeConfig: kc,
      name: nodeName,
      stateDir,
      namespaces: [ns.name],
      backoff: { initialMs: 200, maxMs: 1000 },
      maxGracePeriodSeconds: 5,
      leaseRenewIntervalMs: 300,
    });
    await local.start();
  });

  afterAll(async () => {
    await local.close();
    await ns.dispose();
    await rm(stateDir, { recursive: true, force: true });
  });

  it('registers a Ready node and keeps renewing its lease', async () => {
    const registered = await core.readNode({ name: nodeName });
    const ready = registered.status?.conditions?.find((c) => c.type === 'Ready');
    expect(ready?.status).toBe('True');
    expect(ready?.reason).toBe('KubeletReady');
    expect(registered.metadata?.labels?.['kubernetes.io/hostname']).toBe(nodeName);
    expect(registered.status?.addresses).toContainEqual({
      type: 'InternalIP',
      address: '127.0.0.1',
    });
    expect(Number(registered.status?.allocatable?.pods)).toBeGreaterThan(0);
    expect(registered.spec?.podCIDR).toMatch(/^127\.\d{1,3}\.0\.0\/16$/);
    expect(registered.spec?.podCIDRs).toEqual([registered.spec?.podCIDR]);

    const leases = kc.makeApiClient(CoordinationV1Api);
    const renewTime = async (): Promise<number> => {
      const lease = await leases.readNamespacedLease({
        name: nodeName,
        namespace: 'kube-node-lease',
      });
      return new Date(String(lease.spec?.renewTime)).getTime();
    };
    const first = await renewTime();
    expect(Number.isNaN(first)).toBe(false);
    await pollUntil('the lease to be renewed', async () =>
      (await renewTime()) > first ? true : undefined,
    );
  });

  it('runs a pod on its own loopback address with env from a Secret, a ConfigMap and the pod', async () => {
    await core.createNamespacedSecret({
      namespace: ns.name,
      body: { metadata: { name: 'greeting' }, stringData: { greeting: 'hello from a secret' } },
    });
    await core.createNamespacedConfigMap({
      namespace: ns.name,
      body: { metadata: { name: 'extra' }, data: { SUFFIX: 'and a configmap' } },
    });
    await core.createNamespacedPod({
      namespace: ns.name,
      body: podBody('web', {
        command: node(server),
        container: {
          ports: [{ name: 'http', containerPort: 8080 }],
          readinessProbe: readiness,
          envFrom: [{ configMapRef: { name: 'extra' } }],
          env: [
            {
              name: 'GREETING',
              valueFrom: { secretKeyRef: { name: 'greeting', key: 'greeting' } },
            },
            { name: 'POD_NAME', valueFrom: { fieldRef: { fieldPath: 'metadata.name' } } },
            {
              name: 'MAYBE',
              valueFrom: { configMapKeyRef: { name: 'absent', key: 'x', optional: true } },
            },
          ],
        },
      }),
    });

    const pod = await waitForPod('to be Ready', 'web', isReady);
    expect(pod.spec?.nodeName).toBe(nodeName);
    expect(pod.status?.phase).toBe('Running');
    const podIP = pod.status?.podIP ?? '';
    expect(inBlock(podIP, await podPrefixOf(nodeName))).toBe(true);
    expect(podIP).not.toMatch(/^127\.\d+\.0\./);
    expect(pod.status?.podIPs).toEqual([{ ip: podIP }]);
    expect(pod.status?.hostIP).toBe('127.0.0.1');
    expect(pod.status?.startTime).toBeDefined();
    const types = (pod.status?.conditions ?? []).map((c) => `${c.type}=${c.status}`);
    expect(types).toEqual(
      expect.arrayContaining([
        'PodScheduled=True',
        'Initialized=True',
        'ContainersReady=True',
        'Ready=True',
      ]),
    );
    const status = pod.status?.containerStatuses?.[0];
    expect(status?.ready).toBe(true);
    expect(status?.started).toBe(true);
    expect(status?.restartCount).toBe(0);
    expect(status?.image).toBe('polychrome/test:dev');
    expect(status?.state?.running?.startedAt).toBeDefined();
    expect(isAlive(pidOf(pod))).toBe(true);
    expect(local.pidOf(podRef(pod).uid, 'main')).toBe(pidOf(pod));

    const answer = await (await fetch(`http://${podIP}:8080/`)).text();
    expect(answer).toBe('hello from a secret and a configmap web unset');
    // Ready came from the probe: the server fails it twice before it passes.
    const probes = Number(await (await fetch(`http://${podIP}:8080/hits`)).text());
    expect(probes).toBeGreaterThanOrEqual(3);
    const log = await readFile(local.logPath(podRef(pod), 'main'), 'utf8');
    expect(log).toContain(`listening on ${podIP}`);
  });

  it('gives two pods the same port on different addresses', async () => {
    const echo = node(
      "require('http').createServer((q, s) => s.end(process.env.HOSTNAME)).listen(8080, process.env.POD_IP)",
    );
    for (const name of ['twin-a', 'twin-b']) {
      await core.createNamespacedPod({
        namespace: ns.name,
        body: podBody(name, {
          command: echo,
          container: {
            ports: [{ name: 'http', containerPort: 8080 }],
            readinessProbe: { ...readiness, httpGet: { path: '/', port: 8080 } },
          },
        }),
      });
    }
    const a = await waitForPod('to be Ready', 'twin-a', isReady);
    const b = await waitForPod('to be Ready', 'twin-b', isReady);
    expect(a.status?.podIP).not.toBe(b.status?.podIP);
    expect(await (await fetch(`http://${a.status?.podIP}:8080/`)).text()).toBe('twin-a');
    expect(await (await fetch(`http://${b.status?.podIP}:8080/`)).text()).toBe('twin-b');
  });

  it('holds a container with a missing Secret in CreateContainerConfigError until the Secret exists', async () => {
    await core.createNamespacedPod({
      namespace: ns.name,
      body: podBody('needs-secret', {
        command: node('setInterval(() => {}, 1000)'),
        container: {
          env: [{ name: 'TOKEN', valueFrom: { secretKeyRef: { name: 'later', key: 'token' } } }],
        },
      }),
    });
    const waiting = await waitForPod(
      'to wait for its Secret',
      'needs-secret',
      (p) =>
        p.status?.containerStatuses?.[0]?.state?.waiting?.reason === 'CreateContainerConfigError',
    );
    expect(waiting.status?.phase).toBe('Pending');
    expect(waiting.status?.containerStatuses?.[0]?.state?.waiting?.message).toBe(
      'secret "later" not found',
    );
    expect(waiting.status?.conditions?.find((c) => c.type === 'Ready')?.status).toBe('False');

    await core.createNamespacedSecret({
      namespace: ns.name,
      body: { metadata: { name: 'later' }, stringData: { token: 't' } },
    });
    const running = await waitForPod('to start once the Secret exists', 'needs-secret', isReady);
    expect(running.status?.phase).toBe('Running');
  });

  it('restarts a crashing container with back-off and counts the restarts', async () => {
    await core.createNamespacedPod({
      namespace: ns.name,
      body: podBody('crasher', { command: node('process.exit(3)') }),
    });
    const pod = await waitForPod(
      'to be restarted twice and back off again',
      'crasher',
      (p) =>
        (p.status?.containerStatuses?.[0]?.restartCount ?? 0) >= 2 &&
        p.status?.containerStatuses?.[0]?.state?.waiting?.reason === 'CrashLoopBackOff',
    );
    const status = pod.status?.containerStatuses?.[0];
    expect(pod.status?.phase).toBe('Running');
    expect(status?.lastState?.terminated?.exitCode).toBe(3);
    expect(status?.lastState?.terminated?.reason).toBe('Error');
    expect(status?.ready).toBe(false);
    expect(status?.state?.waiting?.message).toContain('restarting failed container=main');
  });

  it('ends a pod with restartPolicy Never as Failed or Succeeded by its exit code', async () => {
    await core.createNamespacedPod({
      namespace: ns.name,
      body: podBody('fails-once', {
        command: node('process.exit(3)'),
        spec: { restartPolicy: 'Never' },
      }),
    });
    await core.createNamespacedPod({
      namespace: ns.name,
      body: podBody('succeeds', { command: node('0'), spec: { restartPolicy: 'Never' } }),
    });
    const failed = await waitForPod('to fail', 'fails-once', (p) => p.status?.phase === 'Failed');
    const terminated = failed.status?.containerStatuses?.[0]?.state?.terminated;
    expect(terminated?.exitCode).toBe(3);
    expect(terminated?.reason).toBe('Error');
    expect(failed.status?.containerStatuses?.[0]?.restartCount).toBe(0);
    const succeeded = await waitForPod(
      'to succeed',
      'succeeds',
      (p) => p.status?.phase === 'Succeeded',
    );
    expect(succeeded.status?.containerStatuses?.[0]?.state?.terminated?.reason).toBe('Completed');
    expect(succeeded.status?.conditions?.find((c) => c.type === 'Ready')?.reason).toBe(
      'PodCompleted',
    );
  });

  it('stops the process when the pod is deleted, then removes the pod', async () => {
    await core.createNamespacedPod({
      namespace: ns.name,
      body: podBody('doomed', {
        command: node(server),
        container: { ports: [{ name: 'http', containerPort: 8080 }], readinessProbe: readiness },
      }),
    });
    // Ignores SIGTERM: the node must SIGKILL it once the grace period ends.
    await core.createNamespacedPod({
      namespace: ns.name,
      body: podBody('stubborn', {
        command: node(
          "process.on('SIGTERM', () => console.log('ignoring SIGTERM')); setInterval(() => {}, 1000)",
        ),
        spec: { terminationGracePeriodSeconds: 1 },
      }),
    });
    const doomed = await waitForPod('to be Ready', 'doomed', isReady);
    const stubborn = await waitForPod('to run', 'stubborn', (p) => p.status?.phase === 'Running');
    const pids = [pidOf(doomed), pidOf(stubborn)];
    expect(pids.every(isAlive)).toBe(true);

    await core.deleteNamespacedPod({ name: 'doomed', namespace: ns.name });
    await core.deleteNamespacedPod({ name: 'stubborn', namespace: ns.name });
    for (const name of ['doomed', 'stubborn']) await gone(name);
    expect(pids.map(isAlive)).toEqual([false, false]);
    const doomedLog = await readFile(local.logPath(podRef(doomed), 'main'), 'utf8');
    expect(doomedLog).toContain('got SIGTERM');
    const stubbornLog = await readFile(local.logPath(podRef(stubborn), 'main'), 'utf8');
    expect(stubbornLog).toContain('ignoring SIGTERM');
  });

  it('runs the pod of an agent-sandbox SandboxClaim until the Sandbox is Ready', async () => {
    await ensureRuntimeClass(kc);
    const objects = kc.makeApiClient(CustomObjectsApi);
    const namespace = ns.name;
    await createSandboxPool(kc, {
      namespace,
      template: 'harness',
      pool: 'harness-pool',
      podTemplate: {
        metadata: { annotations: { [localCommandAnnotation]: node(server) } },
        spec: {
          runtimeClassName: 'gvisor',
          automountServiceAccountToken: false,
          containers: [
            {
              name: 'harness',
              image: 'polychrome/harness:dev',
              ports: [{ name: 'http', containerPort: 8080 }],
              readinessProbe: readiness,
              env: [
                { name: 'GREETING', value: 'sandboxed' },
                { name: 'SUFFIX', value: 'pod' },
                { name: 'POD_NAME', valueFrom: { fieldRef: { fieldPath: 'metadata.name' } } },
              ],
            },
          ],
        },
      },
    });
    await createSandboxClaim(kc, namespace, 'conv-a', 'harness-pool');

    const readyOf = (obj: unknown): unknown => {
      const conditions = field(obj, 'status', 'conditions');
      return Array.isArray(conditions)
        ? field(
            conditions.find((c) => field(c, 'type') === 'Ready'),
            'status',
          )
        : undefined;
    };
    const sandboxName = await pollUntil(
      'the claim to name its sandbox',
      async () => {
        const claim: unknown = await objects.getNamespacedCustomObject({
          ...ext,
          namespace,
          plural: 'sandboxclaims',
          name: 'conv-a',
        });
        const name = field(claim, 'status', 'sandbox', 'name');
        return typeof name === 'string' && name !== '' ? name : undefined;
      },
      { timeoutMs: 30_000, intervalMs: 250 },
    );
    const sandbox = await pollUntil(
      `sandbox ${sandboxName} to be Ready`,
      async () => {
        const current: unknown = await objects.getNamespacedCustomObject({
          ...agents,
          namespace,
          plural: 'sandboxes',
          name: sandboxName,
        });
        return readyOf(current) === 'True' ? current : undefined;
      },
      { timeoutMs: 45_000, intervalMs: 250 },
    );
    const annotated = field(sandbox, 'metadata', 'annotations', 'agents.x-k8s.io/pod-name');
    const podName = typeof annotated === 'string' && annotated !== '' ? annotated : sandboxName;
    const pod = await readPod(podName);
    expect(pod.spec?.nodeName).toBe(nodeName);
    expect(pod.status?.phase).toBe('Running');
    expect(isReady(pod)).toBe(true);
    expect(pod.metadata?.ownerReferences?.map((o) => o.kind)).toContain('Sandbox');
    const podIP = pod.status?.podIP ?? '';
    expect(inBlock(podIP, await podPrefixOf(nodeName))).toBe(true);
    expect(await (await fetch(`http://${podIP}:8080/`)).text()).toBe(
      `sandboxed pod ${podName} unset`,
    );
    const claimReady = await pollUntil(
      'the claim to forward Ready',
      async () => {
        const claim: unknown = await objects.getNamespacedCustomObject({
          ...ext,
          namespace,
          plural: 'sandboxclaims',
          name: 'conv-a',
        });
        return readyOf(claim) === 'True' ? claim : undefined;
      },
      { timeoutMs: 30_000, intervalMs: 250 },
    );
    expect(field(claimReady, 'status', 'sandbox', 'name')).toBe(sandboxName);
  });

  describe('volumes', () => {
    const pvName = `${nodeName}-journal`;
    let pvDir: string;

    // Reads its volumes through their host paths (the pod directory is
    // <stateDir>/pods/<namespace>_<name>_<uid>/volumes, the claim is at argv[2]), then
    // answers what it saw as JSON. Its first run counts itself in the emptyDir and
    // exits, so the second run proves the emptyDir outlived the restart; each run past
    // that appends the pod's uid to the claim's history.
    const reader = `
const fs = require('fs'), path = require('path'), http = require('http');
const [stateDir, claimDir] = process.argv.slice(1);
const { POD_NAMESPACE: ns, POD_NAME: name, POD_UID: uid } = process.env;
const vol = path.join(stateDir, 'pods', ns + '_' + name + '_' + uid, 'volumes');
const read = (p) => fs.readFileSync(path.join(vol, p), 'utf8');
const mode = (p) => (fs.statSync(path.join(vol, p)).mode & 0o777).toString(8);
const runs = path.join(vol, 'scratch', 'runs');
const count = (fs.existsSync(runs) ? Number(fs.readFileSync(runs, 'utf8')) : 0) + 1;
fs.writeFileSync(runs, String(count));
if (count === 1) process.exit(1);
const historyFile = path.join(claimDir, 'history');
const history = fs.existsSync(historyFile) ? fs.readFileSync(historyFile, 'utf8') : '';
fs.appendFileSync(historyFile, uid + '\\n');
const seen = {
  password: read('creds/password'), passwordMode: mode('creds/password'),
  item: read('config/conf/a.txt'), itemMode: mode('config/conf/a.txt'),
  configEntries: fs.readdirSync(path.join(vol, 'config')).filter((e) => !e.startsWith('..')),
  token: read('kube-api-access/token'), ca: read('kube-api-access/ca.crt'),
  namespace: read('kube-api-access/namespace'), runs: count, history,
};
http.createServer((q, s) => s.end(JSON.stringify(seen))).listen(8080, process.env.POD_IP);
`;

    interface Seen {
      password: string;
      passwordMode: string;
      item: string;
      itemMode: string;
      configEntries: string[];
      token: string;
      ca: string;
      namespace: string;
      runs: number;
      history: string;
    }

    const downward = ['POD_NAMESPACE', 'POD_NAME', 'POD_UID'].map((env, i) => ({
      name: env,
      valueFrom: {
        fieldRef: { fieldPath: ['metadata.namespace', 'metadata.name', 'metadata.uid'][i] ?? '' },
      },
    }));

    // What the ServiceAccount admission plugin injects for automountServiceAccountToken;
    // the local control plane runs without that plugin, so the pod names it itself.
    const kubeApiAccess = {
      name: 'kube-api-access',
      projected: {
        defaultMode: 0o644,
        sources: [
          { serviceAccountToken: { path: 'token', expirationSeconds: 3607 } },
          { configMap: { name: 'kube-root-ca.crt', items: [{ key: 'ca.crt', path: 'ca.crt' }] } },
          {
            downwardAPI: {
              items: [{ path: 'namespace', fieldRef: { fieldPath: 'metadata.namespace' } }],
            },
          },
        ],
      },
    };

    const readerPod = (name: string): V1Pod =>
      podBody(name, {
        command: JSON.stringify([process.execPath, '-e', reader, stateDir, pvDir]),
        container: {
          env: downward,
          // Ready once it serves: starting is not serving, and the first run exits on purpose.
          readinessProbe: { ...readiness, httpGet: { path: '/', port: 8080 } },
          volumeMounts: [
            { name: 'creds', mountPath: '/etc/creds', readOnly: true },
            { name: 'config', mountPath: '/etc/config' },
            { name: 'scratch', mountPath: '/tmp' },
            {
              name: 'kube-api-access',
              mountPath: '/var/run/secrets/kubernetes.io/serviceaccount',
              readOnly: true,
            },
            { name: 'journal', mountPath: '/var/lib/journal' },
          ],
        },
        spec: {
          serviceAccountName: 'vol-robot',
          automountServiceAccountToken: true,
          volumes: [
            { name: 'creds', secret: { secretName: 'vol-creds', defaultMode: 0o440 } },
            {
              name: 'config',
              configMap: {
                name: 'vol-config',
                items: [{ key: 'a', path: 'conf/a.txt', mode: 0o600 }],
              },
            },
            { name: 'scratch', emptyDir: {} },
            kubeApiAccess,
            { name: 'journal', persistentVolumeClaim: { claimName: 'journal-0' } },
          ],
        },
      });

    const reviewToken = async (
      token: string,
    ): Promise<{ authenticated: boolean; username?: string; extra?: Record<string, string[]> }> => {
      const review = await kc.makeApiClient(AuthenticationV1Api).createTokenReview({
        body: { spec: { token } },
      });
      return {
        authenticated: review.status?.authenticated === true,
        ...(review.status?.user?.username !== undefined
          ? { username: review.status.user.username }
          : {}),
        ...(review.status?.user?.extra !== undefined ? { extra: review.status.user.extra } : {}),
      };
    };

    beforeAll(async () => {
      pvDir = join(stateDir, 'claims', 'journal');
      await core.createPersistentVolume({
        body: {
          metadata: { name: pvName },
          spec: {
            capacity: { storage: '1Gi' },
            accessModes: ['ReadWriteOnce'],
            persistentVolumeReclaimPolicy: 'Retain',
            storageClassName: '',
            hostPath: { path: pvDir },
          },
        },
      });
    });
    afterAll(async () => {
      await core.deletePersistentVolume({ name: pvName }).catch(() => undefined);
    });

    it('mounts a Secret, ConfigMap items, an emptyDir, a ServiceAccount token and a claim', async () => {
      await core.createNamespacedServiceAccount({
        namespace: ns.name,
        body: { metadata: { name: 'vol-robot' } },
      });
      await core.createNamespacedSecret({
        namespace: ns.name,
        body: { metadata: { name: 'vol-creds' }, stringData: { password: 'hunter2' } },
      });
      await core.createNamespacedConfigMap({
        namespace: ns.name,
        body: { metadata: { name: 'vol-config' }, data: { a: 'alpha', b: 'beta' } },
      });
      await core.createNamespacedPersistentVolumeClaim({
        namespace: ns.name,
        body: {
          metadata: { name: 'journal-0' },
          spec: {
            accessModes: ['ReadWriteOnce'],
            storageClassName: '',
            volumeName: pvName,
            resources: { requests: { storage: '1Gi' } },
          },
        },
      });
      await core.createNamespacedPod({ namespace: ns.name, body: readerPod('reader') });

      const pod = await waitForPod('to be Ready after one restart', 'reader', isReady);
      expect(pod.status?.containerStatuses?.[0]?.restartCount).toBe(1);
      const seen = (await (await fetch(`http://${pod.status?.podIP}:8080/`)).json()) as Seen;
      expect(seen.password).toBe('hunter2');
      expect(seen.passwordMode).toBe('440');
      expect(seen.item).toBe('alpha');
      expect(seen.itemMode).toBe('600');
      expect(seen.configEntries).toEqual(['conf']);
      // The emptyDir kept the first run's count across the restart.
      expect(seen.runs).toBe(2);
      expect(seen.namespace).toBe(ns.name);
      const rootCa = await core.readNamespacedConfigMap({
        name: 'kube-root-ca.crt',
        namespace: ns.name,
      });
      expect(seen.ca).toBe(rootCa.data?.['ca.crt']);
      expect(seen.history).toBe('');

      // A real TokenRequest token, for the pod's ServiceAccount and bound to the pod.
      const review = await reviewToken(seen.token);
      expect(review.authenticated).toBe(true);
      expect(review.username).toBe(`system:serviceaccount:${ns.name}:vol-robot`);
      expect(review.extra?.['authentication.kubernetes.io/pod-name']).toEqual(['reader']);
      expect(review.extra?.['authentication.kubernetes.io/pod-uid']).toEqual([pod.metadata?.uid]);

      const podDir = join(stateDir, 'pods', `${ns.name}_reader_${pod.metadata?.uid}`);
      expect(statSync(join(podDir, 'volumes', 'scratch')).isDirectory()).toBe(true);
      // Secrets and tokens below: no other user of this machine reads the pods directory.
      expect(statSync(join(stateDir, 'pods')).mode & 0o777).toBe(0o700);
      expect(readdirSync(pvDir)).toEqual(['history']);

      // Deleting the pod removes its volumes (not the claim's data), and its token dies with it.
      await core.deleteNamespacedPod({ name: 'reader', namespace: ns.name });
      await gone('reader');
      expect(existsSync(join(podDir, 'volumes'))).toBe(false);
      expect(await readFile(join(pvDir, 'history'), 'utf8')).toBe(`${pod.metadata?.uid}\n`);
      await pollUntil('the deleted pod’s token to be refused', async () =>
        (await reviewToken(seen.token)).authenticated ? undefined : true,
      );

      // The claim's data survives: the new pod of the same name reads the old one's line.
      await core.createNamespacedPod({ namespace: ns.name, body: readerPod('reader') });
      const again = await waitForPod(
        'to be Ready again',
        'reader',
        (p) => p.metadata?.uid !== pod.metadata?.uid && isReady(p),
      );
      const seenAgain = (await (await fetch(`http://${again.status?.podIP}:8080/`)).json()) as Seen;
      expect(seenAgain.history).toBe(`${pod.metadata?.uid}\n`);
      expect(seenAgain.runs).toBe(2);
      expect(seenAgain.token).not.toBe(seen.token);
    });

    it('holds a pod whose Secret volume is missing in ContainerCreating until the Secret exists', async () => {
      await core.createNamespacedPod({
        namespace: ns.name,
        body: podBody('needs-secret-volume', {
          command: node('setInterval(() => {}, 1000)'),
          container: { volumeMounts: [{ name: 'creds', mountPath: '/etc/creds' }] },
          spec: { volumes: [{ name: 'creds', secret: { secretName: 'vol-later' } }] },
        }),
      });
      const waiting = await waitForPod(
        'to wait for its Secret volume',
        'needs-secret-volume',
        (p) => p.status?.containerStatuses?.[0]?.state?.waiting?.message !== undefined,
      );
      const state = waiting.status?.containerStatuses?.[0]?.state?.waiting;
      expect(state?.reason).toBe('ContainerCreating');
      expect(state?.message).toBe(
        'MountVolume.SetUp failed for volume "creds" : secret "vol-later" not found',
      );
      expect(waiting.status?.phase).toBe('Pending');

      await core.createNamespacedSecret({
        namespace: ns.name,
        body: { metadata: { name: 'vol-later' }, stringData: { key: 'v' } },
      });
      const running = await waitForPod(
        'to start once the Secret exists',
        'needs-secret-volume',
        isReady,
      );
      const dir = join(stateDir, 'pods', `${ns.name}_needs-secret-volume_${running.metadata?.uid}`);
      expect(await readFile(join(dir, 'volumes', 'creds', 'key'), 'utf8')).toBe('v');
    });

    it('holds a pod with a volume type it does not support, saying which', async () => {
      await core.createNamespacedPod({
        namespace: ns.name,
        body: podBody('host-path', {
          command: node('setInterval(() => {}, 1000)'),
          spec: { volumes: [{ name: 'etc', hostPath: { path: '/etc' } }] },
        }),
      });
      const waiting = await waitForPod(
        'to wait',
        'host-path',
        (p) => p.status?.containerStatuses?.[0]?.state?.waiting?.message !== undefined,
      );
      expect(waiting.status?.containerStatuses?.[0]?.state?.waiting).toEqual({
        reason: 'ContainerCreating',
        message: 'the local node does not support volume type hostPath (volume etc)',
      });
    });
  });

  describe('scope and simulate mode', () => {
    let other: { name: string; dispose: () => Promise<void> };
    let simulated: LocalNode | undefined;
    const simName = `${nodeName}-sim`;

    beforeAll(async () => {
      other = await freshNamespace(kc, 'local-node-sim');
    });
    afterAll(async () => {
      await simulated?.close();
      await other.dispose();
    });

    it('binds only pods in its namespaces whose nodeSelector it matches', async () => {
      await core.createNamespacedPod({
        namespace: other.name,
        body: podBody('elsewhere', { container: { image: 'polychrome/harness:dev' } }),
      });
      await core.createNamespacedPod({
        namespace: ns.name,
        body: podBody('other-node', {
          command: node('setInterval(() => {}, 1000)'),
          spec: { nodeSelector: { 'kubernetes.io/hostname': 'some-other-node' } },
        }),
      });
      await core.createNamespacedPod({
        namespace: ns.name,
        body: podBody('selected', {
          command: node('setInterval(() => {}, 1000)'),
          spec: { nodeSelector: { 'kubernetes.io/hostname': nodeName } },
        }),
      });
      // Pods are handled in the order their events arrive: once the last one ran, the
      // node has seen the others and left them alone.
      await waitForPod('to run', 'selected', (p) => p.status?.phase === 'Running');
      expect((await readPod('other-node')).spec?.nodeName ?? '').toBe('');
      expect((await readPod('elsewhere', other.name)).spec?.nodeName ?? '').toBe('');
    });

    it('marks pods Running and Ready without starting a process in simulate mode', async () => {
      simulated = new LocalNode({
        kubeConfig: kc,
        name: simName,
        stateDir,
        namespaces: [other.name],
        simulate: true,
      });
      await simulated.start();
      const pod = await waitForPod('to be Ready', 'elsewhere', isReady, other.name);
      expect(pod.spec?.nodeName).toBe(simName);
      expect(pod.status?.phase).toBe('Running');
      const prefix = await podPrefixOf(simName);
      expect(inBlock(pod.status?.podIP, prefix)).toBe(true);
      // Each node has a block of its own, so no two nodes hand out one address.
      expect(prefix).not.toBe(await podPrefixOf(nodeName));
      const status = pod.status?.containerStatuses?.[0];
      expect(status?.containerID).toBe(`simulated://${pod.metadata?.uid}/main`);
      expect(status?.state?.running).toBeDefined();
      expect(simulated.pidOf(podRef(pod).uid, 'main')).toBeUndefined();
      expect(existsSync(simulated.logPath(podRef(pod), 'main'))).toBe(false);
    });
  });

  it('runs as a CLI until SIGTERM, then stops its pods within their grace and reports them stopped', async () => {
    const cliNs = await freshNamespace(kc, 'local-node-cli');
    const cliName = `${nodeName}-cli`;
    let cliPid: number | undefined;
    try {
      const kubeconfigPath = (await sharedCluster()).kubeconfigPath;
      // What a pod deleted while its node was down leaves: the node removes its volumes
      // (a Secret's files) when it starts, and keeps its logs.
      const orphan = join(stateDir, 'cli', 'pods', `${cliNs.name}_ghost_${randomUUID()}`);
      mkdirSync(join(orphan, 'volumes', 'creds'), { recursive: true });
      writeFileSync(join(orphan, 'volumes', 'creds', 'password'), 'hunter2');
      writeFileSync(join(orphan, 'app.log'), 'last words\n');
      const past = new Date(Date.now() - 60_000);
      utimesSync(orphan, past, past);
      const out = openSync(join(stateDir, 'cli.log'), 'a');
      const cli = spawn(
        process.execPath,
        [
          '--import',
          'tsx',
          join('hack', 'local-node.ts'),
          '--kubeconfig',
          kubeconfigPath,
          '--name',
          cliName,
          '--namespace',
          cliNs.name,
          '--state-dir',
          join(stateDir, 'cli'),
          '--shutdown-grace',
          '12',
        ],
        { cwd: repoRoot, stdio: ['ignore', out, out] },
      );
      cliPid = cli.pid;
      const exited = new Promise<number | null>((resolve) => cli.once('exit', resolve));
      await core.createNamespacedPod({
        namespace: cliNs.name,
        body: podBody('served', {
          command: node(server),
          container: {
            ports: [{ name: 'http', containerPort: 8080 }],
            readinessProbe: readiness,
            env: [{ name: 'POD_NAME', valueFrom: { fieldRef: { fieldPath: 'metadata.name' } } }],
          },
        }),
      });
      // Takes 6 s to stop, more than the default shutdown grace (5 s), less than its own.
      await core.createNamespacedPod({
        namespace: cliNs.name,
        body: podBody('slow-stop', {
          command: node(
            "process.on('SIGTERM', () => setTimeout(() => process.exit(0), 6000)); " +
              "require('http').createServer((q, s) => s.end('ok')).listen(8080)",
          ),
          container: { ports: [{ name: 'http', containerPort: 8080 }], readinessProbe: readiness },
          spec: { terminationGracePeriodSeconds: 20 },
        }),
      });
      const pod = await waitForPod('to be Ready', 'served', isReady, cliNs.name);
      await waitForPod('to be Ready', 'slow-stop', isReady, cliNs.name);
      expect(existsSync(join(orphan, 'volumes'))).toBe(false);
      expect(readFileSync(join(orphan, 'app.log'), 'utf8')).toBe('last words\n');
      // A running pod's own directory is not an orphan.
      expect(
        existsSync(join(stateDir, 'cli', 'pods', `${cliNs.name}_served_${pod.metadata?.uid}`)),
      ).toBe(true);
      expect(pod.spec?.nodeName).toBe(cliName);
      const pid = pidOf(pod);
      expect(isAlive(pid)).toBe(true);
      expect(inBlock(pod.status?.podIP, await podPrefixOf(cliName))).toBe(true);
      expect(await podPrefixOf(cliName)).not.toBe(await podPrefixOf(nodeName));
      expect(await (await fetch(`http://${pod.status?.podIP}:8080/`)).text()).toMatch(/ served /);

      cli.kill('SIGTERM');
      expect(await exited).toBe(0);
      expect(isAlive(pid)).toBe(false);
      const stopped = await readPod('served', cliNs.name);
      expect(stopped.status?.containerStatuses?.[0]?.state?.terminated?.exitCode).toBe(0);
      expect(isReady(stopped)).toBe(false);
      // Not SIGKILLed (137): the node waited out the pod's own stop, within --shutdown-grace.
      const slow = await readPod('slow-stop', cliNs.name);
      expect(slow.status?.containerStatuses?.[0]?.state?.terminated?.exitCode).toBe(0);
      const cliNode = await core.readNode({ name: cliName });
      expect(cliNode.status?.conditions?.find((c) => c.type === 'Ready')?.status).toBe('False');
    } finally {
      // A failed assertion must not leave the CLI (and its pods) running.
      if (cliPid !== undefined && isAlive(cliPid)) process.kill(cliPid, 'SIGTERM');
      await cliNs.dispose();
    }
  });
});
