/**
 * A release installed for real (release.test.ts), from its `polychrome.yaml` or its Helm
 * chart (an InstallStep, support/release-install-steps.ts): an empty local cluster of its
 * own, as every real cluster runs (the ServiceAccount admission plugin, so pods get their
 * API token; kube-controller-manager; agent-sandbox, a prerequisite the install docs name),
 * and a local node in its registry mode, so every pod runs the image the release pins,
 * pulled from the release's registry. What other tools do in a cluster
 * is done here as `make dev` does it (hack/lib/dev-base.ts): the state plane's volume (a
 * storage class's part) and the model settings a user adds to the onboarded Secret.
 * Nothing of Polychrome's is made by hand: the manifests (or the chart) and the provisioner
 * make it all.
 */
import { execFile } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { CoreV1Api, type KubeConfig } from '@kubernetes/client-node';
import { ensureVolume, stateJournalVolume } from '../../../hack/lib/dev-base';
import {
  applyModelKeys,
  renewWarmSandboxes,
  waitOnboarded,
} from '../../../hack/lib/dev-onboarding';
import {
  type DevStateClients,
  devVerifierEnv,
  issueDevStateClients,
} from '../../../hack/lib/dev-state-client';
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
  /** The last lines of every container's log on the node, for a failure's message. */
  logs(): string;
  close(): Promise<void>;
}

/** The last `lines` lines of each container log under the node's `pods/` directory. */
function podLogs(podsDir: string, lines = 40): string {
  if (!existsSync(podsDir)) return '(no pod has run on the node)';
  return readdirSync(podsDir)
    .sort()
    .flatMap((pod) =>
      readdirSync(join(podsDir, pod))
        .filter((f) => f.endsWith('.log'))
        .map((f) => {
          const text = readFileSync(join(podsDir, pod, f), 'utf8')
            .trimEnd()
            .split('\n');
          return `--- ${pod}/${f} (last ${String(Math.min(lines, text.length))} lines)\n${text.slice(-lines).join('\n')}`;
        }),
    )
    .join('\n');
}

/**
 * Runs `step`; when it fails, throws an error that names `what` and carries the install's
 * logs.
 */
export async function inStep<T>(
  release: InstalledRelease,
  what: string,
  step: () => Promise<T>,
): Promise<T> {
  try {
    return await step();
  } catch (err: unknown) {
    const message = err instanceof Error ? err.message : String(err);
    throw new Error(`${what}: ${message}\n\nThe install's logs:\n${release.logs()}`, {
      cause: err,
    });
  }
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
 * How a release goes onto the empty cluster (support/release-install-steps.ts has the
 * polychrome.yaml apply and the helm install): its name, for the timings, and what it runs
 * with the cluster's admin kubeconfig, `dir` being the install's own folder.
 */
export interface InstallStep {
  name: string;
  run(kubeconfig: string, dir: string): Promise<void>;
}

/**
 * Starts the cluster, the node and the model server, and installs the release with
 * `install` (the polychrome.yaml apply, or helm) with nothing before it but the state
 * plane's volume. Resolves once the provisioner, the state plane and the control plane have
 * rolled out.
 */
export async function installRelease(dir: string, install: InstallStep): Promise<InstalledRelease> {
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
    logs: () => podLogs(join(dir, 'node', 'pods')),
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
    await install.run(admin, dir);
    lap(install.name);
    for (const workload of [
      'deployment/polychrome-provisioner',
      'statefulset/polychrome-state',
      'deployment/polychrome-control-plane',
    ]) {
      await kubectl(admin, ['rollout', 'status', '-n', SYSTEM, workload, '--timeout=300s']);
    }
    lap('planes rolled out');
    return installed;
  } catch (err: unknown) {
    const logs = installed.logs();
    await installed.close();
    const message = err instanceof Error ? err.message : String(err);
    throw new Error(`installing the release: ${message}\n\nThe install's logs:\n${logs}`, {
      cause: err,
    });
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

/**
 * The ready pod address of `selector` in the install's namespace: one not being deleted
 * (during an upgrade's rollout the old pods may still be Ready while they stop).
 */
async function podIP(kc: KubeConfig, selector: string): Promise<string> {
  return pollUntil(`a ready pod ${selector}`, async () => {
    const pods = await kc
      .makeApiClient(CoreV1Api)
      .listNamespacedPod({ namespace: SYSTEM, labelSelector: selector });
    const ready = pods.items.find(
      (p) =>
        p.metadata?.deletionTimestamp === undefined &&
        (p.status?.conditions ?? []).some((c) => c.type === 'Ready' && c.status === 'True'),
    );
    return ready?.status?.podIP;
  });
}

/** The state plane's gRPC address and the verifier's and records admin's files. */
export interface StateAccess {
  address: string;
  clients: DevStateClients;
}

/** Issues the state plane's client identities (as `make dev` does) and finds its address. */
export async function stateAccess(release: InstalledRelease, dir: string): Promise<StateAccess> {
  const address = `${await podIP(release.kc, 'app.kubernetes.io/name=polychrome-state')}:7443`;
  const clients = await issueDevStateClients(release.kc, SYSTEM, join(dir, 'state-client'));
  return { address, clients };
}

/** The CLI (bin/polychrome.js) as the verifier identity; its exit code and output. */
export async function stateCli(
  access: StateAccess,
  args: readonly string[],
): Promise<{ code: number; stdout: string; stderr: string }> {
  return run(process.execPath, [join(repoRoot, 'bin', 'polychrome.js'), ...args], {
    cwd: repoRoot,
    env: { PATH: process.env.PATH ?? '', ...devVerifierEnv(access.clients, access.address) },
    timeout: 120_000,
    maxBuffer: 16 << 20,
  }).then(
    (r) => ({ code: 0, ...r }),
    (err: { code?: number; stdout?: string; stderr?: string }) => ({
      code: typeof err.code === 'number' ? err.code : 1,
      stdout: err.stdout ?? '',
      stderr: err.stderr ?? '',
    }),
  );
}

/** What one turn of a Conversation gave: the answer's status and the journal's check. */
export interface TurnResult {
  uid: string;
  status: number;
  body: unknown;
  verify: { code: number; stdout: string; stderr: string };
}

/**
 * Applies the Conversation `name` (config/samples' smallest) and waits until it is Ready.
 * Resolves with its uid.
 */
export async function startConversation(
  release: InstalledRelease,
  namespace: string,
  name: string,
): Promise<string> {
  await createConversationObject(release.kc, namespace, name, {
    agent: { systemPrompt: 'You are a helpful assistant.' },
  });
  return (await waitConversationReady(release.kc, namespace, name)).uid;
}

/**
 * Sends `text` to the Conversation `uid` through the public API with an admin session
 * minted through the state plane (as `make dev` mints its token).
 */
export async function sendMessage(
  release: InstalledRelease,
  access: StateAccess,
  uid: string,
  message: { text: string; idempotencyKey: string },
): Promise<{ status: number; body: unknown }> {
  const token = await mintDevToken({
    clients: access.clients,
    address: access.address,
    identity: 'test:release',
    roles: [Role.Admin],
  });
  const api = await podIP(release.kc, 'app.kubernetes.io/name=polychrome-control-plane');
  const response = await fetch(`http://${api}:8080/v1/conversations/${uid}/messages`, {
    method: 'POST',
    headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/json' },
    body: JSON.stringify(message),
  });
  return { status: response.status, body: await response.json() };
}

/**
 * Applies the Conversation `name`, waits until it is Ready, sends one message, then
 * verifies its journal partition with the CLI as the provisioner's verifier identity.
 */
export async function takeTurn(
  release: InstalledRelease,
  namespace: string,
  name: string,
  dir: string,
): Promise<TurnResult> {
  const uid = await startConversation(release, namespace, name);
  const access = await stateAccess(release, dir);
  const answer = await sendMessage(release, access, uid, {
    text: 'hello from the release',
    idempotencyKey: 'release-1',
  });
  const verify = await stateCli(access, ['state', 'verify', partitionOf(uid)]);
  return { uid, ...answer, verify };
}
