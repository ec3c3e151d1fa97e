/**
 * The Helm chart (charts/polychrome) against the kustomize trees it is generated from, both
 * rendered by the real tools: `helm template` of the pinned Helm (built from helm.sh/helm/v4,
 * hack/helm) and the pinned kubectl's kustomize. With default values the chart renders exactly
 * config/default's objects, and each optional part turned on adds exactly its tree; every
 * value changes what it names and nothing else; `helm lint` passes and the schema refuses bad
 * values with the value's name. Objects are compared parsed, keyed by
 * apiVersion/kind/namespace/name; the only difference allowed is Helm's
 * `helm.sh/resource-policy: keep`, which the chart adds exactly where Argo CD's
 * `Delete=false` is. test/integration/config-manifests.test.ts sends the renders to an API server.
 */
import { afterAll, describe, expect, it } from '@jest/globals';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parse, stringify } from 'yaml';
import { CHART_DIR, kustomizeBuild } from '../build-chart';
import { repoRoot } from '../lib/paths';
import { COMPONENTS, KEEP_ANNOTATION } from './values';
import { chartFiles, objectKey, type ChartSources, type Obj } from './render';
import { helmError, helmLint, helmTemplate, leafDiffs, withoutKeep } from './chart-testing';

const scratch = mkdtempSync(join(tmpdir(), 'polychrome-chart-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

const builds = new Map<string, Obj[]>();
/** The kustomize build of `dir`, once per run. */
function build(dir: string): Obj[] {
  const cached = builds.get(dir) ?? kustomizeBuild(dir);
  builds.set(dir, cached);
  return cached;
}

/** The objects by key, Helm's keep annotation removed. */
function byKey(objects: readonly Obj[]): Map<string, Obj> {
  const map = new Map<string, Obj>();
  for (const o of objects) {
    const key = objectKey(o);
    if (map.has(key)) throw new Error(`two objects ${key}`);
    map.set(key, withoutKeep(o));
  }
  return map;
}

function expectSameObjects(rendered: readonly Obj[], built: readonly Obj[]): void {
  const r = byKey(rendered);
  const b = byKey(built);
  expect([...r.keys()].sort()).toEqual([...b.keys()].sort());
  for (const [key, o] of b) expect({ key, o: r.get(key) }).toEqual({ key, o });
}

const ALL_ON = {
  'kubeApi.enabled': true,
  'certManagerPki.enabled': true,
  'monitoring.enabled': true,
  'conversations.create': true,
  'payments.enabled': true,
};

/**
 * config/with-kube-api with config/components/cert-manager-pki and its replacements, and
 * config/components/payments: the three overlays at once, by kustomize.
 */
function bothOverlays(): Obj[] {
  const dir = mkdtempSync(join(repoRoot, 'config', '.chart-test-'));
  try {
    const pki = parse(
      readFileSync(join(repoRoot, 'config/with-cert-manager-pki/kustomization.yaml'), 'utf8'),
    ) as Obj;
    const kustomization = {
      apiVersion: 'kustomize.config.k8s.io/v1beta1',
      kind: 'Kustomization',
      namespace: pki['namespace'],
      resources: ['../with-kube-api'],
      components: ['../components/cert-manager-pki', '../components/payments'],
      replacements: pki['replacements'],
    };
    writeFileSync(join(dir, 'kustomization.yaml'), stringify(kustomization));
    return kustomizeBuild(dir.slice(repoRoot.length + 1));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

const packageVersion = (): string =>
  (JSON.parse(readFileSync(join(repoRoot, 'package.json'), 'utf8')) as { version: string }).version;

/** The builds the chart is generated from, with `change` applied to a copy of one (`every`: of each). */
function sourcesWith(changed: string, change: (objects: Obj[]) => Obj[]): ChartSources {
  const dirs = ['config/default', ...COMPONENTS.map((c) => c.source)];
  const all = new Map(dirs.map((d) => [d, structuredClone(build(d))]));
  for (const dir of changed === 'every' ? dirs : [changed])
    all.set(dir, change(all.get(dir) ?? []));
  return { version: packageVersion(), builds: all };
}

const named = (objects: Obj[], kind: string, name: string): Obj => {
  const found = objects.find((o) => o['kind'] === kind && (o['metadata'] as Obj)['name'] === name);
  if (found === undefined) throw new Error(`no ${kind} ${name}`);
  return found;
};

describe('the chart is generated from config/', () => {
  it('is current: hack/build-chart.ts writes what is committed', () => {
    const files = chartFiles(sourcesWith('config/default', (o) => o));
    for (const [path, text] of files) {
      expect({ path, text: readFileSync(join(repoRoot, CHART_DIR, path), 'utf8') }).toEqual({
        path,
        text,
      });
    }
  });

  it("docs/operator.md's values table lists every value of values.yaml, in its order", () => {
    const schema = readFileSync(join(repoRoot, CHART_DIR, 'values.schema.json'), 'utf8');
    const paths: string[] = [];
    const walk = (node: Obj, prefix: string): void => {
      const properties = node['properties'] as Record<string, Obj> | undefined;
      if (properties === undefined || 'description' in node) {
        paths.push(prefix);
        return;
      }
      for (const [key, sub] of Object.entries(properties)) {
        walk(sub, prefix === '' ? key : `${prefix}.${key}`);
      }
    };
    walk(JSON.parse(schema) as Obj, '');
    const doc = readFileSync(join(repoRoot, 'docs', 'operator.md'), 'utf8');
    const section = doc.slice(doc.indexOf('## Installing with Helm'));
    const rows = [...section.matchAll(/^\| `([a-zA-Z.]+)` \|/gmu)].map((m) => m[1]);
    expect(rows).toEqual(paths);
  });
});

describe('the generator refuses what the chart cannot express', () => {
  it('two overlays changing one object', () => {
    const sources = sourcesWith('config/with-cert-manager-pki', (objects) => {
      const d = named(objects, 'Deployment', 'polychrome-control-plane');
      (d['spec'] as Obj)['minReadySeconds'] = 5;
      return objects;
    });
    expect(() => chartFiles(sources)).toThrow(
      'Deployment polychrome-control-plane is changed by config/with-kube-api and config/with-cert-manager-pki',
    );
  });

  it("a part's overlay changing more of a base object than its values' fields", () => {
    // config/with-payments changes the control plane Deployment only where payments.* are;
    // anything else there would be a second overlay's change, beside config/with-kube-api's.
    const sources = sourcesWith('config/with-payments', (objects) => {
      const d = named(objects, 'Deployment', 'polychrome-control-plane');
      (d['spec'] as Obj)['minReadySeconds'] = 5;
      return objects;
    });
    expect(() => chartFiles(sources)).toThrow(
      'Deployment polychrome-control-plane is changed by config/with-kube-api and config/with-payments',
    );
  });

  it('a wallet Secret in the Role that is not polychrome-wallet-<name>', () => {
    const sources = sourcesWith('config/with-payments', (objects) => {
      const role = named(objects, 'Role', 'polychrome-control-plane-wallets');
      ((role['rules'] as Obj[])[0] as Obj)['resourceNames'] = ['polychrome-approval-key'];
      return objects;
    });
    expect(() => chartFiles(sources)).toThrow(
      'Role polychrome-control-plane-wallets: payments.wallets should be names starting polychrome-wallet-',
    );
  });

  it('an overlay dropping an object of config/default', () => {
    const sources = sourcesWith('config/with-kube-api', (objects) =>
      objects.filter((o) => o['kind'] !== 'RuntimeClass'),
    );
    expect(() => chartFiles(sources)).toThrow(
      /config\/with-kube-api drops .*RuntimeClass\/\/gvisor/u,
    );
  });

  it('an image under the registry that is not a plane at the version', () => {
    const sources = sourcesWith('config/monitoring', (objects) => [
      ...objects,
      {
        apiVersion: 'v1',
        kind: 'ConfigMap',
        metadata: { name: 'x' },
        data: { image: 'registry.invalid/polychrome/other:0.1.0' },
      },
    ]);
    expect(() => chartFiles(sources)).toThrow(
      'ConfigMap x: image registry.invalid/polychrome/other:0.1.0',
    );
  });

  it('a value whose field the build lacks', () => {
    const sources = sourcesWith('every', (objects) => {
      const s = objects.find((o) => o['kind'] === 'StatefulSet');
      if (s !== undefined) delete (s['spec'] as Obj)['volumeClaimTemplates'];
      return objects;
    });
    expect(() => chartFiles(sources)).toThrow(
      'StatefulSet polychrome-state has no spec.volumeClaimTemplates',
    );
  });
});

describe('helm template against kubectl kustomize', () => {
  it('renders exactly config/default with default values', () => {
    expectSameObjects(helmTemplate({}), build('config/default'));
  });

  it('marks exactly the objects Argo CD never deletes (Delete=false) with helm.sh/resource-policy: keep', () => {
    const keep = (
      objects: readonly Obj[],
      annotation: (a: Record<string, string>) => boolean,
    ): string[] =>
      objects
        .filter((o) =>
          annotation(((o['metadata'] as Obj)['annotations'] ?? {}) as Record<string, string>),
        )
        .map(objectKey)
        .sort();
    const rendered = helmTemplate(ALL_ON);
    const kept = keep(rendered, (a) => a[KEEP_ANNOTATION] === 'keep');
    expect(kept).toEqual(
      keep(rendered, (a) => (a['argocd.argoproj.io/sync-options'] ?? '').includes('Delete=false')),
    );
    expect(kept).toEqual(
      expect.arrayContaining([
        'v1/Namespace//polychrome-system',
        'v1/Namespace//polychrome-conversations',
      ]),
    );
    expect(kept.filter((k) => k.includes('CustomResourceDefinition'))).toHaveLength(3);
  });

  it('renders config/with-kube-api with kubeApi.enabled', () => {
    expectSameObjects(helmTemplate({ 'kubeApi.enabled': true }), build('config/with-kube-api'));
  });

  it('renders config/with-cert-manager-pki with certManagerPki.enabled', () => {
    expectSameObjects(
      helmTemplate({ 'certManagerPki.enabled': true }),
      build('config/with-cert-manager-pki'),
    );
  });

  it('adds config/monitoring with monitoring.enabled', () => {
    expectSameObjects(helmTemplate({ 'monitoring.enabled': true }), [
      ...build('config/default'),
      ...build('config/monitoring'),
    ]);
  });

  it('adds config/conversations with conversations.create', () => {
    expectSameObjects(helmTemplate({ 'conversations.create': true }), [
      ...build('config/default'),
      ...build('config/conversations'),
    ]);
  });

  it('renders config/with-payments with payments.enabled, and nothing of it without', () => {
    expectSameObjects(helmTemplate({ 'payments.enabled': true }), build('config/with-payments'));
    // Off, the other payments values change nothing: no Role, and the variables stay empty.
    expectSameObjects(
      helmTemplate({ 'payments.protocols': 'mpp', 'payments.wallets': ['treasury'] }),
      build('config/default'),
    );
  });

  it('renders the overlays at once as kustomize combines them, with the two bundles', () => {
    expectSameObjects(helmTemplate(ALL_ON), [
      ...bothOverlays(),
      ...build('config/monitoring'),
      ...build('config/conversations'),
    ]);
  });
});

describe('values change what they name and nothing else', () => {
  const before = helmTemplate(ALL_ON);
  const diffs = (values: Record<string, unknown>, namespace?: string): string[] =>
    leafDiffs(before, helmTemplate({ ...ALL_ON, ...values }, namespace));

  it('image.registry moves every image of the three planes, and only those', () => {
    const old = 'registry.invalid/polychrome';
    const next = 'ghcr.io/acme/polychrome';
    const cp = 'apps/v1/Deployment/polychrome-system/polychrome-control-plane';
    const containers = 'spec.template.spec.containers';
    expect(diffs({ 'image.registry': next })).toEqual([
      `${cp} ${containers}[control-plane].env[POLYCHROME_HARNESS_IMAGE].value: ${old}/harness:0.1.0 -> ${next}/harness:0.1.0`,
      `${cp} ${containers}[control-plane].image: ${old}/control-plane:0.1.0 -> ${next}/control-plane:0.1.0`,
      // The harness image onboarding writes into each labelled namespace's SandboxTemplate.
      `apps/v1/Deployment/polychrome-system/polychrome-provisioner ${containers}[provisioner].env[POLYCHROME_HARNESS_IMAGE].value: ${old}/harness:0.1.0 -> ${next}/harness:0.1.0`,
      `apps/v1/Deployment/polychrome-system/polychrome-provisioner ${containers}[provisioner].image: ${old}/control-plane:0.1.0 -> ${next}/control-plane:0.1.0`,
      `apps/v1/StatefulSet/polychrome-system/polychrome-state ${containers}[state].image: ${old}/state:0.1.0 -> ${next}/state:0.1.0`,
    ]);
    // Nothing else named the old registry.
    expect(JSON.stringify(helmTemplate({ ...ALL_ON, 'image.registry': next }))).not.toContain(old);
  });

  it("a plane's image.repository names its images only", () => {
    expect(diffs({ 'state.image.repository': 'polychrome-state' })).toEqual([
      'apps/v1/StatefulSet/polychrome-system/polychrome-state spec.template.spec.containers[state].image: registry.invalid/polychrome/state:0.1.0 -> registry.invalid/polychrome/polychrome-state:0.1.0',
    ]);
  });

  it('image.tag and a plane digest pin the images they name', () => {
    const digest = `sha256:${'ab'.repeat(32)}`;
    const changed = diffs({ 'image.tag': '1.2.3', 'harness.image.digest': digest });
    expect(changed).toHaveLength(5);
    expect(
      changed.filter((l) => l.endsWith(`registry.invalid/polychrome/harness@${digest}`)),
    ).toHaveLength(2);
    expect(
      changed.filter((l) =>
        / -> registry\.invalid\/polychrome\/(control-plane|state):1\.2\.3$/u.test(l),
      ),
    ).toHaveLength(3);
  });

  it('controlPlane.replicas sets the control plane Deployment replicas', () => {
    expect(diffs({ 'controlPlane.replicas': 3 })).toEqual([
      'apps/v1/Deployment/polychrome-system/polychrome-control-plane spec.replicas: 2 -> 3',
    ]);
  });

  it('resources (merged into the defaults, as Helm merges maps) and storage set their fields', () => {
    const changed = diffs({
      'controlPlane.resources': { requests: { cpu: '1', memory: '512Mi' } },
      'state.storage': '50Gi',
    });
    expect(changed).toEqual([
      'apps/v1/Deployment/polychrome-system/polychrome-control-plane spec.template.spec.containers[control-plane].resources.requests.cpu: 250m -> 1',
      'apps/v1/Deployment/polychrome-system/polychrome-control-plane spec.template.spec.containers[control-plane].resources.requests.memory: 256Mi -> 512Mi',
      'apps/v1/StatefulSet/polychrome-system/polychrome-state spec.volumeClaimTemplates[journal].spec.resources.requests.storage: 10Gi -> 50Gi',
    ]);
  });

  it('conversations.namespace moves the namespace the control plane creates conversations in, and its Namespace', () => {
    const after = helmTemplate({ ...ALL_ON, 'conversations.namespace': 'team-chats' });
    const env = leafDiffs(
      helmTemplate({ 'conversations.namespace': 'team-chats' }),
      helmTemplate({}),
    );
    expect(env).toEqual([
      'apps/v1/Deployment/polychrome-system/polychrome-control-plane spec.template.spec.containers[control-plane].env[POLYCHROME_NEW_CONVERSATION_NAMESPACE].value: team-chats -> polychrome-conversations',
    ]);
    const moved = JSON.parse(
      JSON.stringify(before).replace(/"polychrome-conversations"/gu, '"team-chats"'),
    ) as Obj[];
    expectSameObjects(after, moved);
    expect(
      after
        .filter((o) => o['kind'] === 'Namespace')
        .map(objectKey)
        .sort(),
    ).toEqual(['v1/Namespace//polychrome-system', 'v1/Namespace//team-chats']);
  });

  it("the release's namespace is the base's namespace everywhere it appears", () => {
    const after = helmTemplate(ALL_ON, 'platform-ai');
    const moved = JSON.parse(
      JSON.stringify(before).replace(/polychrome-system(?![a-z0-9-])/gu, 'platform-ai'),
    ) as Obj[];
    expectSameObjects(after, moved);
    expect(JSON.stringify(after)).not.toContain('polychrome-system');
  });
});

describe('the payments values', () => {
  const wallets =
    'rbac.authorization.k8s.io/v1/Role/polychrome-system/polychrome-control-plane-wallets';
  const env = (name: string): string =>
    `apps/v1/Deployment/polychrome-system/polychrome-control-plane spec.template.spec.containers[control-plane].env[${name}].value`;

  it('payments.wallets names exactly the Secrets the control plane may get, and nothing else', () => {
    const after = helmTemplate({ ...ALL_ON, 'payments.wallets': ['treasury', 'research'] });
    expect(leafDiffs(helmTemplate(ALL_ON), after)).toEqual([
      `${wallets} rules[0].resourceNames[0]: polychrome-wallet-main -> polychrome-wallet-treasury`,
      `${wallets} rules[0].resourceNames[1]: (absent) -> polychrome-wallet-research`,
    ]);
    const role = named(after, 'Role', 'polychrome-control-plane-wallets');
    expect(role['rules']).toEqual([
      {
        apiGroups: [''],
        resources: ['secrets'],
        resourceNames: ['polychrome-wallet-treasury', 'polychrome-wallet-research'],
        verbs: ['get'],
      },
    ]);
  });

  it('payments.protocols and payments.mppTokens set the control plane variables', () => {
    const tokens = JSON.stringify([
      { network: 'eip155:8453', asset: `0x${'ab'.repeat(20)}`, name: 'USD Coin', version: '2' },
    ]);
    const after = helmTemplate({
      ...ALL_ON,
      'payments.protocols': 'mpp,x402',
      'payments.mppTokens': tokens,
    });
    expect(leafDiffs(helmTemplate(ALL_ON), after)).toEqual([
      `${env('POLYCHROME_MPP_TOKENS')}:  -> ${tokens}`,
      `${env('POLYCHROME_PAYMENT_PROTOCOLS')}: x402 -> mpp,x402`,
    ]);
  });

  it.each([
    // An empty list would be a rule without names: every Secret of the namespace.
    [{ 'payments.wallets': [] }, /payments\/wallets.*minItems/su],
    [{ 'payments.wallets': ['*'] }, /payments\/wallets\/0.*pattern/su],
    [{ 'payments.wallets': ['Main'] }, /payments\/wallets\/0.*pattern/su],
    [{ 'payments.wallets': ['main', 'main'] }, /payments\/wallets.*are equal/su],
    [{ 'payments.wallets': 'main' }, /payments\/wallets.*array/su],
    [{ 'payments.protocols': 'stripe' }, /payments\/protocols.*pattern/su],
    [{ 'payments.mppTokens': 'USD Coin' }, /payments\/mppTokens.*pattern/su],
  ])('refuses %j, naming the value', (values, message) => {
    expect(helmError({ 'payments.enabled': true, ...values })).toMatch(message);
  });
});

describe('helm lint and the values schema', () => {
  it('helm lint passes with default values and with every part on', () => {
    expect(helmLint([])).toMatch(/1 chart\(s\) linted, 0 chart\(s\) failed/u);
    const values = join(scratch, 'all-on.yaml');
    writeFileSync(
      values,
      stringify({
        kubeApi: { enabled: true },
        certManagerPki: { enabled: true },
        monitoring: { enabled: true },
        conversations: { create: true },
        payments: { enabled: true },
      }),
    );
    expect(helmLint(['--values', values])).toMatch(/0 chart\(s\) failed/u);
  });

  it.each([
    [
      { 'controlPlane.replicas': -1 },
      /controlPlane\/replicas.*minimum.*1|controlPlane.replicas.*-1/su,
    ],
    [{ 'image.registry': 5 }, /image\/registry.*(string|got number)/su],
    [{ 'image.registry': 'Registry With Spaces' }, /image\/registry.*(pattern|match)/su],
    [{ 'controlPlane.replica': 3 }, /additional propert.*replica/su],
    [{ 'conversations.namespace': 'default' }, /conversations\/namespace/su],
    [{ 'harness.image.digest': 'latest' }, /harness\/image\/digest/su],
    [{ 'monitoring.enabled': 'yes' }, /monitoring\/enabled.*boolean/su],
  ])('refuses %j, naming the value', (values, message) => {
    expect(helmError(values)).toMatch(message);
  });
});
