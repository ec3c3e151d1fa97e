import { ONBOARDING_LABEL } from '../../operator/api/v1alpha1/conversation-values';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import {
  ApiregistrationV1Api,
  AppsV1Api,
  CoreV1Api,
  CustomObjectsApi,
  KubeConfig,
  type V1Pod,
  type V1Secret,
} from '@kubernetes/client-node';
import { execFile } from 'node:child_process';
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { headCommit } from '../../hack/build-info';
import { defaultBinDir, repoRoot } from '../../hack/lib/paths';
import { pollUntil } from '../../hack/lib/processes';
import { DEFAULT_CONVERSATION_NAMESPACE } from '../../operator/config';
import { CredentialSecret } from '../../operator/onboarding/catalog';
import { PROVISIONED_LABEL, SECRET_NAMES } from '../../operator/provision/catalog';
import {
  ALL_ONBOARDED,
  dataKeyOwners,
  onboardedObjects,
  podProcess,
  secretManagers,
} from './support/dev-install';

// `make dev` itself, in a directory of its own (POLYCHROME_DEV_DIR): its own local control
// plane and node, config/conversations and hack/dev/base applied as a cluster would sync
// them, and the Conversation hello. It needs 127.0.0.1:8080, 7443 and 8444 free (a running
// `make dev` holds them: stop it first). Checked here: no object stays unready; the install
// holds no Secret the provisioner or onboarding did not make, but for the door's (cert-manager's
// part) and the model settings make dev adds to the onboarded Secret; a turn is answered; a
// SIGKILLed state plane is restarted by Kubernetes and nothing committed is lost; `down` then
// `up` keeps the cluster, journals, records and keys, and drops a model setting no longer in
// the environment; removing the namespace's label removes what onboarding installed; `reset`
// deletes it all.

const run = promisify(execFile);
const API = 'http://127.0.0.1:8080';
let dir: string;

/**
 * The model setting the first `up` runs with: an endpoint only, no key, so the harness still
 * runs the scripted model, and the setting's way into the harnesses shows in their variables.
 */
const MODEL_ENV = { ANTHROPIC_BASE_URL: 'http://127.0.0.1:9/dev-stack' };

async function dev(
  command: 'up' | 'down' | 'reset',
  extraEnv: Record<string, string> = {},
): Promise<string> {
  const { stdout, stderr } = await run(
    process.execPath,
    ['--import', 'tsx', join(repoRoot, 'hack', 'dev.ts'), command],
    {
      cwd: repoRoot,
      env: {
        PATH: process.env.PATH ?? '',
        HOME: process.env.HOME ?? '',
        POLYCHROME_DEV_DIR: dir,
        ...extraEnv,
      },
      timeout: 600_000,
      maxBuffer: 16 * 1024 * 1024,
    },
  ).catch((err: unknown) => {
    const logs = existsSync(join(dir, 'dev', 'local-node.log'))
      ? readFileSync(join(dir, 'dev', 'local-node.log'), 'utf8').slice(-4000)
      : '';
    throw new Error(`dev.ts ${command} failed: ${String(err)}\nlocal node log:\n${logs}`);
  });
  return stdout + stderr;
}

function kube(): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromFile(join(dir, 'cluster', 'kubeconfig'));
  return kc;
}

/** What {@link unready} still finds after waiting up to `timeoutMs` for it to be nothing. */
async function unreadyAfter(kc: KubeConfig, timeoutMs: number): Promise<string[]> {
  let problems: string[] = ['not read yet'];
  await pollUntil(
    'every object to be ready',
    async () => {
      problems = await unready(kc).catch((err: unknown) => [`could not read: ${String(err)}`]);
      return problems.length === 0 ? true : undefined;
    },
    { timeoutMs, intervalMs: 1_000 },
  ).catch(() => undefined);
  return problems;
}

const ready = (pod: V1Pod): boolean =>
  pod.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') === true;

/** Every object `make dev` makes that has a readiness, and what is not ready about it. */
async function unready(kc: KubeConfig): Promise<string[]> {
  const core = kc.makeApiClient(CoreV1Api);
  const apps = kc.makeApiClient(AppsV1Api);
  const problems: string[] = [];
  for (const pod of (await core.listPodForAllNamespaces()).items) {
    if (pod.status?.phase === 'Succeeded') continue;
    if (pod.status?.phase !== 'Running' || !ready(pod)) {
      problems.push(`pod ${pod.metadata?.namespace}/${pod.metadata?.name} is ${pod.status?.phase}`);
    }
  }
  for (const d of (await apps.listDeploymentForAllNamespaces()).items) {
    if ((d.status?.availableReplicas ?? 0) < (d.spec?.replicas ?? 1)) {
      problems.push(`deployment ${d.metadata?.namespace}/${d.metadata?.name} is not available`);
    }
  }
  for (const s of (await apps.listStatefulSetForAllNamespaces()).items) {
    if ((s.status?.readyReplicas ?? 0) < (s.spec?.replicas ?? 1)) {
      problems.push(`statefulset ${s.metadata?.namespace}/${s.metadata?.name} is not ready`);
    }
  }
  for (const c of (await core.listPersistentVolumeClaimForAllNamespaces()).items) {
    if (c.status?.phase !== 'Bound')
      problems.push(`claim ${c.metadata?.name} is ${c.status?.phase}`);
  }
  for (const n of (await core.listNode()).items) {
    if (n.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') !== true) {
      problems.push(`node ${n.metadata?.name} is not Ready`);
    }
  }
  for (const a of (await kc.makeApiClient(ApiregistrationV1Api).listAPIService()).items) {
    if (a.status?.conditions?.some((c) => c.type === 'Available' && c.status === 'True') !== true) {
      problems.push(`APIService ${a.metadata?.name} is not Available`);
    }
  }
  const conversations = (await kc.makeApiClient(CustomObjectsApi).listClusterCustomObject({
    group: 'polychrome.dev',
    version: 'v1alpha1',
    plural: 'conversations',
  })) as {
    items?: {
      metadata?: { name?: string };
      status?: { phase?: string; conditions?: { type?: string; status?: string }[] };
    }[];
  };
  for (const c of conversations.items ?? []) {
    if (c.status?.conditions?.some((k) => k.type === 'Ready' && k.status === 'True') !== true)
      problems.push(`conversation ${c.metadata?.name} is ${c.status?.phase}`);
  }
  return problems;
}

async function statePod(kc: KubeConfig): Promise<V1Pod> {
  return kc
    .makeApiClient(CoreV1Api)
    .readNamespacedPod({ name: 'polychrome-state-0', namespace: 'polychrome-system' });
}

async function api(path: string, init: RequestInit = {}): Promise<unknown> {
  const token = (await readFile(join(dir, 'dev', 'token'), 'utf8')).trim();
  const response = await fetch(`${API}${path}`, {
    ...init,
    headers: {
      Authorization: `Bearer ${token}`,
      'Content-Type': 'application/json',
      ...(init.headers as Record<string, string> | undefined),
    },
  });
  const body: unknown = await response.json();
  if (!response.ok) throw new Error(`${path}: ${response.status} ${JSON.stringify(body)}`);
  return body;
}

async function helloUid(kc: KubeConfig): Promise<string> {
  const obj = (await kc.makeApiClient(CustomObjectsApi).getNamespacedCustomObject({
    group: 'polychrome.dev',
    version: 'v1alpha1',
    plural: 'conversations',
    namespace: DEFAULT_CONVERSATION_NAMESPACE,
    name: 'hello',
  })) as { metadata?: { uid?: string } };
  return obj.metadata?.uid ?? '';
}

async function transcriptTurns(uid: string): Promise<unknown[]> {
  const body = (await api(`/v1/conversations/${uid}/transcript`)) as { turns?: unknown[] };
  return body.turns ?? [];
}

const NS = DEFAULT_CONVERSATION_NAMESPACE;

/**
 * The last lines of every control-plane replica's log on the local node (its per-pod logs,
 * hack/local-node.ts): what a timed-out wait on the controller adds to its failure.
 */
function controlPlaneLogs(lines: number): string {
  const pods = join(dir, 'dev', 'node', 'pods');
  if (!existsSync(pods)) return '(no pod logs)';
  return readdirSync(pods)
    .filter((pod) => pod.startsWith('polychrome-system_polychrome-control-plane-'))
    .flatMap((pod) =>
      readdirSync(join(pods, pod))
        .filter((file) => file.endsWith('.log'))
        .map((file) => {
          const text = readFileSync(join(pods, pod, file), 'utf8')
            .trimEnd()
            .split('\n');
          return `== ${pod}/${file}\n${text.slice(-lines).join('\n')}`;
        }),
    )
    .join('\n');
}

async function harnessSecret(kc: KubeConfig): Promise<V1Secret> {
  return kc
    .makeApiClient(CoreV1Api)
    .readNamespacedSecret({ name: CredentialSecret.Harness, namespace: NS });
}

/** The provisioner's Secrets, by name: uid and data, to compare across a restart. */
async function provisioned(kc: KubeConfig): Promise<Record<string, unknown>> {
  const core = kc.makeApiClient(CoreV1Api);
  const out: Record<string, unknown> = {};
  for (const name of SECRET_NAMES) {
    const secret = await core.readNamespacedSecret({ name, namespace: 'polychrome-system' });
    out[name] = { uid: secret.metadata?.uid, data: secret.data };
  }
  return out;
}

describe('make dev', () => {
  let uid = '';
  let keys: Record<string, unknown> = {};

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'polychrome-dev-'));
    await dev('up', MODEL_ENV);
  }, 600_000);

  afterAll(async () => {
    if (dir === undefined) return;
    await dev('reset').catch((err: unknown) => process.stderr.write(`${String(err)}\n`));
    await rm(dir, { recursive: true, force: true });
  }, 300_000);

  it('deploys the base as pods of its Deployments and StatefulSet, and no object stays unready', async () => {
    const kc = kube();
    // The warm pool's first harnesses are replaced once the model setting is in (hack/dev.ts).
    expect(await unreadyAfter(kc, 60_000)).toEqual([]);
    const pods = (
      await kc.makeApiClient(CoreV1Api).listNamespacedPod({ namespace: 'polychrome-system' })
    ).items;
    // The control plane and the provisioner (Deployments), the state plane (StatefulSet).
    const owners = pods
      .map(
        (p) =>
          `${p.metadata?.ownerReferences?.[0]?.kind}/${p.metadata?.labels?.['app.kubernetes.io/name']}`,
      )
      .sort();
    expect(owners).toEqual([
      'ReplicaSet/polychrome-control-plane',
      'ReplicaSet/polychrome-provisioner',
      'StatefulSet/polychrome-state',
    ]);
    uid = await helloUid(kc);
    const turn = (await api(`/v1/conversations/${uid}/messages`, {
      method: 'POST',
      body: JSON.stringify({ text: 'What is 6 * 7?', idempotencyKey: 'dev-stack-1' }),
    })) as { status?: string };
    expect(['complete', 'paused']).toContain(turn.status);
    expect(await transcriptTurns(uid)).toHaveLength(1);
  }, 120_000);

  it('links kubectl polychrome as the bundle it built, which lists the Conversation hello', async () => {
    const plugin = join(defaultBinDir, 'kubectl-polychrome');
    const { version } = JSON.parse(readFileSync(join(repoRoot, 'package.json'), 'utf8')) as {
      version: string;
    };
    // The sources through tsx know no commit; the bundle carries the one it was built from.
    const shown = await run(plugin, ['version'], { cwd: dir });
    expect(shown.stdout).toBe(
      `kubectl-polychrome ${version} (commit ${headCommit(repoRoot) ?? ''})\n`,
    );
    const env = { PATH: process.env.PATH ?? '', KUBECONFIG: join(dir, 'cluster', 'kubeconfig') };
    const completed = await run(
      join(defaultBinDir, 'kubectl_complete-polychrome'),
      ['get', '-n', DEFAULT_CONVERSATION_NAMESPACE, ''],
      { cwd: dir, env },
    );
    expect(completed.stdout.split('\n')).toContain('hello');
  });

  it('installs with no Secret made by hand: the provisioner made them, onboarding the namespace', async () => {
    const kc = kube();
    // Every Secret of the base is the provisioner's, but the door's: cert-manager's part,
    // which make dev plays (no cert-manager here).
    expect(await secretManagers(kc, 'polychrome-system')).toEqual({
      ...Object.fromEntries(SECRET_NAMES.map((name) => [name, PROVISIONED_LABEL.value])),
      'polychrome-kube-api-tls': 'make-dev',
    });
    // The conversations' namespace was onboarded by its label alone.
    const namespace = await kc.makeApiClient(CoreV1Api).readNamespace({ name: NS });
    expect(namespace.metadata?.labels?.[ONBOARDING_LABEL.key]).toBe(ONBOARDING_LABEL.value);
    expect(await onboardedObjects(kc, NS)).toEqual(ALL_ONBOARDED);
    expect(await secretManagers(kc, NS)).toEqual({
      [CredentialSecret.Harness]: 'polychrome-onboarding',
      [CredentialSecret.HarnessTls]: 'polychrome-onboarding',
    });
    // make dev's model setting is a field of its own in onboarding's Secret, and every
    // harness running now started with it.
    const secret = await harnessSecret(kc);
    const url = Buffer.from(secret.data?.['anthropic-base-url'] ?? '', 'base64').toString();
    expect(url).toBe(MODEL_ENV.ANTHROPIC_BASE_URL);
    expect(dataKeyOwners(secret, 'anthropic-base-url')).toEqual(['make-dev']);
    const harnesses = (
      await kc.makeApiClient(CoreV1Api).listNamespacedPod({
        namespace: NS,
        labelSelector: 'app.kubernetes.io/name=polychrome-harness',
      })
    ).items.filter((p) => p.metadata?.deletionTimestamp === undefined);
    expect(harnesses.length).toBeGreaterThan(0);
    for (const pod of harnesses) {
      const { env } = podProcess(pod.status?.podIP ?? '', 'harness/main.ts');
      expect({ pod: pod.metadata?.name, url: env.ANTHROPIC_BASE_URL }).toEqual({
        pod: pod.metadata?.name,
        url: MODEL_ENV.ANTHROPIC_BASE_URL,
      });
    }
    keys = await provisioned(kc);
  }, 60_000);

  it('a SIGKILLed state plane is restarted by Kubernetes, and what was committed is still there', async () => {
    const kc = kube();
    const before = await statePod(kc);
    const podIP = before.status?.podIP ?? '';
    const restarts = before.status?.containerStatuses?.[0]?.restartCount ?? 0;
    process.kill(podProcess(podIP, 'state/main.ts').pid, 'SIGKILL');
    await pollUntil(
      'the state plane to be restarted and Ready',
      async () => {
        const pod = await statePod(kc);
        const count = pod.status?.containerStatuses?.[0]?.restartCount ?? 0;
        return count > restarts && ready(pod) ? true : undefined;
      },
      { timeoutMs: 90_000, intervalMs: 500 },
    );
    // The control plane's link comes back; the journal kept the turn.
    const turns = await pollUntil(
      'the transcript through the restarted state plane',
      () => transcriptTurns(uid).catch(() => undefined),
      { timeoutMs: 60_000, intervalMs: 500 },
    );
    expect(turns).toHaveLength(1);
    // The control plane is unready while its state link is down (operator/main.ts); it is
    // Ready again at its next readiness probe (every 5 s), which may come after the
    // transcript answers. So nothing may stay unready, waited for up to a minute.
    expect(await unreadyAfter(kc, 60_000)).toEqual([]);
  }, 180_000);

  it('down then up keeps the cluster, the conversation, its journal and the keys', async () => {
    await dev('down');
    expect(existsSync(join(dir, 'cluster', 'etcd'))).toBe(true);
    // Without the model setting this time: make dev's field goes, onboarding's stay.
    await dev('up');
    const kc = kube();
    expect(await helloUid(kc)).toBe(uid);
    expect(await transcriptTurns(uid)).toHaveLength(1);
    expect(await unreadyAfter(kc, 60_000)).toEqual([]);
    expect(await provisioned(kc)).toEqual(keys);
    const secret = await harnessSecret(kc);
    expect(Object.keys(secret.data ?? {})).toEqual(['approval-public-key']);
  }, 600_000);

  it("removing the namespace's label removes what onboarding installed, and a new Conversation says how to get it back", async () => {
    const kc = kube();
    await run(join(defaultBinDir, 'kubectl'), [
      `--kubeconfig=${join(dir, 'cluster', 'kubeconfig')}`,
      'label',
      'namespace',
      NS,
      `${ONBOARDING_LABEL.key}-`,
    ]);
    await pollUntil(
      `onboarding's objects to leave ${NS}`,
      async () => ((await onboardedObjects(kc, NS)).length === 0 ? true : undefined),
      { timeoutMs: 60_000, intervalMs: 500 },
    );
    expect(await secretManagers(kc, NS)).toEqual({});
    // A Conversation made now finds no warm pool, and its condition names the label.
    const custom = kc.makeApiClient(CustomObjectsApi);
    const where = { group: 'polychrome.dev', version: 'v1alpha1', plural: 'conversations' };
    await custom.createNamespacedCustomObject({
      ...where,
      namespace: NS,
      body: {
        apiVersion: 'polychrome.dev/v1alpha1',
        kind: 'Conversation',
        metadata: { name: 'offboarded' },
        spec: { agent: { systemPrompt: 'You are a helpful assistant.' } },
      },
    });
    let status: unknown;
    const message = await pollUntil(
      'the new Conversation to report its warm pool missing',
      async () => {
        const made = (await custom.getNamespacedCustomObject({
          ...where,
          namespace: NS,
          name: 'offboarded',
        })) as { status?: { conditions?: { reason?: string; message?: string }[] } };
        status = made.status;
        return made.status?.conditions?.find((c) => c.reason === 'WarmPoolMissing')?.message;
      },
      { timeoutMs: 60_000, intervalMs: 500 },
    ).catch((err: unknown) => {
      throw new Error(
        `${String(err)}\nits status: ${JSON.stringify(status)}\n${controlPlaneLogs(40)}`,
      );
    });
    expect(message).toContain(`kubectl label namespace ${NS} polychrome.dev/enabled=true`);
  }, 180_000);

  it('reset deletes what up kept', async () => {
    await dev('reset');
    expect(existsSync(join(dir, 'cluster'))).toBe(false);
    expect(existsSync(join(dir, 'dev'))).toBe(false);
  }, 300_000);
});
