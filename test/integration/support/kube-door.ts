/**
 * The Kubernetes door behind the shared cluster's real kube-apiserver, as
 * test/integration/kube-api.test.ts and the UI's browser test use it: the APIService and
 * RBAC from config/kube-api, the control plane's door as its own least-privilege identity
 * (SubjectAccessReviews and the front-proxy ConfigMap), the real turn coordinator behind
 * it (the public API's test stack), the real state plane's records for sessions.
 */
import { execFile, execFileSync } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import {
  ApiregistrationV1Api,
  CoreV1Api,
  RbacAuthorizationV1Api,
  type KubeConfig,
} from '@kubernetes/client-node';
import pino from 'pino';
import { parse, parseAllDocuments, stringify } from 'yaml';

import { RecordsClient } from '../../../common/records-client';
import { loadStateClientTls } from '../../../common/state-client';
import { ensureDevCerts } from '../../../hack/lib/dev-certs';
import { defaultBinDir, repoRoot, type LocalCluster } from '../../../hack/lib/local-cluster';
import { DevCertificateAuthority, type CertFiles } from '../../../hack/lib/pki';
import { pollUntil } from '../../../hack/lib/processes';
import { KubeDoor } from '../../../operator/kube-api/kube-door';
import { kubeDoorPorts } from '../../../operator/kube-api/kube-door-ports';
import { KubeSessions } from '../../../operator/kube-api/kube-sessions';
import {
  startApi,
  type StartApiOptions,
  type TestApi,
} from '../../../operator/public-api/testdata/fixtures';
import type { UiAssets } from '../../../operator/ui/ui-assets';
import { freshNamespace, kubeConfig, sharedCluster } from './kube';
import { StatePlane } from './state-plane';

const serviceAccountUser = 'system:serviceaccount:polychrome-system:polychrome-control-plane';

export interface Kubectl {
  readonly ok: boolean;
  readonly stdout: string;
  readonly stderr: string;
}

export async function kubectl(
  kubeconfig: string,
  args: readonly string[],
  input?: string,
): Promise<Kubectl> {
  const child = execFile(join(defaultBinDir, 'kubectl'), [`--kubeconfig=${kubeconfig}`, ...args], {
    encoding: 'utf8',
    timeout: 60_000,
  });
  if (input !== undefined) child.stdin?.end(input);
  return await new Promise<Kubectl>((resolve) => {
    let stdout = '';
    let stderr = '';
    child.stdout?.on('data', (chunk: string) => (stdout += chunk));
    child.stderr?.on('data', (chunk: string) => (stderr += chunk));
    child.once('exit', (code) => resolve({ ok: code === 0, stdout, stderr }));
  });
}

/**
 * config/kube-api's RBAC as kustomize puts it in polychrome-system: its ServiceAccount
 * subjects name no namespace, config/default's `namespace:` fills it in.
 */
export function inPolychromeSystem(yaml: string): string {
  return parseAllDocuments(yaml)
    .map((d) => d.toJS() as { subjects?: { kind: string; namespace?: string }[] })
    .map((o) => ({
      ...o,
      ...(o.subjects === undefined
        ? {}
        : {
            subjects: o.subjects.map((subject) =>
              subject.kind === 'ServiceAccount'
                ? { ...subject, namespace: 'polychrome-system' }
                : subject,
            ),
          }),
    }))
    .map((o) => stringify(o))
    .join('---\n');
}

/** Applies YAML documents as the cluster admin, server-side. */
export function applyYaml(adminConfig: string, yaml: string): void {
  execFileSync(
    join(defaultBinDir, 'kubectl'),
    [`--kubeconfig=${adminConfig}`, 'apply', '--server-side', '-f', '-'],
    { input: yaml, encoding: 'utf8' },
  );
}

/** A running door: everything a test reaches for. */
export interface KubeDoorStack {
  readonly cluster: LocalCluster;
  /** The cluster admin's kubeconfig path, and a client for it. */
  readonly admin: string;
  readonly adminConfig: KubeConfig;
  readonly dir: string;
  readonly ns: { name: string; dispose: () => Promise<void> };
  readonly api: TestApi;
  readonly door: KubeDoor;
  readonly kubePort: number;
  /** The CA the APIService trusts for the door's serving certificate (PEM). */
  readonly servingCa: string;
  /** kube-apiserver's own front-proxy client certificate, and a look-alike from another CA. */
  readonly proxyClient: CertFiles;
  readonly strangerProxy: CertFiles;
  readonly state: StatePlane;
  readonly records: RecordsClient;
  readonly asControlPlane: KubeConfig;
  /** Binds `user` to the ClusterRole `role` in the namespace. */
  bind(user: string, role: string): Promise<void>;
  /** Removes the APIService and stops everything; the namespace goes too. */
  close(): Promise<void>;
}

/**
 * Starts the door in a fresh namespace `prefix-xxxxxx` and registers it as the APIService
 * `v1alpha1.api.polychrome.dev`, waiting until kube-apiserver says it is Available. One
 * stack at a time per cluster: the APIService is cluster-wide.
 */
export async function startKubeDoor(
  prefix: string,
  options: Omit<StartApiOptions, 'kube'> & { readonly kube?: { readonly ui?: UiAssets } } = {},
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
  applyYaml(
    admin,
    inPolychromeSystem(
      await readFile(join(repoRoot, 'config', 'kube-api', 'auth-delegation.yaml'), 'utf8'),
    ),
  );
  applyYaml(
    admin,
    await readFile(join(repoRoot, 'config', 'kube-api', 'cluster-roles.yaml'), 'utf8'),
  );
  const asControlPlane = await kubeConfig(
    await cluster.mintUser(serviceAccountUser, [
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
  // What an attacker might hold: a certificate named like the proxy from another CA.
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
  const proxyClient: CertFiles = {
    certPath: join(cluster.state.dir, 'pki', 'front-proxy-client.crt'),
    keyPath: join(cluster.state.dir, 'pki', 'front-proxy-client.key'),
  };

  // The real state plane's records, reached as the control plane reaches them (its
  // writer certificate): the sessions resource mints through them.
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
    ...options,
    kube: {
      host: '127.0.0.1',
      port: 0,
      cert: await readFile(serving.certPath, 'utf8'),
      key: await readFile(serving.keyPath, 'utf8'),
      door,
      sessions: new KubeSessions(records, (user, target, signal) =>
        door.admitCluster(user, target, signal),
      ),
      ...(options.kube?.ui === undefined ? {} : { ui: options.kube.ui }),
    },
  });
  stack.api = api;
  const kubePort = api.server.kubeAddress().port;
  // The APIService, routed on loopback: an ExternalName Service (EndpointSlices refuse 127/8).
  const apiService = parse(
    await readFile(join(repoRoot, 'config', 'kube-api', 'api-service.yaml'), 'utf8'),
  ) as Record<string, unknown>;
  await core.createNamespacedService({
    namespace: ns.name,
    body: {
      metadata: { name: 'polychrome-kube-api' },
      spec: {
        type: 'ExternalName',
        externalName: 'localhost',
        ports: [{ name: 'https-kube', port: kubePort }],
      },
    },
  });
  const registration = adminConfig.makeApiClient(ApiregistrationV1Api);
  await registration
    .deleteAPIService({ name: 'v1alpha1.api.polychrome.dev' })
    .catch(() => undefined);
  await registration.createAPIService({
    body: {
      ...apiService,
      spec: {
        ...(apiService.spec as Record<string, unknown>),
        service: { name: 'polychrome-kube-api', namespace: ns.name, port: kubePort },
        caBundle: Buffer.from(servingCa).toString('base64'),
      },
    } as never,
  });
  await pollUntil(
    'the APIService v1alpha1.api.polychrome.dev to be Available',
    async () => {
      const current = await registration.readAPIService({ name: 'v1alpha1.api.polychrome.dev' });
      return current.status?.conditions?.some(
        (c) => c.type === 'Available' && c.status === 'True',
      ) === true
        ? true
        : undefined;
    },
    { timeoutMs: 60_000, intervalMs: 250 },
  );

  const rbac = adminConfig.makeApiClient(RbacAuthorizationV1Api);
  return {
    cluster,
    admin,
    adminConfig,
    dir,
    ns,
    api,
    door,
    kubePort,
    servingCa,
    proxyClient,
    strangerProxy,
    state,
    records,
    asControlPlane,
    async bind(user, role) {
      await rbac.createNamespacedRoleBinding({
        namespace: ns.name,
        body: {
          metadata: { name: `${user}-${role}` },
          roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: role },
          subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'User', name: user }],
        },
      });
    },
    async close() {
      await adminConfig
        .makeApiClient(ApiregistrationV1Api)
        .deleteAPIService({ name: 'v1alpha1.api.polychrome.dev' })
        .catch(() => undefined);
      await api.close();
      records.close();
      await state.kill();
      await ns.dispose();
      await rm(dir, { recursive: true, force: true });
    },
  };
}
