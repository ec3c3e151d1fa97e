/**
 * config/ on a real API server, the way Argo CD syncs it: kustomize-built, server-side
 * applied with a server dry run (schema, strict field validation, admission, defaulting;
 * nothing is stored), and compared with what went in, so a field the server drops (an
 * unknown or feature-gated one) fails the test; then the whole base applied for real into a
 * fresh namespace, where a server-side diff must be empty and a second apply must change
 * nothing (a GitOps resync). hack/config-manifests.test.ts checks the same builds against the
 * code that reads them. The Helm chart (charts/polychrome), rendered by the pinned Helm with
 * every part on and other values, passes the same dry run in another namespace.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { parse, parseAllDocuments, stringify } from 'yaml';
import { installCrds, readCrds } from '../../hack/lib/crds';
import { helm, helmTemplate } from '../../hack/chart/chart-testing';
import { defaultBinDir, repoRoot } from '../../hack/lib/paths';
import { freshNamespace, kubeConfig, sharedCluster } from './support/kube';

type Obj = Record<string, unknown>;

function isObj(value: unknown): value is Obj {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function kubectl(kubeconfig: string, args: readonly string[], input?: string): string {
  return execFileSync(join(defaultBinDir, 'kubectl'), [`--kubeconfig=${kubeconfig}`, ...args], {
    encoding: 'utf8',
    ...(input === undefined ? {} : { input }),
    stdio: ['pipe', 'pipe', 'pipe'],
  });
}

/** kubectl's error output when it exits non-zero, else a failure. */
function kubectlError(kubeconfig: string, args: readonly string[], input?: string): string {
  try {
    kubectl(kubeconfig, args, input);
  } catch (err: unknown) {
    const stderr: unknown = isObj(err) ? err['stderr'] : undefined;
    return typeof stderr === 'string' ? stderr : String(err);
  }
  throw new Error(`kubectl ${args.join(' ')} succeeded`);
}

/** The objects of a kustomization, as `kubectl kustomize` builds them. */
function build(kubeconfig: string, dir: string): Obj[] {
  return parseAllDocuments(kubectl(kubeconfig, ['kustomize', join(repoRoot, dir)]))
    .map((d) => d.toJS() as unknown)
    .filter(isObj);
}

/** `group/Kind` of an object, or of an API resource (group '' for the core group). */
const groupKindOf = (apiVersion: unknown, kind: unknown): string => {
  const version = String(apiVersion);
  return `${version.includes('/') ? version.split('/')[0] : ''}/${String(kind)}`;
};

/** The group/Kind of every cluster-scoped resource the API server serves (its discovery). */
function clusterScopedKinds(kubeconfig: string): Set<string> {
  // Columns NAME [SHORTNAMES] APIVERSION NAMESPACED KIND: the shortnames may be empty.
  const lines = kubectl(kubeconfig, ['api-resources', '--namespaced=false', '--no-headers'])
    .split('\n')
    .map((l) => l.trim().split(/\s+/u))
    .filter((cols) => cols.length >= 4);
  return new Set(lines.map((cols) => groupKindOf(cols[cols.length - 3], cols[cols.length - 1])));
}

/** The objects `kubectl ... -o json` printed (one object, or a List of them). */
function printed(json: string): Obj[] {
  const out: unknown = JSON.parse(json);
  if (!isObj(out)) return [];
  return out['kind'] === 'List' && Array.isArray(out['items']) ? out['items'].filter(isObj) : [out];
}

const nameOf = (o: Obj): unknown => (isObj(o['metadata']) ? o['metadata']['name'] : undefined);
const keyOf = (o: Obj): string => `${String(o['kind'])}/${String(nameOf(o))}`;
const namespaceOf = (o: Obj): string => {
  const namespace = isObj(o['metadata']) ? o['metadata']['namespace'] : undefined;
  return typeof namespace === 'string' ? namespace : '';
};

/**
 * `value` as the API server prints it: fields that hold an empty string are omitted
 * (`omitempty`), so `value: ''` comes back as no `value` at all.
 */
function withoutEmptyStrings(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(withoutEmptyStrings);
  if (!isObj(value)) return value;
  return Object.fromEntries(
    Object.entries(value)
      .filter(([, v]) => v !== '')
      .map(([k, v]) => [k, withoutEmptyStrings(v)]),
  );
}

/** The returned object for each built one, by kind and name. */
function matchUp(built: readonly Obj[], returned: readonly Obj[]): [Obj, Obj | undefined][] {
  return built.map((b) => [b, returned.find((r) => keyOf(r) === keyOf(b))]);
}

/** `pod` with the control plane's pod template spec, for a dry-run Pod create. */
function podFrom(deployment: Obj, name: string): Obj {
  const spec = deployment['spec'];
  const template = isObj(spec) ? spec['template'] : undefined;
  if (!isObj(template)) throw new Error('the Deployment has no pod template');
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { ...(template['metadata'] as Obj), name },
    spec: template['spec'],
  };
}

describe('config/ manifests on a real API server', () => {
  let kubeconfig: string;
  let ns: { name: string; dispose: () => Promise<void> };
  beforeAll(async () => {
    kubeconfig = (await sharedCluster()).kubeconfigPath;
    ns = await freshNamespace(await kubeConfig(), 'manifests');
    // The Kubernetes door asks cert-manager for its certificate: cert-manager's Issuer and
    // Certificate CRDs as upstream ships them (`make binaries` copies them), no controller.
    const crdDir = join(defaultBinDir, 'cert-manager-crds');
    if (!existsSync(crdDir)) {
      throw new Error(`${crdDir} is missing: run 'make binaries' (it copies the pinned CRDs)`);
    }
    const crds = await readCrds([crdDir]);
    expect(crds.map((c) => c.metadata?.name).sort()).toEqual([
      'certificates.cert-manager.io',
      'issuers.cert-manager.io',
    ]);
    await installCrds(await kubeConfig(), crds);
  }, 60_000);
  afterAll(async () => {
    await ns.dispose();
  });

  it('accepts the base with the door, config/with-kube-api, on a server-side dry run and drops none of its fields', () => {
    // The base's namespaced objects need their namespace to exist before a dry run can
    // admit them: apply the base's own Namespace for real (the same object, the same field
    // manager as a full sync; idempotent).
    kubectl(kubeconfig, [
      'apply',
      '--server-side',
      '-f',
      join(repoRoot, 'config', 'cluster', 'namespace.yaml'),
    ]);
    const built = build(kubeconfig, 'config/with-kube-api');
    expect(built.map(keyOf)).toEqual(
      expect.arrayContaining([
        'Deployment/polychrome-control-plane',
        'Service/polychrome-control-plane',
        'PodDisruptionBudget/polychrome-control-plane',
        'StatefulSet/polychrome-state',
        'APIService/v1alpha1.api.polychrome.dev',
        'Certificate/polychrome-kube-api',
        'Issuer/polychrome-kube-api',
      ]),
    );
    const returned = printed(
      kubectl(kubeconfig, [
        'apply',
        '--server-side',
        '--dry-run=server',
        '-k',
        join(repoRoot, 'config', 'with-kube-api'),
        '-o',
        'json',
      ]),
    );
    for (const [b, r] of matchUp(built, returned)) {
      expect({ key: keyOf(b), found: r !== undefined }).toEqual({ key: keyOf(b), found: true });
      // Defaults are added; nothing that went in is missing or changed.
      expect(r).toMatchObject(withoutEmptyStrings(b) as Obj);
    }
  });

  it('admits the control plane pod under the restricted Pod Security level its namespace enforces', () => {
    // A namespace labelled as config/cluster/namespace.yaml labels the base's.
    const namespaceDoc: unknown = parse(
      readFileSync(join(repoRoot, 'config', 'cluster', 'namespace.yaml'), 'utf8'),
    );
    const labels =
      isObj(namespaceDoc) && isObj(namespaceDoc['metadata'])
        ? namespaceDoc['metadata']['labels']
        : {};
    const enforce = isObj(labels) ? labels['pod-security.kubernetes.io/enforce'] : undefined;
    expect(enforce).toBe('restricted');
    kubectl(kubeconfig, [
      'label',
      'namespace',
      ns.name,
      `pod-security.kubernetes.io/enforce=${String(enforce)}`,
    ]);
    kubectl(kubeconfig, ['create', 'serviceaccount', '-n', ns.name, 'polychrome-control-plane']);

    const deployment = build(kubeconfig, 'config/with-kube-api').find(
      (o) => keyOf(o) === 'Deployment/polychrome-control-plane',
    );
    if (deployment === undefined) {
      throw new Error('config/with-kube-api builds no control-plane Deployment');
    }
    const pod = podFrom(deployment, 'control-plane-dry-run');
    const created = printed(
      kubectl(
        kubeconfig,
        ['create', '--dry-run=server', '-n', ns.name, '-f', '-', '-o', 'json'],
        JSON.stringify(pod),
      ),
    );
    expect(created[0]).toMatchObject({
      kind: 'Pod',
      spec: { serviceAccountName: 'polychrome-control-plane' },
    });

    // The admission is live: the same pod without one of its hardening fields is refused.
    const weakened = structuredClone(pod) as { spec: { containers: { securityContext: Obj }[] } };
    for (const c of weakened.spec.containers) delete c.securityContext['allowPrivilegeEscalation'];
    expect(
      kubectlError(
        kubeconfig,
        ['create', '--dry-run=server', '-n', ns.name, '-f', '-'],
        JSON.stringify(weakened),
      ),
    ).toMatch(/violates PodSecurity "restricted:[^"]+": allowPrivilegeEscalation != false/);
  });

  it('accepts config/sandbox with its harness NetworkPolicy in a conversation namespace', () => {
    const built = build(kubeconfig, 'config/sandbox');
    expect(built.map(keyOf)).toContain('NetworkPolicy/polychrome-harness');
    const returned = printed(
      kubectl(kubeconfig, [
        'apply',
        '--server-side',
        '--dry-run=server',
        '-n',
        ns.name,
        '-k',
        join(repoRoot, 'config', 'sandbox'),
        '-o',
        'json',
      ]),
    );
    for (const [b, r] of matchUp(built, returned)) {
      expect({ key: keyOf(b), found: r !== undefined }).toEqual({ key: keyOf(b), found: true });
      expect(r).toMatchObject(withoutEmptyStrings(b) as Obj);
    }
    const policy = returned.find((o) => keyOf(o) === 'NetworkPolicy/polychrome-harness');
    expect(policy).toMatchObject({ metadata: { namespace: ns.name } });
  });

  it('applies config/conversations: the namespace the public API creates conversations in, labelled for onboarding', () => {
    const built = build(kubeconfig, 'config/conversations');
    const returned = printed(
      kubectl(kubeconfig, [
        'apply',
        '--server-side',
        '-k',
        join(repoRoot, 'config', 'conversations'),
        '-o',
        'json',
      ]),
    );
    for (const [b, r] of matchUp(built, returned)) {
      expect({ key: keyOf(b), found: r !== undefined }).toEqual({ key: keyOf(b), found: true });
      expect(r).toMatchObject(withoutEmptyStrings(b) as Obj);
    }
    expect(returned.map((o) => `${keyOf(o)} ${namespaceOf(o)}`).sort()).toEqual([
      'Namespace/polychrome-conversations ',
    ]);
    expect(returned[0]).toMatchObject({
      metadata: { labels: { 'polychrome.dev/enabled': 'true' } },
    });
  });

  it('accepts the Helm chart with every part on and other values, released into another namespace, on a server-side dry run', async () => {
    // prometheus-operator's CRDs for the monitoring part, as upstream ships them (no controller).
    const promCrds = join(defaultBinDir, 'prometheus-operator-crds');
    if (!existsSync(promCrds)) {
      throw new Error(`${promCrds} is missing: run 'make binaries' (it copies the pinned CRDs)`);
    }
    await installCrds(await kubeConfig(), await readCrds([promCrds]));
    const chats = await freshNamespace(await kubeConfig(), 'chart-chats');
    try {
      const rendered = helmTemplate(
        {
          'kubeApi.enabled': true,
          'certManagerPki.enabled': true,
          'monitoring.enabled': true,
          'conversations.create': true,
          'conversations.namespace': chats.name,
          'payments.enabled': true,
          'payments.wallets': ['treasury', 'research'],
          'image.registry': 'ghcr.io/acme/polychrome',
          'harness.image.digest': `sha256:${'ab'.repeat(32)}`,
          'controlPlane.replicas': 3,
          'controlPlane.resources': { requests: { cpu: '1', memory: '512Mi' } },
          'state.storage': '20Gi',
        },
        ns.name,
      );
      expect(rendered.map((o) => `${keyOf(o)} ${namespaceOf(o)}`)).toEqual(
        expect.arrayContaining([
          `Namespace/${ns.name} `,
          `Namespace/${chats.name} `,
          `Deployment/polychrome-control-plane ${ns.name}`,
          `ClusterRole/polychrome-onboarding `,
          `ServiceMonitor/polychrome-state ${ns.name}`,
          `Certificate/polychrome-state-tls ${ns.name}`,
          'APIService/v1alpha1.api.polychrome.dev ',
          `Role/polychrome-control-plane-wallets ${ns.name}`,
        ]),
      );
      const returned = printed(
        kubectl(
          kubeconfig,
          ['apply', '--server-side', '--dry-run=server', '-f', '-', '-o', 'json'],
          rendered.map((o) => stringify(o)).join('---\n'),
        ),
      );
      for (const [b, r] of matchUp(rendered, returned)) {
        expect({ key: keyOf(b), found: r !== undefined }).toEqual({ key: keyOf(b), found: true });
        expect(r).toMatchObject(withoutEmptyStrings(b) as Obj);
      }
    } finally {
      await chats.dispose();
    }
  }, 60_000);

  it("helm install --create-namespace: the chart's Namespace object takes over the namespace Helm made, and helm uninstall keeps it", () => {
    // The chart's own Namespace object alone, in a chart of its own: a release of the whole
    // chart would take over this cluster's shared CRDs and ClusterRoleBinding.
    const name = `chart-release-${randomBytes(3).toString('hex')}`;
    const dir = mkdtempSync(join(tmpdir(), 'polychrome-chart-namespace-'));
    const asHelm = (args: string[]): string => helm([...args, '--kubeconfig', kubeconfig]);
    try {
      const namespace = helmTemplate({}, name).find((o) => o['kind'] === 'Namespace');
      expect(namespace).toMatchObject({ metadata: { name } });
      mkdirSync(join(dir, 'templates'));
      writeFileSync(
        join(dir, 'Chart.yaml'),
        stringify({ apiVersion: 'v2', name: 'namespace-only', version: '0.1.0' }),
      );
      writeFileSync(
        join(dir, 'templates', 'namespace.yaml'),
        stringify(namespace).replace(`name: ${name}`, 'name: {{ .Release.Namespace }}'),
      );
      asHelm(['install', 'namespace-only', dir, '--namespace', name, '--create-namespace']);
      const made = printed(kubectl(kubeconfig, ['get', 'namespace', name, '-o', 'json']))[0];
      expect(made).toMatchObject({
        metadata: {
          labels: {
            'pod-security.kubernetes.io/enforce': 'restricted',
            'app.kubernetes.io/part-of': 'polychrome',
          },
          annotations: {
            'helm.sh/resource-policy': 'keep',
            'meta.helm.sh/release-name': 'namespace-only',
          },
        },
      });
      asHelm(['uninstall', 'namespace-only', '--namespace', name]);
      expect(kubectl(kubeconfig, ['get', 'namespace', name, '-o', 'name'])).toBe(
        `namespace/${name}\n`,
      );
    } finally {
      rmSync(dir, { recursive: true, force: true });
      kubectl(kubeconfig, ['delete', 'namespace', name, '--ignore-not-found', '--wait=false']);
    }
  }, 60_000);

  it('applies the base server-side into a fresh namespace; a server-side diff is then empty and a second apply changes nothing', () => {
    // The base in this test's namespace, as an overlay setting `namespace:` builds it. The
    // ClusterRole and its binding get a per-test name: the binding's subject follows the
    // namespace, and the shared polychrome-control-plane binding must keep pointing at
    // polychrome-system for the other tests. The CRD, the RuntimeClass and the Namespace
    // object are the same whichever namespace (the Namespace is this test's own).
    const dir = mkdtempSync(join(tmpdir(), 'polychrome-base-'));
    const prefix = `${ns.name}-`;
    try {
      writeFileSync(
        join(dir, 'rename.yaml'),
        stringify({
          apiVersion: 'builtin',
          kind: 'PrefixSuffixTransformer',
          metadata: { name: 'per-test-cluster-rbac' },
          prefix,
          fieldSpecs: [
            { kind: 'ClusterRole', path: 'metadata/name' },
            { kind: 'ClusterRoleBinding', path: 'metadata/name' },
          ],
        }),
      );
      writeFileSync(
        join(dir, 'kustomization.yaml'),
        stringify({
          apiVersion: 'kustomize.config.k8s.io/v1beta1',
          kind: 'Kustomization',
          namespace: ns.name,
          resources: [relative(dir, join(repoRoot, 'config', 'with-kube-api'))],
          transformers: ['rename.yaml'],
        }),
      );
      // Without the APIService: registered for real it would point kube-apiserver at
      // control-plane pods that never run here, and an Unavailable group makes discovery
      // fail for every test on this cluster (the dry run above checks it).
      const built = parseAllDocuments(kubectl(kubeconfig, ['kustomize', dir]))
        .map((d) => d.toJS() as unknown)
        .filter(isObj)
        .filter((o) => o['kind'] !== 'APIService');
      expect(built.map(keyOf)).toEqual(
        expect.arrayContaining([
          'Certificate/polychrome-kube-api',
          `ClusterRole/${prefix}polychrome-conversation-admin`,
        ]),
      );
      writeFileSync(join(dir, 'base.yaml'), built.map((o) => stringify(o)).join('---\n'));
      const binding = built.find(
        (o) => keyOf(o) === `ClusterRoleBinding/${prefix}polychrome-control-plane`,
      );
      expect(binding).toMatchObject({
        metadata: { name: `${prefix}polychrome-control-plane` },
        roleRef: { kind: 'ClusterRole', name: `${prefix}polychrome-control-plane` },
        subjects: [
          { kind: 'ServiceAccount', name: 'polychrome-control-plane', namespace: ns.name },
        ],
      });

      // What kustomize left without a namespace is exactly what this API server serves as
      // cluster-scoped (the parsing test's split into config/cluster rests on it).
      const clusterScoped = clusterScopedKinds(kubeconfig);
      expect(clusterScoped).toContain('rbac.authorization.k8s.io/ClusterRoleBinding');
      for (const o of built) {
        const key = keyOf(o);
        const metadata = isObj(o['metadata']) ? o['metadata'] : {};
        expect({ key, clusterScoped: metadata['namespace'] === undefined }).toEqual({
          key,
          clusterScoped: clusterScoped.has(groupKindOf(o['apiVersion'], o['kind'])),
        });
      }

      const file = join(dir, 'base.yaml');
      const applied = kubectl(kubeconfig, ['apply', '--server-side', '-f', file]);
      expect(applied).toMatch(new RegExp(`namespace/${ns.name} serverside-applied`));
      expect(applied).toMatch(/deployment.apps\/polychrome-control-plane serverside-applied/);
      expect(applied).toMatch(/statefulset.apps\/polychrome-state serverside-applied/);

      // What an apply that changed something would move: the resourceVersion, except on
      // the kinds whose status the cluster's controllers keep writing (kube-controller-manager
      // runs here); for those the generation (bumped by any spec change) and kubectl's own
      // field-manager entry (its time moves when the apply changes a field it owns).
      const statusWritten = new Set(['Deployment', 'StatefulSet', 'PodDisruptionBudget']);
      const versions = (): Record<string, unknown> =>
        Object.fromEntries(
          printed(
            kubectl(kubeconfig, ['get', '-f', file, '-o', 'json', '--show-managed-fields']),
          ).map((o) => {
            const metadata = isObj(o['metadata']) ? o['metadata'] : {};
            const managed = Array.isArray(metadata['managedFields'])
              ? metadata['managedFields']
              : [];
            const applied = managed.filter(
              (m) => isObj(m) && m['manager'] === 'kubectl' && m['operation'] === 'Apply',
            );
            return [
              keyOf(o),
              statusWritten.has(String(o['kind']))
                ? { generation: metadata['generation'], applied }
                : { resourceVersion: metadata['resourceVersion'], applied },
            ];
          }),
        );
      const before = versions();
      expect(Object.keys(before).sort()).toEqual(built.map(keyOf).sort());
      for (const [key, version] of Object.entries(before)) {
        // Every object was applied by this manager, so a change would show in its entry.
        expect({
          key,
          entries:
            isObj(version) && Array.isArray(version['applied']) ? version['applied'].length : 0,
        }).toEqual({ key, entries: 1 });
      }

      // kubectl diff exits 1 on a difference, which fails the call: empty and exit 0.
      expect(kubectl(kubeconfig, ['diff', '--server-side', '-f', file])).toBe('');
      kubectl(kubeconfig, ['apply', '--server-side', '-f', file]);
      expect(versions()).toEqual(before);
    } finally {
      rmSync(dir, { recursive: true, force: true });
      // Every per-test ClusterRole and binding (the control plane's and the door's).
      for (const kind of ['clusterrolebinding', 'clusterrole']) {
        const names = kubectl(kubeconfig, ['get', kind, '-o', 'name'])
          .split('\n')
          .map((l) => l.trim().split('/')[1] ?? '')
          .filter((n) => n.startsWith(prefix));
        if (names.length > 0) kubectl(kubeconfig, ['delete', kind, ...names, '--ignore-not-found']);
      }
    }
  }, 60_000);
});
