/**
 * `make dev`: the whole system on this machine, the way a cluster runs it.
 *
 *   tsx hack/dev.ts up     local control plane (etcd, kube-apiserver, kube-controller-manager,
 *                          agent-sandbox), the state plane, hack's local node (harness pods
 *                          run as local processes), the control plane as its least-privilege
 *                          ServiceAccount identity with its public API on 127.0.0.1:8080
 *                          and its Kubernetes door (api.polychrome.dev, registered with
 *                          kube-apiserver: kubectl reaches it by Conversation name);
 *                          then the Conversation hack/dev/conversation-hello.yaml, until
 *                          Ready; then a session token for the admin persona dev:you in
 *                          .local/dev/token, and the commands that talk to the conversation
 *   tsx hack/dev.ts down   stop all of it
 *
 * Everything runs in the background; state, logs and certificates live under .local/.
 * The harness uses Claude when ANTHROPIC_API_KEY is set, the scripted demo model otherwise.
 */
import { CustomObjectsApi } from '@kubernetes/client-node';
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import { join, relative } from 'node:path';
import { devCliEnv, devControlPlaneEnv, devStateEnv, ensureDevCerts } from './lib/dev-certs';
import { mintDevToken, PersonaRole, writeDevToken } from './lib/dev-token';
import {
  applyHarnessSecret,
  ensureApprovalKey,
  HARNESS_IMAGE_PATTERN,
  harnessSourceCommand,
  writeHarnessToken,
} from './lib/harness-config';
import { defaultBinDir, defaultCrdDirs, LocalCluster, repoRoot } from './lib/local-cluster';
import { freePort, isAlive, pollUntil, startProcess, stopPid } from './lib/processes';
import { applyKubeDoorRbac, ensureDoorCertificate, registerKubeDoor } from './lib/kube-door';

const localDir = join(repoRoot, '.local');
const clusterDir = join(localDir, 'cluster');
const devDir = join(localDir, 'dev');
const stateFile = join(devDir, 'processes.json');
const namespace = 'default';
const serviceAccountUser = 'system:serviceaccount:polychrome-system:polychrome-control-plane';
const harnessCommand = JSON.stringify(harnessSourceCommand('node'));
/** The public API, where the CLI looks by default (POLYCHROME_API_URL). */
const apiHost = '127.0.0.1';
const apiPort = 8080;
const apiUrl = `http://${apiHost}:${apiPort}`;
const stateAddress = 'localhost:7443';
/** The Kubernetes door's listener, on loopback; kube-apiserver proxies to it. */
const kubeDoorPort = 8444;
/** The admin persona `make dev` mints a session token for. */
const devIdentity = 'dev:you';
const tokenFile = join(devDir, 'token');
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

async function waitReady(proc: DevProcess, port: number): Promise<void> {
  await pollUntil(
    `${proc.name} /readyz on port ${port}`,
    async () => {
      if (!isAlive(proc.pid)) throw new Error(`${proc.name} exited; see ${proc.log}`);
      return (await fetch(`http://127.0.0.1:${port}/readyz`)).ok ? true : undefined;
    },
    { timeoutMs: 90_000, intervalMs: 250 },
  );
}

/**
 * `kubectl polychrome` from this checkout: the plugin and its completion linked into the
 * directory the printed `export PATH=...` puts first (docs/kubectl.md, "Install").
 */
async function linkKubectlPlugin(): Promise<void> {
  await mkdir(defaultBinDir, { recursive: true });
  for (const name of ['kubectl-polychrome', 'kubectl_complete-polychrome']) {
    const link = join(defaultBinDir, name);
    await rm(link, { force: true });
    await symlink(join(repoRoot, 'bin', `${name}.js`), link);
  }
}

async function up(): Promise<void> {
  await mkdir(devDir, { recursive: true });
  if (existsSync(stateFile)) await down();
  const processes: DevProcess[] = [];
  const save = (): Promise<void> => writeFile(stateFile, JSON.stringify(processes, null, 2) + '\n');
  try {
    await assertApiPortFree();
    const cluster = await ensureCluster();
    const admin = cluster.kubeconfigPath;

    // The state plane, over mutual TLS with the dev CA.
    const certs = await ensureDevCerts(join(localDir, 'state-pki'));
    const stateHealth = await freePort();
    const state = start('state-plane', ['state/main.ts'], {
      ...devStateEnv(certs, join(devDir, 'state-data')),
      STATE_LISTEN_HOST: '127.0.0.1',
      STATE_PORT: stateAddress.split(':')[1] ?? '7443',
      STATE_HEALTH_PORT: String(stateHealth),
    });
    processes.push(state);
    await save();
    await waitReady(state, stateHealth);

    // The Polychrome base (namespace, CRD, RBAC, RuntimeClass), then the control plane's own
    // identity. The Kubernetes door's objects come from config/kube-api below, registered for
    // the control plane's process on loopback rather than the Deployment's pods (config/default
    // would point its APIService at pods that never run here).
    kubectl(admin, ['apply', '--server-side', '-k', join(repoRoot, 'config', 'without-kube-api')]);
    await applyKubeDoorRbac(admin);
    const door = await ensureDoorCertificate(join(localDir, 'kube-api-pki'));
    const operatorKubeconfig = await cluster.mintUser(serviceAccountUser, [
      'system:serviceaccounts',
      'system:serviceaccounts:polychrome-system',
    ]);

    // Harness pods become local processes on their own loopback addresses.
    processes.push(
      start(
        'local-node',
        [
          'hack/local-node.ts',
          '--kubeconfig',
          admin,
          '--state-dir',
          join(devDir, 'node'),
          // Conversations' namespace only: the state plane runs as a process here, not as
          // the StatefulSet the base declares.
          '--namespace',
          namespace,
          '--image',
          `${HARNESS_IMAGE_PATTERN}=${harnessCommand}`,
        ],
        {},
      ),
    );
    await save();

    // What the sandbox template reads: the bearer token, the approval key, Claude's key.
    // The control plane reads the same token and the approval private key from files.
    const approvalKey = await ensureApprovalKey(join(devDir, 'approval-key.pem'));
    const harnessTokenFile = join(devDir, 'harness-token');
    await applyHarnessSecret(cluster.kubeConfig(), namespace, {
      token: await writeHarnessToken(harnessTokenFile),
      approvalPublicKey: approvalKey.publicKeyHex,
      ...(process.env.ANTHROPIC_API_KEY ? { anthropicApiKey: process.env.ANTHROPIC_API_KEY } : {}),
    });
    kubectl(admin, [
      'apply',
      '--server-side',
      '-n',
      namespace,
      '-k',
      join(repoRoot, 'hack', 'dev', 'sandbox'),
    ]);

    // The control plane, as the ServiceAccount config/rbac grants.
    const operatorHealth = await freePort();
    const operator = start('control-plane', ['operator/main.ts'], {
      POLYCHROME_IDENTITY: 'polychrome-control-plane-dev-0',
      POLYCHROME_KUBECONFIG: operatorKubeconfig,
      ...devControlPlaneEnv(certs, stateAddress),
      POLYCHROME_HEALTH_HOST: '127.0.0.1',
      POLYCHROME_HEALTH_PORT: String(operatorHealth),
      // The public API (loopback only: it is the dev machine's) and turns.
      POLYCHROME_API_HOST: apiHost,
      POLYCHROME_API_PORT: String(apiPort),
      // One replica: nothing is forwarded, but its peer listener (mutual TLS) stays on
      // loopback rather than on every address at 8443.
      POLYCHROME_PEER_HOST: '127.0.0.1',
      POLYCHROME_PEER_PORT: String(await freePort()),
      POLYCHROME_HARNESS_TOKEN_FILE: harnessTokenFile,
      POLYCHROME_APPROVAL_KEY_FILE: approvalKey.privateKeyPath,
      POLYCHROME_NEW_CONVERSATION_NAMESPACE: namespace,
      // The Kubernetes door (docs/kube-api.md), on loopback.
      POLYCHROME_KUBE_API_CERT_FILE: door.certPath,
      POLYCHROME_KUBE_API_KEY_FILE: door.keyPath,
      POLYCHROME_KUBE_API_HOST: '127.0.0.1',
      POLYCHROME_KUBE_API_PORT: String(kubeDoorPort),
    });
    processes.push(operator);
    await save();
    await waitReady(operator, operatorHealth);
    await waitApi(operator);
    await registerKubeDoor(cluster.kubeConfig(), { port: kubeDoorPort, caPem: door.caPem });
    await linkKubectlPlugin();

    kubectl(admin, ['apply', '-n', namespace, '-f', conversationFile]);
    const objects = cluster.kubeConfig().makeApiClient(CustomObjectsApi);
    let uid = '';
    const endpoint = await pollUntil(
      'Conversation hello to be Ready with a running harness',
      async () => {
        const obj: unknown = await objects.getNamespacedCustomObject({
          group: 'polychrome.dev',
          version: 'v1alpha1',
          plural: 'conversations',
          namespace,
          name: 'hello',
        });
        const status: unknown =
          typeof obj === 'object' && obj !== null ? Reflect.get(obj, 'status') : undefined;
        const sandbox: unknown =
          typeof status === 'object' && status !== null
            ? Reflect.get(status, 'sandbox')
            : undefined;
        const phase: unknown =
          typeof status === 'object' && status !== null ? Reflect.get(status, 'phase') : undefined;
        const at: unknown =
          typeof sandbox === 'object' && sandbox !== null
            ? Reflect.get(sandbox, 'endpoint')
            : undefined;
        const metadata: unknown =
          typeof obj === 'object' && obj !== null ? Reflect.get(obj, 'metadata') : undefined;
        const id: unknown =
          typeof metadata === 'object' && metadata !== null
            ? Reflect.get(metadata, 'uid')
            : undefined;
        uid = typeof id === 'string' ? id : '';
        return phase === 'Ready' && typeof at === 'string' ? at : undefined;
      },
      { timeoutMs: 180_000, intervalMs: 500 },
    );
    // The harness process itself answers on the pod's address.
    const host = endpoint.split(':')[0] ?? '';
    const harnessReady = await fetch(`http://${host}:9090/readyz`);
    console.log(
      `\ndev: harness for conversation hello is ${harnessReady.ok ? 'ready' : 'NOT ready'} at ${endpoint}`,
    );
    process.stdout.write(kubectl(admin, ['get', 'conversations', '-n', namespace]));

    // A session token for an admin persona, as a sign-in edge would issue one.
    await writeDevToken(
      tokenFile,
      await mintDevToken({
        certs,
        address: stateAddress,
        identity: devIdentity,
        roles: [PersonaRole.Admin],
      }),
    );
    const verifierEnv = Object.entries(devCliEnv(certs, stateAddress))
      .map(
        ([name, value]) => `${name}=${name === 'POLYCHROME_STATE_ADDRESS' ? value : local(value)}`,
      )
      .join(' ');
    const model = process.env.ANTHROPIC_API_KEY
      ? 'Claude (ANTHROPIC_API_KEY is set)'
      : 'the scripted demo model (harness/model/demo-script.yaml; set ANTHROPIC_API_KEY for Claude)';
    console.log(`
export KUBECONFIG=${admin} PATH=${defaultBinDir}:$PATH    # then: kubectl get conv
logs: ${devDir}/*.log, harness pods under ${join(devDir, 'node')}

The public API:    ${apiUrl}   (docs/api.md)
Conversation hello: ${uid}   (${local(conversationFile)}; it answers with ${model})
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
    polychrome state verify conv-${uid}

By name, under RBAC, through kube-apiserver (after the export line above; docs/kubectl.md):
  kubectl polychrome send hello "What is 6 * 7?"
  kubectl polychrome logs hello -f
  kubectl polychrome transcript hello
  kubectl polychrome dashboard               # the forensics UI (docs/ui.md)

stop: make dev-down`);
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
    // Last started first: the control plane, then the node (it stops the harnesses), the state plane.
    for (const proc of [...processes].reverse()) {
      const pid: unknown =
        typeof proc === 'object' && proc !== null ? Reflect.get(proc, 'pid') : undefined;
      if (typeof pid === 'number') await stopPid(pid, 15_000);
    }
    await rm(stateFile, { force: true });
  }
  if (existsSync(join(clusterDir, 'state.json')))
    await (await LocalCluster.attach(clusterDir)).stop();
  console.log('dev: stopped');
}

const command = process.argv[2];
(command === 'up'
  ? up()
  : command === 'down'
    ? down()
    : Promise.reject(new Error('usage: dev.ts up|down'))
).catch((err: unknown) => {
  if (!(err instanceof Error && err.message.startsWith('dev:')))
    console.error(err instanceof Error ? err.message : err);
  process.exit(1);
});
