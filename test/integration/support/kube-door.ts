/**
 * The Kubernetes door served through the shared cluster's real kube-apiserver, for the
 * tests that drive it (kube-api.test.ts, kubectl-plugin.test.ts): config/kube-api's
 * APIService and RBAC, the control plane's door as its own least-privilege identity, the
 * real turn coordinator behind it (the public API's test stack), the real state plane's
 * records for sessions, and users with their own client certificates:
 *
 * - alice: RoleBinding to `edit` in the namespace (aggregates polychrome-conversation-user);
 * - dave: RoleBinding to `admin` (aggregates polychrome-conversation-admin);
 * - bob: nothing;
 * - carol: ClusterRoleBinding to polychrome-session-admin, nothing else.
 *
 * The APIService `v1alpha1.api.polychrome.dev` is cluster-wide: one stack at a time.
 */
import {
  type KubeConfig,
  AuthorizationV1Api,
  CoreV1Api,
  RbacAuthorizationV1Api,
} from '@kubernetes/client-node';
import { execFile, spawn } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { request as httpsRequest, type RequestOptions } from 'node:https';
import {
  createConnection,
  createServer,
  type AddressInfo,
  type Server,
  type Socket,
} from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { RecordsClient } from '../../../common/records-client';
import { loadStateClientTls } from '../../../common/state-channel';
import { ensureDevCerts } from '../../../hack/lib/dev-certs';
import { defaultBinDir } from '../../../hack/lib/paths';
import { DevCertificateAuthority, type CertFiles } from '../../../hack/lib/pki';
import { pollUntil } from '../../../hack/lib/processes';
import {
  applyKubeDoorRbac,
  registerKubeDoor,
  unregisterKubeDoor,
} from '../../../hack/lib/kube-door';
import { KubeDoor } from '../../../operator/kube-api/kube-door';
import { kubeDoorPorts } from '../../../operator/kube-api/kube-door-ports';
import { kubeRecordsResources } from '../../../operator/kube-api/kube-records-resources';
import { PersonaPaymentPolicies } from '../../../operator/turns/persona-payment-policy';
import type { UiAssets } from '../../../operator/ui/ui-assets';
import { startApi, type StartApiOptions, type TestApi } from '../../support/api-fixtures';
import { freshNamespace, kubeConfig, sharedCluster } from './kube';
import { StatePlane } from './state-plane';

export const SERVICE_ACCOUNT_USER =
  'system:serviceaccount:polychrome-system:polychrome-control-plane';
/** The door's group, as kube-apiserver serves it. */
export const KUBE_API_PATH = '/apis/api.polychrome.dev/v1alpha1';

export interface Kubectl {
  readonly ok: boolean;
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

/**
 * Runs the real kubectl as the user of `kubeconfig` (`--kubeconfig` first; pass `null` to
 * leave it out, e.g. to test KUBECONFIG), with `input` on stdin.
 */
export async function kubectl(
  kubeconfig: string | null,
  args: readonly string[],
  options: { input?: string; env?: NodeJS.ProcessEnv; timeoutMs?: number } = {},
): Promise<Kubectl> {
  const child = execFile(
    join(defaultBinDir, 'kubectl'),
    [...(kubeconfig === null ? [] : [`--kubeconfig=${kubeconfig}`]), ...args],
    { encoding: 'utf8', timeout: options.timeoutMs ?? 60_000, env: options.env ?? process.env },
  );
  if (options.input !== undefined) child.stdin?.end(options.input);
  return await new Promise<Kubectl>((resolve) => {
    let stdout = '';
    let stderr = '';
    child.stdout?.on('data', (chunk: string) => (stdout += chunk));
    child.stderr?.on('data', (chunk: string) => (stderr += chunk));
    child.once('exit', (code) => resolve({ ok: code === 0, code, stdout, stderr }));
  });
}

/** What kube-apiserver answered a {@link kubeJson} request. */
export interface KubeAnswer {
  readonly ok: boolean;
  readonly status: number;
  /** The parsed body (a Kubernetes `Status` for an error). */
  readonly json: unknown;
  /** The Status message of an error answer ('' otherwise), as kubectl prints it. */
  readonly message: string;
}

/**
 * A POST or DELETE to kube-apiserver as the user of `kubeconfig` (their own client
 * certificate), declared `application/json` as every client must (`kubectl create --raw`
 * declares nothing and is refused: docs/kube-api.md), with `body` as JSON if given.
 */
export async function kubeJson(
  kubeconfig: string,
  method: 'POST' | 'DELETE',
  path: string,
  body?: unknown,
): Promise<KubeAnswer> {
  const kc = await kubeConfig(kubeconfig);
  const server = new URL(kc.getCurrentCluster()?.server ?? '');
  const options: RequestOptions = {
    host: server.hostname,
    port: server.port,
    method,
    path,
    headers: { 'content-type': 'application/json', accept: 'application/json' },
  };
  await kc.applyToHTTPSOptions(options);
  const answer = await new Promise<{ status: number; text: string }>((resolve, reject) => {
    const req = httpsRequest(options, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (text += chunk));
      res.once('end', () => resolve({ status: res.statusCode ?? 0, text }));
    });
    req.once('error', reject);
    req.setTimeout(60_000, () => req.destroy(new Error(`${method} ${path}: no answer in 60 s`)));
    req.end(body === undefined ? undefined : JSON.stringify(body));
  });
  const json: unknown = JSON.parse(answer.text);
  const ok = answer.status >= 200 && answer.status < 300;
  const message: unknown =
    !ok && typeof json === 'object' && json !== null ? Reflect.get(json, 'message') : '';
  return { ok, status: answer.status, json, message: typeof message === 'string' ? message : '' };
}

/**
 * The real `kubectl proxy` as the user of `kubeconfig`, on a free loopback port: what a
 * web page the user visits can reach. close() stops it.
 */
export async function kubectlProxy(
  kubeconfig: string,
): Promise<{ readonly base: string; close(): Promise<void> }> {
  const child = spawn(
    join(defaultBinDir, 'kubectl'),
    [`--kubeconfig=${kubeconfig}`, 'proxy', '--port=0', '--address=127.0.0.1'],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  let out = '';
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => (out += chunk));
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => (out += chunk));
  try {
    const port = await pollUntil(
      'kubectl proxy to print "Starting to serve on 127.0.0.1:PORT"',
      () => Promise.resolve(/Starting to serve on 127\.0\.0\.1:(\d+)/u.exec(out)?.[1]),
      { timeoutMs: 30_000, intervalMs: 100 },
    );
    return {
      base: `http://127.0.0.1:${port}`,
      close: async () => {
        child.kill('SIGTERM');
        await exited;
      },
    };
  } catch (error) {
    child.kill('SIGKILL');
    throw new Error(`kubectl proxy did not start: ${out}`, { cause: error });
  }
}

/** An HTTPS request straight to the door's port, as an attacker on the network would send it. */
export async function direct(
  port: number,
  path: string,
  options: {
    cert?: CertFiles;
    headers?: Record<string, string>;
    method?: string;
    body?: string;
    ca: string;
  },
): Promise<{ status: number; body: unknown }> {
  const tls =
    options.cert === undefined
      ? {}
      : { cert: await readFile(options.cert.certPath), key: await readFile(options.cert.keyPath) };
  return await new Promise((resolve, reject) => {
    const req = httpsRequest(
      {
        host: '127.0.0.1',
        port,
        path,
        method: options.method ?? 'GET',
        ca: options.ca,
        servername: 'localhost',
        headers: { 'content-type': 'application/json', ...options.headers },
        ...tls,
      },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => (text += chunk));
        res.on('end', () =>
          resolve({ status: res.statusCode ?? 0, body: JSON.parse(text) as unknown }),
        );
      },
    );
    req.once('error', reject);
    req.end(options.body);
  });
}

/** A running door behind kube-apiserver, and everything a test drives or inspects. */
export interface KubeDoorStack {
  /** The cluster admin's kubeconfig file. */
  readonly admin: string;
  readonly api: TestApi;
  readonly door: KubeDoor;
  /** A private directory, removed by close(). */
  readonly dir: string;
  readonly namespace: string;
  /** The CA of the door's serving certificate (PEM). */
  readonly servingCa: string;
  readonly kubePort: number;
  /** Kubeconfig files of the users (see the file comment). */
  readonly users: {
    readonly alice: string;
    readonly bob: string;
    readonly dave: string;
    readonly carol: string;
  };
  /** kube-apiserver's real front-proxy client certificate. */
  readonly proxyClient: CertFiles;
  /** A certificate named `front-proxy-client` from another CA. */
  readonly strangerProxy: CertFiles;
  readonly records: RecordsClient;
  /** The same records with the records-admin certificate: every Records RPC. */
  readonly recordsAdmin: RecordsClient;
  /** The state plane process behind `records` (to stop it and touch its records on disk). */
  readonly state: StatePlane;
  readonly asControlPlane: KubeConfig;
  /**
   * Cuts every connection between kube-apiserver and the door (a loopback TCP relay sits
   * between them), as a network fault or a replica going away would. @returns how many.
   */
  dropConnections(): number;
  /**
   * Takes the door off the network (the relay stops listening and cuts what is open), as
   * every control-plane pod going down would; `up` puts it back on the same port.
   */
  doorDown(): Promise<void>;
  doorUp(): Promise<void>;
  /** Adds the door's Conversation `name` (its uid returned), owned by `owner`. */
  addConversation(name: string, owner?: string): string;
  /** kube-apiserver's answer for `user` on `verb` `conversations/<subresource>` of `name`. */
  allowed(user: string, verb: string, subresource: string, name?: string): Promise<boolean>;
  close(): Promise<void>;
}

async function bindUsers(adminConfig: KubeConfig, namespace: string): Promise<void> {
  const rbac = adminConfig.makeApiClient(RbacAuthorizationV1Api);
  for (const [user, role] of [
    ['alice', 'edit'],
    ['dave', 'admin'],
  ] as const) {
    await rbac.createNamespacedRoleBinding({
      namespace,
      body: {
        metadata: { name: `${user}-${role}` },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: role },
        subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'User', name: user }],
      },
    });
  }
  await rbac
    .deleteClusterRoleBinding({ name: `${namespace}-carol-sessions` })
    .catch(() => undefined);
  await rbac.createClusterRoleBinding({
    body: {
      metadata: { name: `${namespace}-carol-sessions` },
      roleRef: {
        apiGroup: 'rbac.authorization.k8s.io',
        kind: 'ClusterRole',
        name: 'polychrome-session-admin',
      },
      subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'User', name: 'carol' }],
    },
  });
}

/** A TCP relay to `port` on loopback, whose connections can be cut, and which can stop listening. */
async function startRelay(port: number): Promise<{
  server: Server;
  port: number;
  drop(): number;
  down(): Promise<void>;
  up(): Promise<void>;
}> {
  const open = new Set<Socket>();
  const server = createServer((client) => {
    const upstream = createConnection({ host: '127.0.0.1', port });
    const pair = [client, upstream];
    for (const socket of pair) {
      open.add(socket);
      socket.once('close', () => {
        open.delete(socket);
        pair.forEach((s) => s.destroy());
      });
      socket.on('error', () => pair.forEach((s) => s.destroy()));
    }
    client.pipe(upstream);
    upstream.pipe(client);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const listening = (server.address() as AddressInfo).port;
  const drop = (): number => {
    const count = open.size;
    for (const socket of [...open]) socket.destroy();
    return count;
  };
  return {
    server,
    port: listening,
    drop,
    down: async () => {
      const closed = new Promise((resolve) => server.close(resolve));
      drop();
      await closed;
    },
    up: () => new Promise<void>((resolve) => server.listen(listening, '127.0.0.1', resolve)),
  };
}

/**
 * Starts the stack in a fresh namespace named after `prefix`; `api` options go to the
 * public API's test stack (the scripted model's replies, for one).
 */
export async function startKubeDoorStack(
  prefix: string,
  apiOptions: StartApiOptions = {},
  listener: { readonly ui?: UiAssets } = {},
): Promise<KubeDoorStack> {
  const cluster = await sharedCluster();
  const admin = cluster.kubeconfigPath;
  const adminConfig = await kubeConfig();
  const dir = await mkdtemp(join(tmpdir(), `${prefix}-`));
  const ns = await freshNamespace(adminConfig, prefix);
  const core = adminConfig.makeApiClient(CoreV1Api);
  await core
    .createNamespace({ body: { metadata: { name: 'polychrome-system' } } })
    .catch(() => undefined);

  // The control plane's identity and exactly the RBAC config/kube-api grants it.
  await applyKubeDoorRbac(admin);
  const asControlPlane = await kubeConfig(
    await cluster.mintUser(SERVICE_ACCOUNT_USER, [
      'system:serviceaccounts',
      'system:serviceaccounts:polychrome-system',
    ]),
  );

  // The door's serving certificate, for the Service's DNS name, and the CA the APIService trusts.
  const ca = await DevCertificateAuthority.create(
    join(dir, 'pki'),
    'door-ca',
    'polychrome-kube-api-test-ca',
  );
  const serving = await ca.issue({
    name: 'door',
    commonName: 'polychrome-kube-api',
    dnsNames: [`polychrome-kube-api.${ns.name}.svc`, 'localhost'],
    usage: 'server',
  });
  const servingCa = await readFile(ca.certPath, 'utf8');
  const stranger = await DevCertificateAuthority.create(
    join(dir, 'pki'),
    'stranger',
    'not-the-front-proxy-ca',
  );
  const strangerProxy = await stranger.issue({
    name: 'fake-proxy',
    commonName: 'front-proxy-client',
    usage: 'client',
  });
  const proxyClient = {
    certPath: join(cluster.state.dir, 'pki', 'front-proxy-client.crt'),
    keyPath: join(cluster.state.dir, 'pki', 'front-proxy-client.key'),
  };

  // The real state plane's records, reached with the control plane's writer certificate.
  const certs = await ensureDevCerts(join(dir, 'state-pki'));
  const state = await StatePlane.create(certs, join(dir, 'state-data'));
  await state.start();
  const records = new RecordsClient({
    address: state.address,
    tls: await loadStateClientTls({
      ca: certs.ca.certPath,
      cert: certs.controlPlane.certPath,
      key: certs.controlPlane.keyPath,
    }),
    callTimeoutMs: 10_000,
  });
  // What a records administrator reaches (tests set records up and read them back with
  // it); the door itself has only the control plane's certificate.
  const recordsAdmin = new RecordsClient({
    address: state.address,
    tls: await loadStateClientTls({
      ca: certs.ca.certPath,
      cert: certs.recordsAdmin.certPath,
      key: certs.recordsAdmin.keyPath,
    }),
    callTimeoutMs: 10_000,
  });

  // The door looks names up in the stack's Conversations, which exist once it started.
  const stack: { api?: TestApi } = {};
  const door = new KubeDoor({
    ports: kubeDoorPorts({
      kubeConfig: asControlPlane,
      cachedByName: (namespace, name) => stack.api?.turns.conversations.byName(namespace, name),
    }),
    logger: pino({ level: 'silent' }),
  });
  const api = await startApi({
    // The persona payment policies over the same records, as main.ts gives the API.
    personaPolicies: new PersonaPaymentPolicies(records),
    ...apiOptions,
    // The stack's conversations live in its namespace (unless the test says where it makes
    // them): the harness serves that one.
    harnessNamespace: apiOptions.harnessNamespace ?? ns.name,
    kube: {
      host: '127.0.0.1',
      port: 0,
      cert: await readFile(serving.certPath, 'utf8'),
      key: await readFile(serving.keyPath, 'utf8'),
      door,
      // sessions, personaroles and personapaymentpolicies, as main.ts wires them.
      ...kubeRecordsResources(records, door),
      // The forensics UI's files (test/integration/ui-browser.test.ts).
      ...(listener.ui === undefined ? {} : { ui: listener.ui }),
    },
  });
  stack.api = api;
  const kubePort = api.server.kubeAddress().port;
  const relay = await startRelay(kubePort);
  // As make dev registers it (hack/lib/kube-door.ts), through the relay.
  await registerKubeDoor(adminConfig, { port: relay.port, caPem: servingCa, namespace: ns.name });

  const users = {
    alice: await cluster.mintUser('alice', ['team-a']),
    bob: await cluster.mintUser('bob', ['team-b']),
    dave: await cluster.mintUser('dave', ['team-a']),
    carol: await cluster.mintUser('carol', ['ops']),
  };
  await bindUsers(adminConfig, ns.name);

  const authorization = adminConfig.makeApiClient(AuthorizationV1Api);
  const allowed = async (
    user: string,
    verb: string,
    subresource: string,
    name = 'hello',
  ): Promise<boolean> => {
    const review = await authorization.createSubjectAccessReview({
      body: {
        spec: {
          user,
          groups: ['system:authenticated'],
          resourceAttributes: {
            group: 'api.polychrome.dev',
            resource: 'conversations',
            subresource,
            verb,
            namespace: ns.name,
            name,
          },
        },
      },
    });
    return review.status?.allowed === true;
  };
  // The built-in roles pick the aggregated rules up through kube-controller-manager.
  await pollUntil(
    'dave may delete conversations/approvals and alice may create conversations/messages (aggregated roles)',
    async () =>
      (await allowed('alice', 'create', 'messages')) &&
      (await allowed('dave', 'delete', 'approvals'))
        ? true
        : undefined,
    { timeoutMs: 30_000, intervalMs: 250 },
  );

  return {
    admin,
    api,
    door,
    dir,
    namespace: ns.name,
    servingCa,
    kubePort,
    users,
    proxyClient,
    strangerProxy,
    records,
    recordsAdmin,
    state,
    asControlPlane,
    dropConnections: () => relay.drop(),
    doorDown: () => relay.down(),
    doorUp: () => relay.up(),
    addConversation: (name, owner = 'dev:someone-else') =>
      api.turns.conversations.add({ owner }, { name, namespace: ns.name }).metadata.uid ?? '',
    allowed,
    close: async () => {
      await adminConfig
        .makeApiClient(RbacAuthorizationV1Api)
        .deleteClusterRoleBinding({ name: `${ns.name}-carol-sessions` })
        .catch(() => undefined);
      await unregisterKubeDoor(adminConfig);
      relay.drop();
      await new Promise((resolve) => relay.server.close(resolve));
      await api.close();
      records.close();
      recordsAdmin.close();
      await state.kill();
      await ns.dispose();
      await rm(dir, { recursive: true, force: true });
    },
  };
}
