/**
 * A release's `polychrome.yaml` installed for real (release.test.ts): an empty local
 * cluster of its own, as every real cluster runs (the ServiceAccount admission plugin, so
 * pods get their API token; kube-controller-manager; agent-sandbox, a prerequisite the
 * install docs name), and a local node in its registry mode, so every pod runs the image
 * its manifest pins, pulled from the release's registry. What other tools do in a cluster
 * is done here as `make dev` does it (hack/lib/dev-base.ts): the state plane's volume (a
 * storage class's part) and the model settings a user adds to the onboarded Secret.
 * Nothing of Polychrome's is made by hand: the manifests and the provisioner make it all.
 */
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { CoreV1Api, type KubeConfig } from '@kubernetes/client-node';
import { ensureVolume, stateJournalVolume } from '../../../hack/lib/dev-base';
import {
  applyModelKeys,
  renewWarmSandboxes,
  waitOnboarded,
} from '../../../hack/lib/dev-onboarding';
import { devVerifierEnv, issueDevStateClients } from '../../../hack/lib/dev-state-client';
import { mintDevToken } from '../../../hack/lib/dev-token';
import { waitConversationReady } from '../../../hack/lib/dev-wait';
import { LocalCluster } from '../../../hack/lib/local-cluster';
import { LocalNode } from '../../../hack/lib/local-node';
import { hostTools } from '../../../hack/lib/local-node-image-launch';
import { CraneImageStore } from '../../../hack/lib/local-node-image-store';
import { defaultBinDir, repoRoot } from '../../../hack/lib/paths';
import { pollUntil } from '../../../hack/lib/processes';
import { partitionOf } from '../../../common/partition-name';
import { Role } from '../../../common/persona-roles';
import { ONBOARDING_LABEL } from '../../../operator/api/v1alpha1/conversation-values';
import { MessagesApiServer, echoResponder } from '../../support/messages-api-server';
import { createConversationObject } from './kube';

const run = promisify(execFile);
const SYSTEM = 'polychrome-system';

/** A release installed on a cluster of its own, with what a turn needs. */
export interface InstalledRelease {
  cluster: LocalCluster;
  node: LocalNode;
  kc: KubeConfig;
  model: MessagesApiServer;
  /** How long each step took, in ms, by name. */
  timings: Record<string, number>;
  close(): Promise<void>;
}

/** `kubectl` against `kubeconfig`; rejects with its stderr. */
export async function kubectl(kubeconfig: string, args: readonly string[]): Promise<string> {
  try {
    const { stdout } = await run(
      join(defaultBinDir, 'kubectl'),
      [`--kubeconfig=${kubeconfig}`, ...args],
      { maxBuffer: 16 << 20 },
    );
    return stdout;
  } catch (err: unknown) {
    const e = err as { stderr?: string; message: string };
    throw new Error(`kubectl ${args.join(' ')}: ${e.stderr ?? e.message}`);
  }
}

/**
 * Starts the cluster, the node and the model server, and applies `manifest` (server-side)
 * with nothing before it but the state plane's volume. Resolves once the provisioner, the
 * state plane and the control plane have rolled out.
 */
export async function installRelease(dir: string, manifest: string): Promise<InstalledRelease> {
  const timings: Record<string, number> = {};
  let began = Date.now();
  const lap = (name: string): void => {
    timings[name] = Date.now() - began;
    began = Date.now();
  };
  const cluster = await LocalCluster.start({
    dir: join(dir, 'cluster'),
    serviceAccountAdmission: true,
    controllerManager: true,
    agentSandbox: true,
    crdDirs: [join(repoRoot, 'config', 'crd', 'agent-sandbox')],
  });
  const kc = cluster.kubeConfig();
  const node = new LocalNode({
    kubeConfig: kc,
    name: 'release-node',
    stateDir: join(dir, 'node'),
    clusterDns: true,
    registry: {
      puller: new CraneImageStore({
        crane: join(defaultBinDir, 'crane'),
        cacheDir: join(dir, 'node', 'images'),
      }),
      tools: hostTools(),
    },
  });
  const model = await MessagesApiServer.start({ respond: echoResponder });
  const installed: InstalledRelease = {
    cluster,
    node,
    kc,
    model,
    timings,
    close: async () => {
      await node.close();
      await cluster.stop();
      await model.close();
    },
  };
  try {
    await node.start();
    lap('cluster and node');
    const admin = cluster.kubeconfigPath;
    await ensureVolume(
      kc.makeApiClient(CoreV1Api),
      stateJournalVolume(join(dir, 'volumes', 'journal')),
    );
    await kubectl(admin, ['apply', '--server-side', '-f', manifest]);
    for (const workload of [
      'deployment/polychrome-provisioner',
      'statefulset/polychrome-state',
      'deployment/polychrome-control-plane',
    ]) {
      await kubectl(admin, ['rollout', 'status', '-n', SYSTEM, workload, '--timeout=300s']);
    }
    lap('apply to planes Ready');
    return installed;
  } catch (err: unknown) {
    await installed.close();
    throw err;
  }
}

/**
 * A namespace labelled for onboarding, onboarded by the provisioner; the model server's
 * endpoint and key put in its harness Secret as a user adds theirs, the warm pool's
 * harnesses renewed to read them.
 */
export async function onboardNamespace(release: InstalledRelease, name: string): Promise<void> {
  const core = release.kc.makeApiClient(CoreV1Api);
  await core.createNamespace({
    body: { metadata: { name, labels: { [ONBOARDING_LABEL.key]: ONBOARDING_LABEL.value } } },
  });
  await waitOnboarded(release.kc, name, 180_000);
  await applyModelKeys(release.kc, name, {
    'anthropic-base-url': release.model.url,
    'anthropic-api-key': release.model.apiKey,
  });
  await renewWarmSandboxes(release.kc, name);
}

/** The control plane's and the state plane's ready pod addresses. */
async function podIP(kc: KubeConfig, selector: string): Promise<string> {
  return pollUntil(`a ready pod ${selector}`, async () => {
    const pods = await kc
      .makeApiClient(CoreV1Api)
      .listNamespacedPod({ namespace: SYSTEM, labelSelector: selector });
    const ready = pods.items.find((p) =>
      (p.status?.conditions ?? []).some((c) => c.type === 'Ready' && c.status === 'True'),
    );
    return ready?.status?.podIP;
  });
}

/** What one turn of a Conversation gave: the answer's status and the journal's check. */
export interface TurnResult {
  uid: string;
  status: number;
  body: unknown;
  verify: { code: number; stdout: string; stderr: string };
}

/**
 * Applies the Conversation `name` (config/samples' smallest), waits until it is Ready,
 * sends one message through the public API with an admin session minted through the state
 * plane (as `make dev` mints its token), then verifies its journal partition with the CLI
 * as the provisioner's verifier identity.
 */
export async function takeTurn(
  release: InstalledRelease,
  namespace: string,
  name: string,
  dir: string,
): Promise<TurnResult> {
  const { kc } = release;
  await createConversationObject(kc, namespace, name, {
    agent: { systemPrompt: 'You are a helpful assistant.' },
  });
  const { uid } = await waitConversationReady(kc, namespace, name);
  const state = `${await podIP(kc, 'app.kubernetes.io/name=polychrome-state')}:7443`;
  const clients = await issueDevStateClients(kc, SYSTEM, join(dir, 'state-client'));
  const token = await mintDevToken({
    clients,
    address: state,
    identity: 'test:release',
    roles: [Role.Admin],
  });
  const api = await podIP(kc, 'app.kubernetes.io/name=polychrome-control-plane');
  const response = await fetch(`http://${api}:8080/v1/conversations/${uid}/messages`, {
    method: 'POST',
    headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/json' },
    body: JSON.stringify({ text: 'hello from the release', idempotencyKey: 'release-1' }),
  });
  const body: unknown = await response.json();
  const verify = await run(
    process.execPath,
    [join(repoRoot, 'bin', 'polychrome.js'), 'state', 'verify', partitionOf(uid)],
    {
      cwd: repoRoot,
      env: { PATH: process.env.PATH ?? '', ...devVerifierEnv(clients, state) },
      timeout: 120_000,
    },
  ).then(
    (r) => ({ code: 0, ...r }),
    (err: { code?: number; stdout?: string; stderr?: string }) => ({
      code: typeof err.code === 'number' ? err.code : 1,
      stdout: err.stdout ?? '',
      stderr: err.stderr ?? '',
    }),
  );
  return { uid, status: response.status, body, verify };
}
