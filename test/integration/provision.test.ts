/**
 * The provisioner (operator/provision) against the real local kube-apiserver, as the
 * ServiceAccount config/rbac grants it and nothing more: on an empty namespace the real
 * process (operator/main.ts `provision`) makes the seven Secrets and logs no key; the state
 * plane (the real process) starts from them and accepts the control plane's certificate over
 * mutual TLS; a second run writes nothing; a CA past two thirds of its life is rotated with
 * an overlap the state plane honours, and leaves are renewed at two thirds of theirs; the
 * manifests pass a server dry run (with cert-manager's CRDs) and restricted Pod Security;
 * and the provisioner's Deployment from config/default runs as a pod on the local node.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { ApiException, CoreV1Api, type KubeConfig, type V1Secret } from '@kubernetes/client-node';
import { execFileSync, spawn } from 'node:child_process';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { stringify } from 'yaml';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { createInterface } from 'node:readline';
import { parseAllDocuments } from 'yaml';

import { installCrds, readCrds } from '../../hack/lib/crds';
import { LocalNode } from '../../hack/lib/local-node';
import type { DevCerts } from '../../hack/lib/dev-certs';
import { defaultBinDir, repoRoot } from '../../hack/lib/paths';
import { freePort, pollUntil } from '../../hack/lib/processes';
import { StateClient } from '../../common/state-client';
import { SECRET_NAMES, SecretName } from '../../operator/provision/catalog';
import { certificatesOf } from '../../operator/provision/inspect';
import { Provisioner, type ProvisionLog } from '../../operator/provision/provisioner';
import { mintCa, mintLeaf } from '../../operator/provision/x509-mint';
import { startStateProcess } from '../support/state-process';
import { freshNamespace, kubeConfig, sharedCluster } from './support/kube';

const YEAR = 365 * 86_400_000;
const quiet: ProvisionLog = { info: () => undefined, warn: () => undefined };

/** The provisioner's ServiceAccount, Role and RoleBinding from config/rbac, in `namespace`. */
async function grantProvisioner(
  namespace: string,
): Promise<{ kc: KubeConfig; kubeconfigPath: string }> {
  const cluster = await sharedCluster();
  const kubectl = join(defaultBinDir, 'kubectl');
  const built = execFileSync(kubectl, ['kustomize', join(repoRoot, 'config', 'rbac')], {
    encoding: 'utf8',
  });
  const objects = parseAllDocuments(built)
    .map((d) => d.toJS() as { kind: string; metadata: { name: string } })
    .filter((o) => o.metadata.name === 'polychrome-provisioner')
    .map((o) => ({ ...o, metadata: { ...o.metadata, namespace } }))
    .map((o) =>
      o.kind === 'RoleBinding'
        ? {
            ...o,
            subjects: [{ kind: 'ServiceAccount', name: 'polychrome-provisioner', namespace }],
          }
        : o,
    );
  expect(objects.map((o) => o.kind).sort()).toEqual(['Role', 'RoleBinding', 'ServiceAccount']);
  execFileSync(
    kubectl,
    [`--kubeconfig=${cluster.kubeconfigPath}`, 'apply', '--server-side', '-f', '-'],
    {
      input: objects.map((o) => JSON.stringify(o)).join('\n'),
      encoding: 'utf8',
    },
  );
  const user = `system:serviceaccount:${namespace}:polychrome-provisioner`;
  const kubeconfigPath = await cluster.mintUser(user, [
    'system:serviceaccounts',
    `system:serviceaccounts:${namespace}`,
  ]);
  return { kc: await kubeConfig(kubeconfigPath), kubeconfigPath };
}

async function secretsOf(core: CoreV1Api, namespace: string): Promise<Map<string, V1Secret>> {
  const list = await core.listNamespacedSecret({ namespace });
  return new Map(list.items.map((s) => [s.metadata?.name ?? '', s]));
}

const text = (secret: V1Secret | undefined, key: string): string =>
  Buffer.from(secret?.data?.[key] ?? '', 'base64').toString('utf8');

/** The provisioned Secrets of `namespace` as files, in the shape the dev certificates have. */
async function filesOf(secrets: Map<string, V1Secret>, dir: string): Promise<DevCerts> {
  const write = async (name: string, content: string): Promise<string> => {
    const path = join(dir, name);
    await writeFile(path, content, { mode: 0o600 });
    return path;
  };
  const state = secrets.get(SecretName.StateTls);
  const cp = secrets.get(SecretName.ControlPlaneTls);
  const pair = async (stem: string, s: V1Secret | undefined) => ({
    certPath: await write(`${stem}.crt`, text(s, 'tls.crt')),
    keyPath: await write(`${stem}.key`, text(s, 'tls.key')),
  });
  const server = await pair('server', state);
  const controlPlane = await pair('control-plane', cp);
  return {
    dir,
    ca: { certPath: await write('ca.crt', text(state, 'ca.crt')), keyPath: '' },
    server,
    controlPlane,
    verifier: controlPlane,
    recordsAdmin: controlPlane,
    backup: controlPlane,
    signingKey: await write('signing-key', text(secrets.get(SecretName.SigningKey), 'signing-key')),
    recordsKey: await write('records-key', text(secrets.get(SecretName.RecordsKey), 'records-key')),
  };
}

/** Whether the state plane started from `certs` answers `Head` to a client holding `client`. */
async function headAs(
  address: string,
  namespace: string,
  ca: string,
  client: { certificate: string; privateKey: string },
): Promise<string> {
  const state = new StateClient({
    address,
    serverName: `polychrome-state.${namespace}.svc`,
    tls: {
      ca: Buffer.from(ca),
      cert: Buffer.from(client.certificate),
      key: Buffer.from(client.privateKey),
    },
    callTimeoutMs: 5_000,
  });
  try {
    return `head ${(await state.head('conv-provision')).head}`;
  } catch (error) {
    return `refused: ${(error as Error).message}`;
  } finally {
    state.close();
  }
}

/** Starts the state plane from the namespace's Secrets; stops it after `use`. */
async function withStatePlane(
  secrets: Map<string, V1Secret>,
  use: (address: string) => Promise<void>,
): Promise<void> {
  const dir = await mkdtemp(join(tmpdir(), 'provision-state-'));
  const state = await startStateProcess(await filesOf(secrets, dir), join(dir, 'data'));
  try {
    await use(`127.0.0.1:${state.port}`);
  } finally {
    state.child.kill('SIGTERM');
    await state.exited;
    await rm(dir, { recursive: true, force: true });
  }
}

describe('the provisioner on a real API server', () => {
  let admin: CoreV1Api;
  let ns: { name: string; dispose: () => Promise<void> };
  let asProvisioner: KubeConfig;
  let provisionerKubeconfig: string;

  beforeAll(async () => {
    const kc = await kubeConfig();
    admin = kc.makeApiClient(CoreV1Api);
    ns = await freshNamespace(kc, 'prov');
    ({ kc: asProvisioner, kubeconfigPath: provisionerKubeconfig } = await grantProvisioner(
      ns.name,
    ));
  });

  afterAll(async () => {
    await ns.dispose();
  });

  it('makes all seven Secrets on an empty namespace, as its own process, and logs no key', async () => {
    const healthPort = await freePort();
    const child = spawn(
      process.execPath,
      ['--import', 'tsx', join(repoRoot, 'operator', 'main.ts'), 'provision'],
      {
        cwd: repoRoot,
        env: {
          PATH: process.env['PATH'] ?? '',
          POLYCHROME_KUBECONFIG: provisionerKubeconfig,
          POD_NAMESPACE: ns.name,
          POLYCHROME_HEALTH_PORT: String(healthPort),
          POLYCHROME_LOG_LEVEL: 'debug',
        },
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    const logs: string[] = [];
    createInterface({ input: child.stdout }).on('line', (l) => logs.push(l));
    createInterface({ input: child.stderr }).on('line', (l) => logs.push(l));
    const exited = new Promise<number | null>((resolve) =>
      child.on('exit', (code) => resolve(code)),
    );
    try {
      await pollUntil(
        'the provisioner is ready',
        async () => {
          const ready = await fetch(`http://127.0.0.1:${healthPort}/readyz`).catch(() => undefined);
          return ready?.status === 200 ? true : undefined;
        },
        { timeoutMs: 60_000, intervalMs: 250 },
      );
    } finally {
      child.kill('SIGTERM');
    }
    expect(await exited).toBe(0);
    const secrets = await secretsOf(admin, ns.name);
    for (const name of SECRET_NAMES) {
      expect({ name, labels: secrets.get(name)?.metadata?.labels }).toEqual({
        name,
        labels: {
          'app.kubernetes.io/managed-by': 'polychrome',
          'app.kubernetes.io/part-of': 'polychrome',
        },
      });
    }
    expect(logs.join('\n')).toContain(`created ${SecretName.StateTls}`);
    // No private key, seed or records key in any line: not a PEM block, not a line of one,
    // not a hex key.
    const all = logs.join('\n');
    expect(all).not.toContain('PRIVATE KEY');
    for (const secret of secrets.values()) {
      for (const value of Object.values(secret.data ?? {})) {
        const decoded = Buffer.from(value, 'base64').toString('utf8');
        const pieces = decoded.split('\n').filter((l) => l.length >= 32 && !l.startsWith('-----'));
        for (const piece of pieces) expect(all.includes(piece)).toBe(false);
        expect(all.includes(value)).toBe(false);
      }
    }
  });

  it("starts the state plane from them, which accepts the control plane's certificate and refuses another CA's", async () => {
    const secrets = await secretsOf(admin, ns.name);
    const cp = secrets.get(SecretName.ControlPlaneTls);
    const controlPlane = { certificate: text(cp, 'tls.crt'), privateKey: text(cp, 'tls.key') };
    const stranger = mintCa({
      commonName: 'Polychrome state CA',
      notBefore: new Date(),
      notAfter: new Date(Date.now() + YEAR),
    });
    const impostor = mintLeaf(
      {
        commonName: 'polychrome-control-plane',
        organizations: ['polychrome:writer'],
        notBefore: new Date(),
        notAfter: new Date(Date.now() + YEAR),
      },
      'both',
      stranger,
    );
    await withStatePlane(secrets, async (address) => {
      expect(await headAs(address, ns.name, text(cp, 'ca.crt'), controlPlane)).toBe('head 0');
      expect(await headAs(address, ns.name, text(cp, 'ca.crt'), impostor)).toMatch(/^refused: /);
    });
  });

  it('changes nothing on a second run: every resourceVersion stays', async () => {
    const before = await secretsOf(admin, ns.name);
    const report = await new Provisioner({
      core: asProvisioner.makeApiClient(CoreV1Api),
      namespace: ns.name,
      log: quiet,
    }).run();
    expect(report).toEqual({ written: [], outstanding: [] });
    const after = await secretsOf(admin, ns.name);
    for (const name of SECRET_NAMES) {
      expect(after.get(name)?.metadata?.resourceVersion).toBe(
        before.get(name)?.metadata?.resourceVersion,
      );
    }
  });

  it('may read no other Secret of its namespace, and write none it does not own', async () => {
    await admin.createNamespacedSecret({
      namespace: ns.name,
      body: { metadata: { name: 'someone-elses' }, stringData: { token: 'x' } },
    });
    const core = asProvisioner.makeApiClient(CoreV1Api);
    const denied = async (call: () => Promise<unknown>): Promise<number | undefined> => {
      try {
        await call();
        return undefined;
      } catch (error) {
        return error instanceof ApiException ? error.code : -1;
      }
    };
    expect(
      await denied(() => core.readNamespacedSecret({ name: 'someone-elses', namespace: ns.name })),
    ).toBe(403);
    expect(
      await denied(() =>
        core.replaceNamespacedSecret({
          name: 'someone-elses',
          namespace: ns.name,
          body: { metadata: { name: 'someone-elses' } },
        }),
      ),
    ).toBe(403);
    expect(await denied(() => core.listNamespacedSecret({ namespace: ns.name }))).toBe(403);
    expect(
      await denied(() =>
        core.deleteNamespacedSecret({ name: SecretName.ApprovalKey, namespace: ns.name }),
      ),
    ).toBe(403);
  });
});

describe('rotation on a real API server', () => {
  let admin: CoreV1Api;
  let ns: { name: string; dispose: () => Promise<void> };
  let core: CoreV1Api;

  beforeAll(async () => {
    const kc = await kubeConfig();
    admin = kc.makeApiClient(CoreV1Api);
    ns = await freshNamespace(kc, 'prov-rot');
    core = (await grantProvisioner(ns.name)).kc.makeApiClient(CoreV1Api);
  });

  afterAll(async () => {
    await ns.dispose();
  });

  const run = (now: Date) =>
    new Provisioner({ core, namespace: ns.name, now: () => now, log: quiet }).run();

  it('rotates a CA at two thirds of its life with an overlap: leaves of the old CA and of the new are both accepted', async () => {
    // An install seven years old: its CAs are past two thirds of their ten years, its leaves expired.
    await run(new Date(Date.now() - 7 * YEAR));
    const old = await secretsOf(admin, ns.name);
    const oldCa = old.get(SecretName.StateCa);
    const report = await run(new Date());
    expect(report.outstanding).toEqual([]);
    expect(report.written.map((w) => `${w.op} ${w.name}`).sort()).toEqual(
      [
        `replace ${SecretName.StateCa}`,
        `replace ${SecretName.HarnessCa}`,
        `replace ${SecretName.StateTls}`,
        `replace ${SecretName.ControlPlaneTls}`,
      ].sort(),
    );
    const now = await secretsOf(admin, ns.name);
    // Keys are never rotated by themselves.
    for (const name of [SecretName.SigningKey, SecretName.RecordsKey, SecretName.ApprovalKey]) {
      expect(now.get(name)?.metadata?.resourceVersion).toBe(
        old.get(name)?.metadata?.resourceVersion,
      );
    }
    const bundle = certificatesOf(text(now.get(SecretName.StateTls), 'ca.crt'));
    expect(bundle.map((c) => c.fingerprint256)).toEqual([
      certificatesOf(text(now.get(SecretName.StateCa), 'tls.crt'))[0]?.fingerprint256,
      certificatesOf(text(oldCa, 'tls.crt'))[0]?.fingerprint256,
    ]);
    const cp = now.get(SecretName.ControlPlaneTls);
    const renewed = { certificate: text(cp, 'tls.crt'), privateKey: text(cp, 'tls.key') };
    // A control plane that has not restarted yet still holds a certificate of the old CA.
    const notYetRestarted = mintLeaf(
      {
        commonName: 'polychrome-control-plane',
        organizations: ['polychrome:writer'],
        notBefore: new Date(),
        notAfter: new Date(Date.now() + YEAR),
      },
      'both',
      { certificate: text(oldCa, 'tls.crt'), privateKey: text(oldCa, 'tls.key') },
    );
    await withStatePlane(now, async (address) => {
      expect(await headAs(address, ns.name, text(cp, 'ca.crt'), renewed)).toBe('head 0');
      expect(await headAs(address, ns.name, text(cp, 'ca.crt'), notYetRestarted)).toBe('head 0');
    });
  });

  it('renews the leaves at two thirds of their year and writes nothing else', async () => {
    const before = await secretsOf(admin, ns.name);
    const report = await run(new Date(Date.now() + 250 * 86_400_000));
    expect(report.written.map((w) => `${w.op} ${w.name}: ${w.reason}`)).toEqual([
      expect.stringMatching(new RegExp(`^replace ${SecretName.StateTls}: due for renewal`)),
      expect.stringMatching(new RegExp(`^replace ${SecretName.ControlPlaneTls}: due for renewal`)),
    ]);
    const after = await secretsOf(admin, ns.name);
    for (const name of SECRET_NAMES.filter(
      (n) => n !== SecretName.StateTls && n !== SecretName.ControlPlaneTls,
    )) {
      expect(after.get(name)?.metadata?.resourceVersion).toBe(
        before.get(name)?.metadata?.resourceVersion,
      );
    }
  });

  it("leaves a user's Secret alone and reports what is wrong with it", async () => {
    await admin.deleteNamespacedSecret({ name: SecretName.ApprovalKey, namespace: ns.name });
    await admin.createNamespacedSecret({
      namespace: ns.name,
      body: { metadata: { name: SecretName.ApprovalKey }, stringData: { 'key.pem': 'not a key' } },
    });
    const version = (
      await admin.readNamespacedSecret({ name: SecretName.ApprovalKey, namespace: ns.name })
    ).metadata?.resourceVersion;
    const report = await run(new Date());
    expect(report.outstanding).toEqual([
      {
        op: 'problem',
        name: SecretName.ApprovalKey,
        message: expect.stringContaining(
          `${SecretName.ApprovalKey} key.pem does not parse as a private key`,
        ),
      },
    ]);
    const after = await admin.readNamespacedSecret({
      name: SecretName.ApprovalKey,
      namespace: ns.name,
    });
    expect(after.metadata?.resourceVersion).toBe(version);
  });
});

describe('the manifests on a real API server', () => {
  let ns: { name: string; dispose: () => Promise<void> };
  let kubeconfigPath: string;
  const kubectl = (args: readonly string[], input?: string): string =>
    execFileSync(join(defaultBinDir, 'kubectl'), [`--kubeconfig=${kubeconfigPath}`, ...args], {
      encoding: 'utf8',
      stdio: ['pipe', 'pipe', 'pipe'],
      ...(input === undefined ? {} : { input }),
    });

  beforeAll(async () => {
    kubeconfigPath = (await sharedCluster()).kubeconfigPath;
    ns = await freshNamespace(await kubeConfig(), 'prov-manifests');
    // cert-manager's CRDs as upstream ships them (`make binaries` copies them), no controller.
    await installCrds(
      await kubeConfig(),
      await readCrds([join(defaultBinDir, 'cert-manager-crds')]),
    );
  }, 60_000);

  afterAll(async () => {
    await ns.dispose();
  });

  it('accepts config/with-cert-manager-pki on a server-side dry run, Certificates and all', () => {
    kubectl([
      'apply',
      '--server-side',
      '-f',
      join(repoRoot, 'config', 'cluster', 'namespace.yaml'),
    ]);
    const out = JSON.parse(
      kubectl([
        'apply',
        '--server-side',
        '--dry-run=server',
        '-k',
        join(repoRoot, 'config', 'with-cert-manager-pki'),
        '-o',
        'json',
      ]),
    ) as { items?: { kind: string; metadata: { name: string } }[] };
    const keys = (out.items ?? []).map((o) => `${o.kind}/${o.metadata.name}`);
    expect(keys).toEqual(
      expect.arrayContaining([
        'Deployment/polychrome-provisioner',
        'Role/polychrome-provisioner',
        'Certificate/polychrome-state-ca',
        'Certificate/polychrome-state-tls',
        'Certificate/polychrome-control-plane-tls',
        'Certificate/polychrome-harness-ca',
        'Issuer/polychrome-state-ca',
        'Issuer/polychrome-self-signed',
      ]),
    );
  });

  it('admits the provisioner pod under the restricted Pod Security level', () => {
    kubectl(['label', 'namespace', ns.name, 'pod-security.kubernetes.io/enforce=restricted']);
    kubectl(['create', 'serviceaccount', '-n', ns.name, 'polychrome-provisioner']);
    const deployment = parseAllDocuments(
      kubectl(['kustomize', join(repoRoot, 'config', 'default')]),
    )
      .map(
        (d) =>
          d.toJS() as {
            kind: string;
            metadata: { name: string };
            spec?: { template: { metadata: object; spec: object } };
          },
      )
      .find((o) => o.kind === 'Deployment' && o.metadata.name === 'polychrome-provisioner');
    if (deployment?.spec === undefined)
      throw new Error('config/default has no provisioner Deployment');
    const pod = {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { ...deployment.spec.template.metadata, name: 'provisioner-dry-run' },
      spec: deployment.spec.template.spec,
    };
    const created = JSON.parse(
      kubectl(
        ['create', '--dry-run=server', '-n', ns.name, '-f', '-', '-o', 'json'],
        JSON.stringify(pod),
      ),
    ) as { spec: { serviceAccountName: string } };
    expect(created.spec.serviceAccountName).toBe('polychrome-provisioner');
  });
});

describe('config/default on the local node: the provisioner pod makes what the planes mount', () => {
  let admin: KubeConfig;
  let ns: { name: string; dispose: () => Promise<void> };
  let dir: string;
  let node: LocalNode | undefined;

  beforeAll(async () => {
    admin = await kubeConfig();
    ns = await freshNamespace(admin, 'prov-pod');
    dir = await mkdtemp(join(tmpdir(), 'provision-pod-'));
  });

  afterAll(async () => {
    await node?.close();
    await ns.dispose();
    await rm(dir, { recursive: true, force: true });
  });

  it('runs the Deployment, ServiceAccount and Role as config/default ships them, in an overlay of another namespace', async () => {
    const kubectl = join(defaultBinDir, 'kubectl');
    const cluster = await sharedCluster();
    // An overlay of config/default in this test's namespace: the provisioner's objects as built.
    const overlay = join(dir, 'overlay');
    await mkdir(overlay);
    await writeFile(
      join(overlay, 'kustomization.yaml'),
      stringify({
        apiVersion: 'kustomize.config.k8s.io/v1beta1',
        kind: 'Kustomization',
        namespace: ns.name,
        resources: [relative(overlay, join(repoRoot, 'config', 'default'))],
      }),
    );
    const objects = parseAllDocuments(
      execFileSync(kubectl, ['kustomize', overlay], {
        encoding: 'utf8',
      }),
    )
      .map((d) => d.toJS() as { kind: string; metadata: { name: string } })
      .filter((o) => o.metadata.name === 'polychrome-provisioner');
    expect(objects.map((o) => o.kind).sort()).toEqual([
      'Deployment',
      'Role',
      'RoleBinding',
      'ServiceAccount',
    ]);
    // The shared cluster runs without the ServiceAccount admission plugin: add the token
    // volume it would add (kube-api-access), so the pod reaches the API server as its
    // ServiceAccount, as in a cluster.
    const deployment = objects.find((o) => o.kind === 'Deployment') as unknown as {
      spec: {
        template: { spec: { volumes?: unknown[]; containers: { volumeMounts?: unknown[] }[] } };
      };
    };
    const podSpec = deployment.spec.template.spec;
    podSpec.volumes = [
      ...(podSpec.volumes ?? []),
      {
        name: 'kube-api-access',
        projected: {
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
      },
    ];
    for (const c of podSpec.containers) {
      c.volumeMounts = [
        ...(c.volumeMounts ?? []),
        {
          name: 'kube-api-access',
          mountPath: '/var/run/secrets/kubernetes.io/serviceaccount',
          readOnly: true,
        },
      ];
    }
    execFileSync(
      kubectl,
      [`--kubeconfig=${cluster.kubeconfigPath}`, 'apply', '--server-side', '-f', '-'],
      {
        input: objects.map((o) => JSON.stringify(o)).join('\n'),
        encoding: 'utf8',
      },
    );
    // The pod runs this checkout's operator/main.ts with the Deployment's `args` (provision),
    // as its own ServiceAccount token, probed on its metrics port.
    node = new LocalNode({
      kubeConfig: admin,
      name: `prov-${ns.name}`,
      stateDir: join(dir, 'node'),
      namespaces: [ns.name],
      images: {
        '*polychrome/control-plane:*': [
          process.execPath,
          '--import',
          'tsx',
          join(repoRoot, 'operator', 'main.ts'),
        ],
      },
    });
    await node.start();
    const core = admin.makeApiClient(CoreV1Api);
    await pollUntil(
      `the provisioner pod is Ready (its logs are under ${join(dir, 'node', 'pods')})`,
      async () => {
        const pods = await core.listNamespacedPod({
          namespace: ns.name,
          labelSelector: 'app.kubernetes.io/name=polychrome-provisioner',
        });
        const ready = pods.items.some((p) =>
          (p.status?.conditions ?? []).some((c) => c.type === 'Ready' && c.status === 'True'),
        );
        return ready ? true : undefined;
      },
      { timeoutMs: 120_000, intervalMs: 500 },
    );
    const secrets = await secretsOf(core, ns.name);
    expect(SECRET_NAMES.filter((n) => !secrets.has(n))).toEqual([]);
  }, 180_000);
});
