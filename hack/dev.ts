/**
 * `make dev`: the whole system on this machine, the way a cluster runs it.
 *
 *   tsx hack/dev.ts up     local control plane (etcd, kube-apiserver, kube-controller-manager,
 *                          agent-sandbox) and hack's local node, which runs pods as local
 *                          processes; then the install as users apply it: config/conversations
 *                          (the conversations' namespace, labelled polychrome.dev/enabled=true)
 *                          and hack/dev/base (config/'s bundles and the Kubernetes door): the
 *                          provisioner, which makes every Secret the planes mount and onboards
 *                          that namespace (sandbox template, warm pool, NetworkPolicy, harness
 *                          credentials); the state plane as the pod of its StatefulSet, the
 *                          control plane as the pod of its Deployment (its public API on
 *                          127.0.0.1:8080, its door registered with kube-apiserver: kubectl
 *                          reaches a conversation by name); then the Conversation
 *                          hack/dev/conversation-hello.yaml, until Ready; then a session token
 *                          for the admin persona dev:you in .local/dev/token, and the commands
 *                          that talk to the conversation
 *   tsx hack/dev.ts up --sample panel|triage
 *                          the same, then one of config/samples' Agent samples beside hello
 *                          (hack/lib/dev-samples.ts): the ModelConfig its Agents name, on the
 *                          model the environment gives, or on the scripted demo endpoint
 *                          (hack/demo-model.ts) without a key; then the commands that talk to it
 *   tsx hack/dev.ts down   stop all of it; the cluster's data, journals and records stay
 *                          under .local/, and the next `up` starts from them
 *   tsx hack/dev.ts reset  stop all of it and delete what it kept: the next `up` starts over
 *
 * Everything runs in the background; state and logs live under .local/, the install's keys
 * and certificates in the local cluster's Secrets, where the provisioner made them. Only
 * what a cluster's other tools do is done here: the door's certificate (cert-manager), the
 * state plane's volume (a storage class), the model's keys from the environment (the
 * installer), and the images, which the local node maps to this checkout. Kubernetes
 * restarts a plane that exits, as in a cluster. The harness uses Claude when
 * ANTHROPIC_API_KEY is set, an OpenAI-compatible model when OPENAI_API_KEY is (both:
 * HARNESS_MODEL_PROVIDER chooses; ANTHROPIC_BASE_URL and OPENAI_BASE_URL pass through too),
 * the scripted demo model otherwise.
 */
import { Role } from '../common/persona-roles';
import { ApiregistrationV1Api, CoreV1Api, type KubeConfig } from '@kubernetes/client-node';
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import { buildCli } from './build-cli';
import { createServer } from 'node:net';
import { join, relative } from 'node:path';
import {
  applyDoorSecret,
  assertNoHandMadeSecrets,
  DEV_BASE_NAMESPACE,
  ensureVolume,
  stateJournalVolume,
} from './lib/dev-base';
import { applyModelKeys, renewWarmSandboxes, waitOnboarded } from './lib/dev-onboarding';
import { devVerifierEnv, issueDevStateClients } from './lib/dev-state-client';
import { mintDevToken, writeDevToken } from './lib/dev-token';
import {
  devModelName,
  HARNESS_IMAGE_PATTERN,
  harnessSourceCommand,
  modelSecretData,
} from './lib/harness-config';
import { defaultBinDir, defaultCrdDirs, repoRoot } from './lib/paths';
import { LocalCluster } from './lib/local-cluster';
import { isAlive, pollUntil, startProcess, stopPid } from './lib/processes';
import { ensureDoorCertificate, KUBE_DOOR_API_SERVICE } from './lib/kube-door';
import { DEFAULT_CONVERSATION_NAMESPACE } from '../operator/config';
import {
  applySample,
  DEMO_MODEL_PORT,
  devModel,
  devSample,
  sampleObjects,
  type DevModel,
  type DevSample,
} from './lib/dev-samples';
import { waitConversationReady, waitReady } from './lib/dev-wait';
import { partitionOf } from '../common/partition-name';

/** Where `up` keeps the cluster, the journals, keys and logs; POLYCHROME_DEV_DIR moves it (tests). */
const localDir = process.env.POLYCHROME_DEV_DIR ?? join(repoRoot, '.local');
const clusterDir = join(localDir, 'cluster');
const devDir = join(localDir, 'dev');
const stateFile = join(devDir, 'processes.json');
/**
 * The conversations' namespace: the one the control plane's public API creates them in
 * (config/control-plane's POLYCHROME_NEW_CONVERSATION_NAMESPACE), where `hello` lives too.
 */
const namespace = DEFAULT_CONVERSATION_NAMESPACE;
/** The public API, where the CLI looks by default (POLYCHROME_API_URL). */
const apiHost = '127.0.0.1';
const apiPort = 8080;
const apiUrl = `http://${apiHost}:${apiPort}`;
/** The state plane's gRPC, forwarded by the local node to its pod. */
const statePort = 7443;
const stateAddress = `localhost:${statePort}`;
/** The Kubernetes door, forwarded by the local node to the control plane's pod; kube-apiserver proxies to it. */
const kubeDoorPort = 8444;

/**
 * The images of the base and of the sandbox template, as the local node runs them: this
 * checkout's sources, through tsx as `npm run dev`-style processes do.
 */
function devImageCommands(): Record<string, readonly string[]> {
  const tsx = (entry: string): readonly string[] => [process.execPath, '--import', 'tsx', entry];
  return {
    [HARNESS_IMAGE_PATTERN]: harnessSourceCommand('node'),
    '*polychrome/control-plane:*': tsx('operator/main.ts'),
    '*polychrome/state:*': tsx('state/main.ts'),
  };
}

/** Whether nothing listens on 127.0.0.1:`port`. */
function portFree(port: number): Promise<boolean> {
  return new Promise((resolvePort) => {
    const server = createServer();
    server.once('error', () => resolvePort(false));
    server.listen(port, '127.0.0.1', () => server.close(() => resolvePort(true)));
  });
}
/** The admin persona `make dev` mints a session token for. */
const devIdentity = 'dev:you';
const tokenFile = join(devDir, 'token');
/** The state plane's client identities of this machine's tooling (hack/lib/dev-state-client.ts). */
const stateClientDir = join(devDir, 'state-client');
/** The dev Conversation: the minimal sample plus the calculator, which needs approval. */
const conversationFile = join(repoRoot, 'hack', 'dev', 'conversation-hello.yaml');

interface DevProcess {
  name: string;
  pid: number;
  log: string;
}

function kubectl(kubeconfig: string, args: readonly string[]): string {
  return execFileSync(join(defaultBinDir, 'kubectl'), [`--kubeconfig=${kubeconfig}`, ...args], {
    encoding: 'utf8',
  });
}

async function ensureCluster(): Promise<LocalCluster> {
  if (existsSync(join(clusterDir, 'state.json'))) {
    const running = await LocalCluster.attach(clusterDir);
    try {
      running.assertRunning();
      console.log('dev: local control plane already running');
      return running;
    } catch {
      await running.stop();
    }
  }
  return LocalCluster.start({
    dir: clusterDir,
    detached: true,
    keepData: true,
    serviceAccountAdmission: true,
    controllerManager: true,
    agentSandbox: true,
    crdDirs: defaultCrdDirs,
    log: (line) => console.log(line),
  });
}

function start(name: string, args: readonly string[], env: Record<string, string>): DevProcess {
  const log = join(devDir, `${name}.log`);
  const child = startProcess(process.execPath, ['--import', 'tsx', ...args], {
    logPath: log,
    cwd: repoRoot,
    detached: true,
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', ...env },
  });
  if (child.pid === undefined) throw new Error(`${name} did not start; see ${log}`);
  console.log(`dev: started ${name} (pid ${child.pid}, log ${log})`);
  return { name, pid: child.pid, log };
}

/** Fails early when another program holds the API port: the control plane would exit. */
async function assertApiPortFree(): Promise<void> {
  const answered = await fetch(`${apiUrl}/`, { signal: AbortSignal.timeout(2_000) }).then(
    () => true,
    () => false,
  );
  if (answered) {
    throw new Error(
      `dev: something already answers on ${apiUrl}; stop it (or make dev-down) and run make dev again`,
    );
  }
}

/** Waits until the public API serves its OpenAPI document (no token needed). */
async function waitApi(proc: DevProcess): Promise<void> {
  await pollUntil(
    `the public API on ${apiUrl}`,
    async () => {
      if (!isAlive(proc.pid)) throw new Error(`${proc.name} exited; see ${proc.log}`);
      const response = await fetch(`${apiUrl}/v1/openapi.json`).catch(() => undefined);
      return response?.ok === true ? true : undefined;
    },
    { timeoutMs: 30_000, intervalMs: 250 },
  );
}

/** A path under the repository as the printed commands spell it (run from the root). */
function local(path: string): string {
  return relative(repoRoot, path);
}

/** Waits until kube-apiserver reports the door's APIService Available. */
async function waitApiService(cluster: LocalCluster): Promise<void> {
  const registration = cluster.kubeConfig().makeApiClient(ApiregistrationV1Api);
  await pollUntil(
    `the APIService ${KUBE_DOOR_API_SERVICE} to be Available`,
    async () => {
      const current = await registration.readAPIService({ name: KUBE_DOOR_API_SERVICE });
      const available = current.status?.conditions?.some(
        (c) => c.type === 'Available' && c.status === 'True',
      );
      return available === true ? true : undefined;
    },
    { timeoutMs: 120_000, intervalMs: 500 },
  );
}

/**
 * Where `make dev` bundles the plugin: beside its launchers, not dist/bundle, which bin/'s
 * launchers prefer (the tests run those from the sources).
 */
const devBundleDir = join(defaultBinDir, 'cli-bundle');

/** A launcher for the bundle's `entry`, as `name` (CommonJS: hack/bin has no package type). */
function devLauncher(name: string, entry: string): string {
  return `#!/usr/bin/env node
'use strict';
// Written by make dev (hack/dev.ts): runs the bundle it built into ${local(devBundleDir)}.
const { join } = require('node:path');
const { pathToFileURL } = require('node:url');
import(pathToFileURL(join(__dirname, 'cli-bundle', '${entry}.mjs')).href).catch((error) => {
  console.error('${name}: cannot load the bundle make dev built; run make dev again:', error);
  process.exit(3);
});
`;
}

/**
 * `kubectl polychrome` from this checkout, bundled (hack/build-cli.ts) so it starts as a
 * release's does, not through tsx (docs/kubectl.md, "Start time"): the plugin and its
 * completion in the directory the printed `export PATH=...` puts first. After changing
 * cli/, run make dev again (or bin/kubectl-polychrome.js, which runs the sources).
 */
async function linkKubectlPlugin(): Promise<void> {
  const started = Date.now();
  const plugin = {
    'kubectl-polychrome': 'kubectl-polychrome',
    'kubectl_complete-polychrome': 'kubectl-complete-polychrome',
  };
  await buildCli(devBundleDir, Object.values(plugin));
  for (const [name, entry] of Object.entries(plugin)) {
    const launcher = join(defaultBinDir, name);
    await rm(launcher, { force: true });
    await writeFile(launcher, devLauncher(name, entry), { mode: 0o755 });
  }
  console.log(
    `dev: kubectl polychrome bundled into ${local(devBundleDir)} (${String(Date.now() - started)} ms)`,
  );
}

/** Fails early when another program holds a port the base's host ports need. */
async function assertPortsFree(extra: readonly number[]): Promise<void> {
  await assertApiPortFree();
  for (const port of [statePort, kubeDoorPort, ...extra]) {
    if (!(await portFree(port))) {
      throw new Error(
        `dev: something already listens on 127.0.0.1:${port}; stop it (or make dev-down) and run make dev again`,
      );
    }
  }
}

/** Waits until `kubectl rollout status` says the workload is up to date and available. */
function rolloutStatus(admin: string, workload: string): void {
  console.log(`dev: waiting for ${workload} in ${DEV_BASE_NAMESPACE}`);
  kubectl(admin, ['rollout', 'status', '-n', DEV_BASE_NAMESPACE, workload, '--timeout=180s']);
}

/** `up --sample NAME`'s sample and its model, checked before anything starts. */
function sampleOf(args: readonly string[]): { sample: DevSample; model: DevModel } | undefined {
  const at = args.indexOf('--sample');
  const sample = devSample(at === -1 ? undefined : (args[at + 1] ?? ''));
  return sample === undefined ? undefined : { sample, model: devModel(process.env) };
}

/**
 * The sample beside hello: its ModelConfig, key and objects, then Ready. Returns the
 * Conversation's uid.
 */
async function startSample(
  kc: KubeConfig,
  { sample, model }: { sample: DevSample; model: DevModel },
): Promise<string> {
  console.log(`dev: the ${sample.name} sample (${sample.file}) on ${model.description}`);
  const account = { name: 'polychrome-control-plane', namespace: DEV_BASE_NAMESPACE };
  await applySample(kc, namespace, sample, model, account);
  const agents = sampleObjects(sample).filter((o) => o.kind === 'Agent');
  await waitReady(kc, namespace, 'modelconfigs', ['claude']);
  await waitReady(
    kc,
    namespace,
    'agents',
    agents.map((a) => a.metadata?.name ?? ''),
  );
  return (await waitConversationReady(kc, namespace, sample.conversation)).uid;
}

/** The commands that talk to the sample's Conversation. */
function sampleHelp({ sample, model }: { sample: DevSample; model: DevModel }): string {
  const watch =
    sample.name === 'panel'
      ? "the lead's __delegate_to calls, each panelist's steps as [thread ...] lines"
      : 'the agent_handoff to billing, and billing going on';
  return `
The ${sample.name} sample: Conversation ${sample.conversation} (${sample.file}; its agents answer with ${model.description})
  kubectl polychrome logs ${sample.conversation} -n ${namespace} -f    # in another terminal: ${watch}
  kubectl polychrome send ${sample.conversation} -n ${namespace} "${sample.question}"
  kubectl get agents,modelconfigs -n ${namespace}`;
}

async function up(args: readonly string[]): Promise<void> {
  const withSample = sampleOf(args);
  await mkdir(devDir, { recursive: true });
  if (existsSync(stateFile)) await down();
  const processes: DevProcess[] = [];
  const save = (): Promise<void> => writeFile(stateFile, JSON.stringify(processes, null, 2) + '\n');
  try {
    await assertPortsFree(withSample?.model.demo === true ? [DEMO_MODEL_PORT] : []);
    const cluster = await ensureCluster();
    const admin = cluster.kubeconfigPath;
    const kc = cluster.kubeConfig();
    const core = kc.makeApiClient(CoreV1Api);
    await assertNoHandMadeSecrets(core, DEV_BASE_NAMESPACE);

    // The install, as users apply it (docs/operator.md, "Deploying with Argo CD"): the
    // conversations' namespace labelled polychrome.dev/enabled=true (config/conversations),
    // then the base, whose provisioner makes every Secret the planes mount and onboards that
    // namespace: its sandbox template, warm pool, NetworkPolicy and harness credentials.
    kubectl(admin, ['apply', '--server-side', '-k', join(repoRoot, 'config', 'conversations')]);
    kubectl(admin, ['apply', '--server-side', '-k', join(repoRoot, 'hack', 'dev', 'base')]);

    // What a cluster's cert-manager and storage class do, neither of which is here: the
    // door's serving certificate (kept across runs) and its CA in the APIService, which
    // cert-manager's injector writes in a cluster; the state plane's volume.
    const door = await ensureDoorCertificate(join(localDir, 'kube-api-pki'), DEV_BASE_NAMESPACE);
    await applyDoorSecret(core, DEV_BASE_NAMESPACE, door);
    kubectl(admin, [
      'patch',
      'apiservice',
      KUBE_DOOR_API_SERVICE,
      '--type=merge',
      '-p',
      JSON.stringify({ spec: { caBundle: Buffer.from(door.caPem).toString('base64') } }),
    ]);
    await ensureVolume(core, stateJournalVolume(join(devDir, 'volumes', 'state-journal')));

    // The model's keys and endpoints from this machine's environment: into the onboarded
    // Secret as a user adds theirs, before the harness pods start when it is there already
    // (every run after the first).
    const model = modelSecretData(process.env);
    const keys = await applyModelKeys(kc, namespace, model);

    // The local node runs every pod of the base's namespace and the conversations': the
    // planes' images map to this checkout's sources, as the harness's does.
    const node = start(
      'local-node',
      [
        'hack/local-node.ts',
        '--kubeconfig',
        admin,
        '--state-dir',
        join(devDir, 'node'),
        '--namespace',
        DEV_BASE_NAMESPACE,
        '--namespace',
        namespace,
        '--cluster-dns',
        // The planes' own grace (the control plane drains for 20 s), as a drained node gives.
        '--shutdown-grace',
        '25',
        // What this machine reaches on loopback, as `kubectl port-forward` would give it.
        '--port-forward',
        `${apiPort}=${DEV_BASE_NAMESPACE}/polychrome-control-plane:api`,
        '--port-forward',
        `${kubeDoorPort}=${DEV_BASE_NAMESPACE}/polychrome-control-plane:https-kube`,
        '--port-forward',
        `${statePort}=${DEV_BASE_NAMESPACE}/polychrome-state:grpc`,
        ...Object.entries(devImageCommands()).flatMap(([pattern, argv]) => [
          '--image',
          `${pattern}=${JSON.stringify(argv)}`,
        ]),
      ],
      {},
    );
    processes.push(node);
    if (withSample?.model.demo === true) {
      processes.push(start('demo-model', ['hack/demo-model.ts', withSample.sample.name], {}));
    }
    await save();

    rolloutStatus(admin, 'deployment/polychrome-provisioner');
    rolloutStatus(admin, 'statefulset/polychrome-state');
    rolloutStatus(admin, 'deployment/polychrome-control-plane');
    await waitApi(node);
    await waitApiService(cluster);
    await waitOnboarded(kc, namespace);
    // The first run: onboarding made the Secret only now, and the warm pool's harnesses
    // may have started without the keys; the pool starts new ones that read them.
    if (keys === 'absent' && (await applyModelKeys(kc, namespace, model)) === 'changed') {
      const renewed = await renewWarmSandboxes(kc, namespace);
      console.log(`dev: the model's settings are in place; ${renewed} warm harness(es) replaced`);
    }
    await linkKubectlPlugin();

    kubectl(admin, ['apply', '-n', namespace, '-f', conversationFile]);
    const { uid, endpoint } = await waitConversationReady(kc, namespace, 'hello');
    // The harness process itself answers on the pod's address.
    const host = endpoint.split(':')[0] ?? '';
    const harnessReady = await fetch(`http://${host}:9090/readyz`);
    console.log(
      `\ndev: harness for conversation hello is ${harnessReady.ok ? 'ready' : 'NOT ready'} at ${endpoint}`,
    );
    const sampleUid = withSample === undefined ? undefined : await startSample(kc, withSample);
    process.stdout.write(kubectl(admin, ['get', 'conversations', '-n', namespace]));

    // A session token for an admin persona, as a sign-in edge would issue one, minted with
    // a records-admin identity issued from the provisioner's state CA.
    const clients = await issueDevStateClients(kc, DEV_BASE_NAMESPACE, stateClientDir);
    await writeDevToken(
      tokenFile,
      await mintDevToken({
        clients,
        address: stateAddress,
        identity: devIdentity,
        roles: [Role.Admin],
      }),
    );
    const verifierEnv = Object.entries(devVerifierEnv(clients, stateAddress))
      .map(([name, value]) => `${name}=${value.startsWith('/') ? local(value) : value}`)
      .join(' ');
    const modelName = devModelName(process.env);
    console.log(`
export KUBECONFIG=${admin} PATH=${defaultBinDir}:$PATH    # then: kubectl get conv
pods (the planes and the harnesses): kubectl get pods -A; their logs under ${local(join(devDir, 'node', 'pods'))}

The public API:    ${apiUrl}   (docs/api.md)
Conversation hello: ${uid}   (${local(conversationFile)}; it answers with ${modelName})
Signed in as:      ${devIdentity} (admin); session token in ${local(tokenFile)}

Talk to it (from the repository root):
  export POLYCHROME_TOKEN=$(cat ${local(tokenFile)})
  alias polychrome="$PWD/bin/polychrome.js"
  polychrome stream ${uid}                  # in another terminal; Ctrl-C stops it
  polychrome send ${uid} "What is 6 * 7?"   # the calculator waits for approval:
  polychrome approve ${uid} <request-id>    #   the request id send printed
  curl -sS -X POST ${apiUrl}/v1/conversations/${uid}/messages \\
    -H "Authorization: Bearer $POLYCHROME_TOKEN" -H 'Content-Type: application/json' \\
    -d '{"text": "hello"}'
  polychrome transcript ${uid}
  ${verifierEnv} \\
    polychrome state verify ${partitionOf(uid)}

By name, under RBAC, through kube-apiserver (after the export line above; docs/kubectl.md):
  kubectl polychrome send hello -n ${namespace} "What is 6 * 7?"
  kubectl polychrome logs hello -n ${namespace} -f
  kubectl polychrome transcript hello -n ${namespace}
  kubectl polychrome dashboard -n ${namespace}   # the forensics UI (docs/ui.md)

stop: make dev-down (everything is kept for the next make dev); start over: make dev-reset`);
    if (withSample !== undefined) {
      console.log(`${sampleHelp(withSample)}
  polychrome stream ${sampleUid ?? ''}   # the same stream through the public API`);
    }
  } catch (err: unknown) {
    console.error(`dev: ${err instanceof Error ? err.message : String(err)}`);
    console.error(
      `dev: processes are left running for inspection; logs in ${devDir}; make dev-down stops them`,
    );
    throw err;
  }
}

async function down(): Promise<void> {
  if (existsSync(stateFile)) {
    const raw: unknown = JSON.parse(await readFile(stateFile, 'utf8'));
    const processes: unknown[] = Array.isArray(raw) ? raw : [];
    // Last started first. The local node stops its pods (the planes, the harnesses) with
    // SIGTERM, as a node being drained would; their objects and volumes stay for next time.
    for (const proc of [...processes].reverse()) {
      const pid: unknown =
        typeof proc === 'object' && proc !== null ? Reflect.get(proc, 'pid') : undefined;
      if (typeof pid === 'number') await stopPid(pid, 40_000);
    }
    await rm(stateFile, { force: true });
  }
  if (existsSync(join(clusterDir, 'state.json')))
    await (await LocalCluster.attach(clusterDir)).stop();
  console.log('dev: stopped; make dev starts again from here, make dev-reset starts over');
}

/** Stops everything and deletes what `up` keeps across runs. */
async function reset(): Promise<void> {
  await down();
  // state-pki and harness-pki: what an earlier make dev made its Secrets from.
  for (const dir of [
    clusterDir,
    devDir,
    join(localDir, 'kube-api-pki'),
    join(localDir, 'state-pki'),
    join(localDir, 'harness-pki'),
  ]) {
    await rm(dir, { recursive: true, force: true });
  }
  console.log('dev: the cluster, the journals, the records and the keys are deleted');
}

const command = process.argv[2];
(command === 'up'
  ? up(process.argv.slice(3))
  : command === 'down'
    ? down()
    : command === 'reset'
      ? reset()
      : Promise.reject(new Error('usage: dev.ts up [--sample panel|triage] | down | reset'))
).catch((err: unknown) => {
  if (!(err instanceof Error && err.message.startsWith('dev:')))
    console.error(err instanceof Error ? err.message : err);
  process.exit(1);
});
