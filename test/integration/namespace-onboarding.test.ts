/**
 * Namespace onboarding (operator/onboarding) against the real local kube-apiserver, with the
 * agent-sandbox CRDs and controller the shared cluster runs, as exactly the identity the
 * shipped RBAC grants: the provisioner's ServiceAccount with config/rbac's Role in a
 * control-plane namespace of its own and config/cluster's ClusterRole polychrome-onboarding.
 * The provisioner (the real one) makes the source Secrets there first. Then: a label brings
 * config/sandbox and the credentials, its removal takes them away, a relabel brings them
 * back; rotated sources reach the copies; a tenant who may write in their namespace but not
 * label it gets nothing, and a tenant's object of our name is reported and left alone.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import {
  ApiException,
  CoordinationV1Api,
  CoreV1Api,
  EventsV1Api,
  KubernetesObjectApi,
  PatchStrategy,
  setHeaderOptions,
  type KubeConfig,
  type KubernetesObject,
} from '@kubernetes/client-node';
import { execFileSync } from 'node:child_process';
import { connect, createServer, type Server } from 'node:tls';
import { parseAllDocuments } from 'yaml';

import { defaultBinDir, repoRoot } from '../../hack/lib/paths';
import { pollUntil } from '../../hack/lib/processes';
import { SecretName } from '../../operator/provision/catalog';
import { Provisioner, type ProvisionLog } from '../../operator/provision/provisioner';
import { mintCa } from '../../operator/provision/x509-mint';
import { ONBOARDED_LABEL, ONBOARDED_REFS, type ObjectRef } from '../../operator/onboarding/catalog';
import { CONFLICT_REASON } from '../../operator/onboarding/conflict-events';
import type { OnboardingController } from '../../operator/onboarding/controller';
import { NamespaceOnboarder } from '../../operator/onboarding/onboarder';
import { buildOnboarding } from '../../operator/onboarding/start';
import { apiErrorMessage, freshNamespace, kubeConfig, sharedCluster } from './support/kube';

const quiet: ProvisionLog = { info: () => undefined, warn: () => undefined };
/** The operator's warnings, printed when a test fails to help say why. */
const warnings: string[] = [];
const operatorLog: ProvisionLog = {
  info: () => undefined,
  warn: (fields, message) => warnings.push(`${message} ${JSON.stringify(fields)}`),
};
const poll = { timeoutMs: 30_000, intervalMs: 200 };
type Ns = { name: string; dispose: () => Promise<void> };

function kubectl(kubeconfigPath: string, args: readonly string[], input?: string): string {
  return execFileSync(
    `${defaultBinDir}/kubectl`,
    [`--kubeconfig=${kubeconfigPath}`, ...args],
    input === undefined ? { encoding: 'utf8' } : { encoding: 'utf8', input },
  );
}

/** config/default's onboarding and provisioner RBAC, bound to the provisioner of `cp`. */
async function grantOnboarding(cp: string): Promise<KubeConfig> {
  const cluster = await sharedCluster();
  const built = parseAllDocuments(
    kubectl(cluster.kubeconfigPath, ['kustomize', `${repoRoot}/config/default`]),
  ).map((d) => d.toJS() as { kind: string; metadata: Record<string, unknown> });
  const subject = { kind: 'ServiceAccount', name: 'polychrome-provisioner', namespace: cp };
  const picked = built.flatMap((o): object[] => {
    const name = o.metadata['name'];
    if (o.kind === 'ClusterRole' && name === 'polychrome-onboarding') return [o];
    if (o.kind === 'ClusterRoleBinding' && name === 'polychrome-onboarding') {
      return [
        {
          ...o,
          metadata: { ...o.metadata, name: `polychrome-onboarding-${cp}` },
          subjects: [subject],
        },
      ];
    }
    if (name !== 'polychrome-provisioner') return [];
    if (!['Role', 'RoleBinding', 'ServiceAccount'].includes(o.kind)) return [];
    const moved = { ...o, metadata: { ...o.metadata, namespace: cp } };
    return [o.kind === 'RoleBinding' ? { ...moved, subjects: [subject] } : moved];
  });
  expect(picked).toHaveLength(5);
  kubectl(
    cluster.kubeconfigPath,
    ['apply', '--server-side', '-f', '-'],
    picked.map((o) => JSON.stringify(o)).join('\n'),
  );
  const user = `system:serviceaccount:${cp}:polychrome-provisioner`;
  return kubeConfig(
    await cluster.mintUser(user, ['system:serviceaccounts', `system:serviceaccounts:${cp}`]),
  );
}

async function readRef(
  api: KubernetesObjectApi,
  namespace: string,
  ref: ObjectRef,
): Promise<KubernetesObject | undefined> {
  try {
    return await api.read({
      apiVersion: ref.apiVersion,
      kind: ref.kind,
      metadata: { name: ref.name, namespace },
    });
  } catch (err) {
    if (err instanceof ApiException && err.code === 404) return undefined;
    throw err;
  }
}

/** The objects of ours in `namespace`, by `Kind name`. */
async function ours(
  api: KubernetesObjectApi,
  namespace: string,
): Promise<Map<string, KubernetesObject>> {
  const found = new Map<string, KubernetesObject>();
  for (const ref of ONBOARDED_REFS) {
    const obj = await readRef(api, namespace, ref);
    if (obj?.metadata?.labels?.[ONBOARDED_LABEL.key] === ONBOARDED_LABEL.value) {
      found.set(`${ref.kind} ${ref.name}`, obj);
    }
  }
  return found;
}

const ALL = ONBOARDED_REFS.map((r) => `${r.kind} ${r.name}`).sort();

async function labelNamespace(core: CoreV1Api, name: string, value: string | null): Promise<void> {
  await core.patchNamespace(
    { name, body: { metadata: { labels: { 'polychrome.dev/enabled': value } } } },
    setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
  );
}

const dataOf = (obj: KubernetesObject | undefined, key: string): string => {
  const data = (obj as { data?: Record<string, string> } | undefined)?.data ?? {};
  return Buffer.from(data[key] ?? '', 'base64').toString('utf8');
};

/** Whether a TLS client trusting `ca` accepts `cert` served for `serverName`. */
async function handshake(
  cert: string,
  key: string,
  ca: string,
  serverName: string,
): Promise<string> {
  const server: Server = createServer({ cert, key }, (socket) => socket.end());
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  try {
    return await new Promise<string>((resolve) => {
      const socket = connect({ host: '127.0.0.1', port, ca, servername: serverName }, () => {
        socket.destroy();
        resolve('accepted');
      });
      socket.on('error', (err: NodeJS.ErrnoException) =>
        resolve(`refused: ${err.code ?? err.message}`),
      );
    });
  } finally {
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }
}

describe('namespace onboarding on the real API server, as the shipped identity', () => {
  let admin: KubeConfig;
  let core: CoreV1Api;
  let api: KubernetesObjectApi;
  let asOperator: KubeConfig;
  let cp: Ns;
  let controller: OnboardingController;
  const namespaces: Ns[] = [];

  const fresh = async (prefix: string): Promise<Ns> => {
    const ns = await freshNamespace(admin, prefix);
    namespaces.push(ns);
    return ns;
  };
  const sourceSecret = async (name: string): Promise<Record<string, string>> =>
    (await core.readNamespacedSecret({ name, namespace: cp.name })).data ?? {};

  beforeAll(async () => {
    admin = await kubeConfig();
    core = admin.makeApiClient(CoreV1Api);
    api = KubernetesObjectApi.makeApiClient(admin);
    cp = await freshNamespace(admin, 'onb-cp');
    asOperator = await grantOnboarding(cp.name);
    await new Provisioner({ core, namespace: cp.name, log: quiet }).run();
    controller = buildOnboarding({
      kubeConfig: asOperator,
      controlPlaneNamespace: cp.name,
      harnessImage: undefined,
      resyncMs: 1_000,
      podName: 'onboarding-test',
      log: operatorLog,
    });
    await controller.start();
  });

  afterAll(async () => {
    await controller?.close();
    for (const ns of namespaces) await ns.dispose();
    await cp?.dispose();
  });

  it('label → config/sandbox and the credentials; unlabel → gone; relabel → back; value false → gone', async () => {
    const a = await fresh('onb-a');
    const b = await fresh('onb-b');
    await labelNamespace(core, a.name, 'true');
    await labelNamespace(core, b.name, 'true');
    const made = await pollUntil(
      'the objects in a',
      async () => {
        const found = await ours(api, a.name);
        return found.size === ALL.length ? found : undefined;
      },
      poll,
    );
    expect([...made.keys()].sort()).toEqual(ALL);
    // The template points at this control plane's namespace, not config/sandbox's default.
    const template = JSON.stringify(made.get('SandboxTemplate polychrome-harness'));
    expect(template).toContain(`"kubernetes.io/metadata.name":"${cp.name}"`);
    // The NetworkPolicy, as the API server holds it (kubectl: no client model in between),
    // admits the harness port from this control plane's pods only, and metrics from
    // monitoring: an ingress rule without its `from` would admit every source.
    const adminPath = (await sharedCluster()).kubeconfigPath;
    const ingressOf = (): unknown =>
      (
        JSON.parse(
          kubectl(adminPath, [
            ...['-n', a.name, 'get', 'networkpolicy', 'polychrome-harness', '-o', 'json'],
          ]),
        ) as { spec: { ingress: unknown } }
      ).spec.ingress;
    const namespaced = (name: string) => ({
      namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': name } },
    });
    const admitted = [
      {
        from: [
          {
            ...namespaced(cp.name),
            podSelector: { matchLabels: { 'app.kubernetes.io/name': 'polychrome-control-plane' } },
          },
        ],
        ports: [{ port: 7070, protocol: 'TCP' }],
      },
      { from: [namespaced('monitoring')], ports: [{ port: 9090, protocol: 'TCP' }] },
    ];
    expect(ingressOf()).toEqual(admitted);
    // A policy whose rule lost its sources (as earlier releases wrote it) is put back.
    kubectl(adminPath, [
      ...['-n', a.name, 'patch', 'networkpolicy', 'polychrome-harness', '--type=json'],
      '-p=[{"op":"remove","path":"/spec/ingress/0/from"}]',
    ]);
    await pollUntil(
      'the sources back on the NetworkPolicy',
      () =>
        Promise.resolve(
          JSON.stringify(ingressOf()) === JSON.stringify(admitted) ? true : undefined,
        ),
      poll,
    );
    const approval = await sourceSecret(SecretName.ApprovalKey);
    const harness = made.get('Secret polychrome-harness');
    expect(dataOf(harness, 'approval-public-key')).toBe(
      Buffer.from(approval['public-key'] ?? '', 'base64').toString(),
    );
    // The certificate is this namespace's: a client dialling a's harness accepts it, one
    // dialling b's refuses it, with the harness CA the control plane trusts.
    const tls = made.get('Secret polychrome-harness-tls');
    const caBundle = Buffer.from(
      (await sourceSecret(SecretName.HarnessCa))['ca.crt'] ?? '',
      'base64',
    ).toString();
    const [cert, key] = [dataOf(tls, 'tls.crt'), dataOf(tls, 'tls.key')];
    expect(await handshake(cert, key, caBundle, `polychrome-harness.${a.name}`)).toBe('accepted');
    expect(await handshake(cert, key, caBundle, `polychrome-harness.${b.name}`)).toBe(
      'refused: ERR_TLS_CERT_ALTNAME_INVALID',
    );
    const firstUid = tls?.metadata?.uid;

    await labelNamespace(core, a.name, null);
    await pollUntil(
      'everything gone from a',
      async () => ((await ours(api, a.name)).size === 0 ? true : undefined),
      poll,
    );
    for (const ref of ONBOARDED_REFS) expect(await readRef(api, a.name, ref)).toBeUndefined();
    // b is untouched by a's offboarding.
    expect((await ours(api, b.name)).size).toBe(ALL.length);

    await labelNamespace(core, a.name, 'true');
    const back = await pollUntil(
      'the objects back in a',
      async () => {
        const found = await ours(api, a.name);
        return found.size === ALL.length ? found : undefined;
      },
      poll,
    );
    expect(back.get('Secret polychrome-harness-tls')?.metadata?.uid).not.toBe(firstUid);

    await labelNamespace(core, a.name, 'false');
    await pollUntil(
      'everything gone from a again',
      async () => {
        const left = await ours(api, a.name);
        if (left.size === 0) return true;
        throw new Error(`left: ${[...left.keys()].join(', ')}; ${warnings.slice(-4).join('\n')}`);
      },
      poll,
    );
  });

  it('rotation: a new approval key and a rotated harness CA reach the namespace copies', async () => {
    const c = await fresh('onb-rot');
    await labelNamespace(core, c.name, 'true');
    await pollUntil(
      'c onboarded',
      async () => ((await ours(api, c.name)).size === ALL.length ? true : undefined),
      poll,
    );

    const approval = await core.readNamespacedSecret({
      name: SecretName.ApprovalKey,
      namespace: cp.name,
    });
    const nextKey = 'cd'.repeat(32);
    await core.replaceNamespacedSecret({
      name: SecretName.ApprovalKey,
      namespace: cp.name,
      body: {
        ...approval,
        data: { ...approval.data, 'public-key': Buffer.from(nextKey).toString('base64') },
      },
    });
    // The harness CA rotated as the provisioner does: a new CA first in ca.crt, the old kept.
    const oldCa = await core.readNamespacedSecret({
      name: SecretName.HarnessCa,
      namespace: cp.name,
    });
    const now = new Date();
    const next = mintCa({
      commonName: 'rotated harness CA',
      notBefore: now,
      notAfter: new Date(now.getTime() + 3650 * 86_400_000),
    });
    const oldBundle = Buffer.from(oldCa.data?.['ca.crt'] ?? '', 'base64').toString();
    const b64 = (s: string): string => Buffer.from(s).toString('base64');
    await core.replaceNamespacedSecret({
      name: SecretName.HarnessCa,
      namespace: cp.name,
      body: {
        ...oldCa,
        data: {
          'ca.crt': b64(next.certificate + oldBundle),
          'tls.crt': b64(next.certificate),
          'tls.key': b64(next.privateKey),
        },
      },
    });
    const followed = await pollUntil(
      'the copies to follow',
      async () => {
        const found = await ours(api, c.name);
        const key = dataOf(found.get('Secret polychrome-harness'), 'approval-public-key');
        const tls = found.get('Secret polychrome-harness-tls');
        const { X509Certificate } = await import('node:crypto');
        const cert = new X509Certificate(dataOf(tls, 'tls.crt'));
        const signedByNext = cert.verify(new X509Certificate(next.certificate).publicKey);
        return key === nextKey && signedByNext ? found : undefined;
      },
      poll,
    );
    const tls = followed.get('Secret polychrome-harness-tls');
    expect(
      await handshake(
        dataOf(tls, 'tls.crt'),
        dataOf(tls, 'tls.key'),
        next.certificate,
        `polychrome-harness.${c.name}`,
      ),
    ).toBe('accepted');
  });

  it('a tenant who can write in the namespace but not label it gets no credential from anything they write', async () => {
    const t = await fresh('onb-tenant');
    const cluster = await sharedCluster();
    const tenantPath = await cluster.mintUser(`tenant-${t.name}`);
    kubectl(cluster.kubeconfigPath, [
      '-n',
      t.name,
      'create',
      'rolebinding',
      'tenant-admin',
      '--clusterrole=admin',
      `--user=tenant-${t.name}`,
    ]);
    const tenant = await kubeConfig(tenantPath);
    const tenantCore = tenant.makeApiClient(CoreV1Api);
    // The label (or an annotation) on their own Namespace is not theirs to write.
    for (const body of [
      { metadata: { labels: { 'polychrome.dev/enabled': 'true' } } },
      { metadata: { annotations: { 'polychrome.dev/enabled': 'true' } } },
    ]) {
      const refused = await tenantCore
        .patchNamespace(
          { name: t.name, body },
          setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
        )
        .then(
          () => 'written',
          (err: unknown) => (err instanceof ApiException ? err.code : apiErrorMessage(err)),
        );
      expect(refused).toBe(403);
    }
    // What they can write, named and labelled like ours.
    const marked = {
      labels: { 'polychrome.dev/enabled': 'true' },
      annotations: { 'polychrome.dev/enabled': 'true' },
    };
    await tenantCore.createNamespacedConfigMap({
      namespace: t.name,
      body: { metadata: { name: 'polychrome-harness-tls', ...marked } },
    });
    await tenant.makeApiClient(CoordinationV1Api).createNamespacedLease({
      namespace: t.name,
      body: { metadata: { name: 'polychrome-harness', ...marked } },
    });
    // One full pass as the operator decides nothing for this namespace.
    const onboarder = new NamespaceOnboarder({
      kubeConfig: asOperator,
      placement: { controlPlaneNamespace: cp.name },
      log: quiet,
    });
    const result = await onboarder.sync(await core.readNamespace({ name: t.name }));
    expect(result).toEqual({ written: [], pending: [], raced: false });
    // And after the controller's resyncs, still nothing of ours, and no certificate at all.
    await new Promise((resolve) => setTimeout(resolve, 2_500));
    expect((await ours(api, t.name)).size).toBe(0);
    const secrets = await core.listNamespacedSecret({ namespace: t.name });
    expect(secrets.items.map((s) => s.metadata?.name)).not.toContain('polychrome-harness-tls');
  });

  it("a tenant's Secret of our name is not adopted: it is reported by an Event and left as it is", async () => {
    const u = await fresh('onb-theirs');
    const theirs = await core.createNamespacedSecret({
      namespace: u.name,
      body: { metadata: { name: 'polychrome-harness-tls' }, stringData: { 'tls.crt': 'mine' } },
    });
    await labelNamespace(core, u.name, 'true');
    await pollUntil(
      'the other four objects',
      async () => ((await ours(api, u.name)).size === ALL.length - 1 ? true : undefined),
      poll,
    );
    const event = await pollUntil(
      'the conflict Event',
      async () => {
        const events = await admin
          .makeApiClient(EventsV1Api)
          .listNamespacedEvent({ namespace: u.name });
        const found = events.items.find(
          (e) => e.reason === CONFLICT_REASON && e.regarding?.name === 'polychrome-harness-tls',
        );
        if (found === undefined) throw new Error(warnings.slice(-3).join('\n'));
        return found;
      },
      poll,
    );
    expect(event.type).toBe('Warning');
    expect(event.regarding?.uid).toBe(theirs.metadata?.uid);
    expect(event.note).toContain(
      `namespace ${u.name} has Secret polychrome-harness-tls, which onboarding did not create`,
    );
    expect(event.note).toContain('delete it');
    const still = await core.readNamespacedSecret({
      namespace: u.name,
      name: 'polychrome-harness-tls',
    });
    expect(still.metadata?.resourceVersion).toBe(theirs.metadata?.resourceVersion);
    expect(still.metadata?.labels ?? {}).not.toHaveProperty(ONBOARDED_LABEL.key);

    // Offboarding leaves theirs too; once they delete it and relabel, ours is issued.
    await labelNamespace(core, u.name, null);
    await pollUntil(
      'ours gone from u',
      async () => ((await ours(api, u.name)).size === 0 ? true : undefined),
      poll,
    );
    expect(
      (await core.readNamespacedSecret({ namespace: u.name, name: 'polychrome-harness-tls' }))
        .metadata?.uid,
    ).toBe(theirs.metadata?.uid);
    await core.deleteNamespacedSecret({ namespace: u.name, name: 'polychrome-harness-tls' });
    await labelNamespace(core, u.name, 'true');
    await pollUntil(
      'all of ours in u',
      async () => ((await ours(api, u.name)).size === ALL.length ? true : undefined),
      poll,
    );
  });
});
