/**
 * The deployment manifests under config/ against the code that runs in them: the control
 * plane's Deployment sets the environment operator/config.ts reads (its header table and
 * its loader), mounts the Secrets those paths name, probes the metrics port, runs
 * restricted; the harness NetworkPolicy selects the pods both sandbox backends make and
 * admits exactly the control plane's pods, and Prometheus on the metrics port. Parsing only; test/integration/config-manifests
 * sends the same files to a real API server.
 */
import { describe, expect, it } from '@jest/globals';
import { readFileSync, readdirSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { parse, parseAllDocuments } from 'yaml';
import { loadControlPlaneConfig } from '../operator/config';
import type { Conversation } from '../operator/api/v1alpha1';
import { validMinimalConversationSpec } from '../operator/api/v1alpha1';
import { DEFAULT_HEALTH_PORT } from '../common/health-server';
import { HARNESS_PORT } from '../operator/controller/child-meta';
import {
  CONTROL_PLANE_POD_LABELS,
  controlPlaneSelector,
  PEER_PORT_NAME,
} from '../operator/public-api/peer-endpoints';
import { DEFAULT_HARNESS_IMAGE, desiredPod } from '../operator/controller/desired-pod';
import { repoRoot } from './lib/paths';

// ---- reading the manifests ------------------------------------------------------------

type Obj = Record<string, unknown>;

function isObj(value: unknown): value is Obj {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** `value` as an object, or a test failure naming `what`. */
function obj(value: unknown, what: string): Obj {
  if (!isObj(value)) throw new Error(`${what}: expected an object, got ${JSON.stringify(value)}`);
  return value;
}

/** `value` as an array of objects, or a test failure naming `what`. */
function objs(value: unknown, what: string): Obj[] {
  if (!Array.isArray(value)) throw new Error(`${what}: expected a list`);
  return value.map((v, i) => obj(v, `${what}[${i}]`));
}

function readText(path: string): string {
  return readFileSync(join(repoRoot, path), 'utf8');
}

/** Every document of a YAML file under the repository. */
function readDocs(path: string): Obj[] {
  return parseAllDocuments(readText(path)).map((d, i) => obj(d.toJS(), `${path} #${i}`));
}

function readDoc(path: string): Obj {
  return obj(parse(readText(path)), path);
}

/** The one document of `kind` named `name` in `path`. */
function find(path: string, kind: string, name: string): Obj {
  const found = readDocs(path).filter(
    (d) => d['kind'] === kind && obj(d['metadata'], 'metadata')['name'] === name,
  );
  if (found.length !== 1) throw new Error(`${path}: expected one ${kind} ${name}`);
  return found[0] as Obj;
}

interface EnvVar {
  name: string;
  value?: string;
  valueFrom?: Obj;
}

interface Container extends Obj {
  name: string;
  env?: EnvVar[];
  ports?: { name?: string; containerPort: number; protocol?: string }[];
  volumeMounts?: { name: string; mountPath: string; readOnly?: boolean }[];
}

const deployment = find(
  'config/control-plane/deployment.yaml',
  'Deployment',
  'polychrome-control-plane',
);
const deploymentSpec = obj(deployment['spec'], 'Deployment spec');
const podTemplate = obj(deploymentSpec['template'], 'Deployment pod template');
const podLabels = obj(obj(podTemplate['metadata'], 'pod metadata')['labels'], 'pod labels');
const podSpec = obj(podTemplate['spec'], 'pod spec');
const containers = objs(podSpec['containers'], 'containers') as Container[];
const container = containers.find((c) => c.name === 'control-plane') as Container;
const env = container.env ?? [];

/** The namespace kustomize gives config/'s namespaced objects. */
const baseNamespace = readDoc('config/kustomization.yaml')['namespace'];

const sandboxTemplate = find(
  'config/sandbox/sandbox-template.yaml',
  'SandboxTemplate',
  'polychrome-harness',
);
const harnessPodTemplate = obj(
  obj(sandboxTemplate['spec'], 'SandboxTemplate spec')['podTemplate'],
  'SandboxTemplate podTemplate',
);
const harnessContainer = objs(
  obj(harnessPodTemplate['spec'], 'harness pod spec')['containers'],
  'harness containers',
).find((c) => c['name'] === 'harness') as Container;
const networkPolicy = find(
  'config/sandbox/network-policy.yaml',
  'NetworkPolicy',
  'polychrome-harness',
);
const policySpec = obj(networkPolicy['spec'], 'NetworkPolicy spec');

// ---- operator/config.ts's header table --------------------------------------------------

interface ConfigRow {
  readonly names: readonly string[];
  readonly required: boolean;
}

/**
 * The rows of the variable table in the doc comment above the schema: each row's
 * backticked names (`A_B` / `_C` expands to A_B and A_C) and whether its default says
 * `required`.
 */
function configTable(source: string): ConfigRow[] {
  const rows: ConfigRow[] = [];
  for (const line of source.split('\n')) {
    const m = /^ \* \|(.*)\|\s*$/u.exec(line);
    if (m === null) continue;
    const cells = (m[1] ?? '').split(' | ').map((c) => c.trim());
    const first = cells[0] ?? '';
    if (!first.startsWith('`')) continue; // the header and the |---| line
    const names: string[] = [];
    for (const [, token] of first.matchAll(/`([A-Z_]+)`/gu)) {
      const t = token ?? '';
      const prev = names[0];
      names.push(t.startsWith('_') && prev !== undefined ? prev.replace(/_[A-Z]+$/u, '') + t : t);
    }
    rows.push({ names, required: (cells[cells.length - 1] ?? '') === 'required' });
  }
  return rows;
}

const configSource = readText('operator/config.ts');
const table = configTable(configSource);
const knownNames = new Set(table.flatMap((r) => r.names));
const requiredNames = table.filter((r) => r.required).flatMap((r) => r.names);

/** The environment the container gets, downward-API values filled in as a kubelet would. */
function containerEnv(): Record<string, string> {
  const out: Record<string, string> = {};
  const fields: Record<string, string> = {
    'metadata.name': 'polychrome-control-plane-6d9f-abcde',
    'metadata.namespace': String(baseNamespace),
    'status.podIP': '10.1.2.3',
  };
  for (const v of env) {
    if (v.value !== undefined) out[v.name] = v.value;
    const fieldPath = isObj(v.valueFrom?.['fieldRef']) ? v.valueFrom['fieldRef']['fieldPath'] : '';
    if (typeof fieldPath === 'string' && fields[fieldPath] !== undefined)
      out[v.name] = fields[fieldPath];
  }
  return out;
}

/** Secret and key behind a file path, through the container's mounts and the pod's volumes. */
function secretFileAt(path: string): { secret: unknown; key: string } | undefined {
  const mount = container.volumeMounts?.find((m) => m.mountPath === dirname(path));
  if (mount === undefined) return undefined;
  const volume = objs(podSpec['volumes'], 'volumes').find((v) => v['name'] === mount.name);
  if (volume === undefined || !isObj(volume['secret'])) return undefined;
  const secret = volume['secret'];
  const items = secret['items'];
  const key = Array.isArray(items)
    ? items.filter(isObj).find((i) => i['path'] === basename(path))?.['key']
    : basename(path);
  return typeof key === 'string' ? { secret: secret['secretName'], key } : undefined;
}

/** The container port `port` (a name or a number) refers to. */
function containerPort(c: Container, port: unknown): number | undefined {
  return typeof port === 'number'
    ? c.ports?.find((p) => p.containerPort === port)?.containerPort
    : c.ports?.find((p) => p.name === port)?.containerPort;
}

/** A metav1.LabelSelector matches `labels` (matchLabels and matchExpressions). */
function selects(selector: unknown, labels: Obj): boolean {
  if (!isObj(selector)) return false;
  const matchLabels = isObj(selector['matchLabels']) ? selector['matchLabels'] : {};
  const exprs = Array.isArray(selector['matchExpressions']) ? selector['matchExpressions'] : [];
  if (Object.keys(matchLabels).length === 0 && exprs.length === 0) return true;
  return (
    Object.entries(matchLabels).every(([k, v]) => labels[k] === v) &&
    exprs.filter(isObj).every((e) => {
      const has = Object.hasOwn(labels, String(e['key']));
      const values = Array.isArray(e['values']) ? e['values'] : [];
      const value = labels[String(e['key'])];
      switch (e['operator']) {
        case 'In':
          return has && values.includes(value);
        case 'NotIn':
          return !has || !values.includes(value);
        case 'Exists':
          return has;
        case 'DoesNotExist':
          return !has;
        default:
          return false;
      }
    })
  );
}

// ---- the tests -------------------------------------------------------------------------

describe('operator/config.ts header table', () => {
  it('parses every variable the schema reads, with A / _B shorthand expanded', () => {
    expect(table.length).toBeGreaterThanOrEqual(20);
    expect(knownNames).toContain('POLYCHROME_STATE_CERT');
    expect(knownNames).toContain('POLYCHROME_API_PORT');
    // Every name the table gives is a key of the zod schema below it.
    for (const name of knownNames) expect(configSource).toMatch(new RegExp(`\\n\\s+${name}: env`));
    expect(requiredNames).toEqual(
      expect.arrayContaining([
        'POLYCHROME_STATE_ADDRESS',
        'POLYCHROME_STATE_CA',
        'POLYCHROME_STATE_KEY',
        'POLYCHROME_HARNESS_TOKEN_FILE',
        'POLYCHROME_APPROVAL_KEY_FILE',
      ]),
    );
  });

  it('reads shorthand rows and the required column as written', () => {
    const rows = configTable(
      [
        ' * | variable | meaning | default |',
        ' * |---|---|---|',
        ' * | `X_CA` / `_CERT` | files | required |',
        ' * | `Y_PORT` | a port | 8080 |',
      ].join('\n'),
    );
    expect(rows).toEqual([
      { names: ['X_CA', 'X_CERT'], required: true },
      { names: ['Y_PORT'], required: false },
    ]);
  });
});

describe('config/control-plane Deployment', () => {
  it('sets only variables operator/config.ts knows, each once, and every required one', () => {
    const names = env.map((v) => v.name);
    expect(new Set(names).size).toBe(names.length);
    const unknown = names.filter((n) => n.startsWith('POLYCHROME_') && !knownNames.has(n));
    expect(unknown).toEqual([]);
    const missing = requiredNames.filter((n) => !names.includes(n));
    expect(missing).toEqual([]);
  });

  it('gives POD_NAME and POD_NAMESPACE from the downward API', () => {
    expect(env.find((v) => v.name === 'POD_NAME')?.valueFrom).toEqual({
      fieldRef: { fieldPath: 'metadata.name' },
    });
    expect(env.find((v) => v.name === 'POD_NAMESPACE')?.valueFrom).toEqual({
      fieldRef: { fieldPath: 'metadata.namespace' },
    });
  });

  it('passes the control plane config loader, and its ports and identity match the pod', () => {
    const config = loadControlPlaneConfig(containerEnv());
    expect(config.identity).toBe('polychrome-control-plane-6d9f-abcde');
    expect(config.api.port).toBe(containerPort(container, 'api'));
    expect(config.api.port).toBe(8080);
    expect(config.health.port).toBe(containerPort(container, 'metrics'));
    expect(config.health.port).toBe(9090);
    // Other replicas dial this pod's IP on its container port named https-peer.
    expect(config.peer.port).toBe(containerPort(container, PEER_PORT_NAME));
    // Above the preStop sleep plus the process's own grace period, or the kubelet kills a
    // clean shutdown midway.
    const preStop = obj(container['lifecycle'], 'lifecycle')['preStop'];
    const sleep =
      isObj(preStop) && isObj(preStop['sleep']) ? Number(preStop['sleep']['seconds']) : 0;
    expect(Number(podSpec['terminationGracePeriodSeconds']) * 1000).toBeGreaterThan(
      sleep * 1000 + config.shutdownGraceMs,
    );
  });

  it('dials the state Service on its gRPC port, in the namespace the base deploys to', () => {
    const config = loadControlPlaneConfig(containerEnv());
    const service = find('config/state/services.yaml', 'Service', 'polychrome-state');
    const grpc = objs(obj(service['spec'], 'state Service spec')['ports'], 'ports').find(
      (p) => p['name'] === 'grpc',
    );
    expect(config.state.address).toBe(
      `polychrome-state.${String(baseNamespace)}.svc:${Number(grpc?.['port'])}`,
    );
    expect(config.state.serverName).toBeUndefined();
  });

  it('reads the mTLS files from polychrome-control-plane-tls, keyed like the state plane', () => {
    const config = loadControlPlaneConfig(containerEnv());
    const ca = secretFileAt(config.state.caPath);
    const cert = secretFileAt(config.state.certPath);
    const key = secretFileAt(config.state.keyPath);
    expect([ca, cert, key]).toEqual([
      { secret: 'polychrome-control-plane-tls', key: 'ca.crt' },
      { secret: 'polychrome-control-plane-tls', key: 'tls.crt' },
      { secret: 'polychrome-control-plane-tls', key: 'tls.key' },
    ]);
    // The state plane's own Secret carries the same three keys (a kubernetes.io/tls Secret
    // plus ca.crt), so one issuer recipe serves both.
    const state = find('config/state/stateful-set.yaml', 'StatefulSet', 'polychrome-state');
    const stateEnv = objs(
      objs(
        obj(obj(obj(state['spec'], 'spec')['template'], 'template')['spec'], 'spec')['containers'],
        'c',
      )[0]?.['env'],
      'state env',
    );
    const stateKeys = ['STATE_TLS_CA_FILE', 'STATE_TLS_CERT_FILE', 'STATE_TLS_KEY_FILE'].map((n) =>
      basename(String(stateEnv.find((v) => v['name'] === n)?.['value'])),
    );
    expect([ca?.key, cert?.key, key?.key]).toEqual(stateKeys);
  });

  it('reads the harness token from the Secret and key the SandboxTemplate gives harness pods', () => {
    const config = loadControlPlaneConfig(containerEnv());
    const harnessToken = harnessContainer.env?.find((v) => v.name === 'HARNESS_AUTH_TOKEN');
    const ref = obj(harnessToken?.valueFrom?.['secretKeyRef'], 'HARNESS_AUTH_TOKEN secretKeyRef');
    expect(secretFileAt(config.turns.harnessTokenPath)).toEqual({
      secret: ref['name'],
      key: ref['key'],
    });
    expect(ref).toMatchObject({ name: 'polychrome-harness', key: 'token' });
  });

  it('reads the approval key from polychrome-approval-key, key key.pem', () => {
    const config = loadControlPlaneConfig(containerEnv());
    expect(secretFileAt(config.turns.approvalKeyPath)).toEqual({
      secret: 'polychrome-approval-key',
      key: 'key.pem',
    });
  });

  it('mounts every Secret read-only and names the harness image the SandboxTemplate runs', () => {
    const secretVolumes = objs(podSpec['volumes'], 'volumes')
      .filter((v) => isObj(v['secret']))
      .map((v) => v['name']);
    expect(secretVolumes.length).toBe(3);
    for (const name of secretVolumes) {
      expect(container.volumeMounts?.find((m) => m.name === name)?.readOnly).toBe(true);
    }
    const config = loadControlPlaneConfig(containerEnv());
    expect(config.harnessImage).toBe(harnessContainer['image']);
    expect(config.harnessImage).not.toBe(DEFAULT_HARNESS_IMAGE);
  });

  it('runs with the restricted security context', () => {
    const pod = obj(podSpec['securityContext'], 'pod securityContext');
    expect(pod['runAsNonRoot']).toBe(true);
    expect(pod['runAsUser']).not.toBe(0);
    expect(pod['seccompProfile']).toEqual({ type: 'RuntimeDefault' });
    expect(podSpec['hostNetwork'] ?? false).toBe(false);
    expect(podSpec['hostPID'] ?? false).toBe(false);
    for (const c of containers) {
      const sc = obj(c['securityContext'], `${c.name} securityContext`);
      expect(sc['allowPrivilegeEscalation']).toBe(false);
      expect(sc['readOnlyRootFilesystem']).toBe(true);
      expect(sc['privileged'] ?? false).toBe(false);
      const caps = obj(sc['capabilities'], 'capabilities');
      expect(caps['drop']).toEqual(['ALL']);
      expect(caps['add'] ?? []).toEqual([]);
    }
  });

  it('runs as the ServiceAccount config/rbac binds, with its token mounted', () => {
    expect(podSpec['serviceAccountName']).toBe('polychrome-control-plane');
    expect(podSpec['automountServiceAccountToken']).toBe(true);
    find('config/rbac/service-account.yaml', 'ServiceAccount', 'polychrome-control-plane');
    const binding = find(
      'config/rbac/role-binding.yaml',
      'ClusterRoleBinding',
      'polychrome-control-plane',
    );
    expect(binding['subjects']).toContainEqual({
      kind: 'ServiceAccount',
      name: podSpec['serviceAccountName'],
      namespace: baseNamespace,
    });
  });

  it('may list and watch pods in its own namespace, to find its peers, and nothing else there', () => {
    const role = find('config/rbac/peer-role.yaml', 'Role', 'polychrome-control-plane-peers');
    expect(role['rules']).toEqual([
      { apiGroups: [''], resources: ['pods'], verbs: ['list', 'watch'] },
    ]);
    const binding = find(
      'config/rbac/peer-role.yaml',
      'RoleBinding',
      'polychrome-control-plane-peers',
    );
    expect(binding['roleRef']).toEqual({
      apiGroup: 'rbac.authorization.k8s.io',
      kind: 'Role',
      name: 'polychrome-control-plane-peers',
    });
    expect(binding['subjects']).toEqual([
      { kind: 'ServiceAccount', name: podSpec['serviceAccountName'], namespace: baseNamespace },
    ]);
    // The Role lands in the namespace the replicas look in.
    expect(loadControlPlaneConfig(containerEnv()).peer.namespace).toBe(baseNamespace);
  });

  it('labels its pods as the peer lookup selects them', () => {
    // A replica accepts a peer only among pods with these labels: the Deployment's pods
    // must carry them, and its selector is exactly them.
    expect(podLabels).toMatchObject(CONTROL_PLANE_POD_LABELS);
    expect(obj(deploymentSpec['selector'], 'selector')['matchLabels']).toEqual(
      CONTROL_PLANE_POD_LABELS,
    );
    expect(controlPlaneSelector()).toBe('app.kubernetes.io/name=polychrome-control-plane');
  });

  it('probes /readyz, /healthz and startup on the metrics port the config listens on', () => {
    const config = loadControlPlaneConfig(containerEnv());
    const probe = (kind: string): Obj =>
      obj(obj(container[kind], kind)['httpGet'], `${kind}.httpGet`);
    expect(probe('readinessProbe')['path']).toBe('/readyz');
    expect(probe('livenessProbe')['path']).toBe('/healthz');
    expect(probe('startupProbe')['path']).toBe('/healthz');
    for (const kind of ['readinessProbe', 'livenessProbe', 'startupProbe']) {
      expect(containerPort(container, probe(kind)['port'])).toBe(config.health.port);
    }
  });

  it('sets requests and a memory limit', () => {
    const resources = obj(container['resources'], 'resources');
    expect(obj(resources['requests'], 'requests')).toMatchObject({
      cpu: expect.any(String),
      memory: expect.any(String),
    });
    expect(obj(resources['limits'], 'limits')['memory']).toEqual(expect.any(String));
  });

  it('runs two replicas that a selector, a node spread and a disruption budget agree on', () => {
    expect(deploymentSpec['replicas']).toBe(2);
    expect(selects(deploymentSpec['selector'], podLabels)).toBe(true);
    const spread = objs(podSpec['topologySpreadConstraints'], 'topologySpreadConstraints');
    const perNode = spread.find((c) => c['topologyKey'] === 'kubernetes.io/hostname');
    expect(perNode).toMatchObject({ maxSkew: 1, whenUnsatisfiable: 'DoNotSchedule' });
    expect(selects(perNode?.['labelSelector'], podLabels)).toBe(true);
    const pdb = find(
      'config/control-plane/pod-disruption-budget.yaml',
      'PodDisruptionBudget',
      'polychrome-control-plane',
    );
    const pdbSpec = obj(pdb['spec'], 'PodDisruptionBudget spec');
    expect(pdbSpec['minAvailable']).toBe(1);
    expect(selects(pdbSpec['selector'], podLabels)).toBe(true);
  });

  it('is served by the Service: http-api on the API port, metrics on the metrics port, no peer port', () => {
    const service = find(
      'config/control-plane/service.yaml',
      'Service',
      'polychrome-control-plane',
    );
    const spec = obj(service['spec'], 'Service spec');
    expect(selects({ matchLabels: spec['selector'] }, podLabels)).toBe(true);
    const ports = objs(spec['ports'], 'Service ports').map((p) => ({
      name: p['name'],
      port: p['port'],
      target: containerPort(container, p['targetPort'] ?? p['port']),
    }));
    expect(ports).toEqual([
      { name: 'http-api', port: 8080, target: 8080 },
      { name: 'metrics', port: 9090, target: 9090 },
    ]);
  });
});

describe('images', () => {
  const version = (JSON.parse(readText('package.json')) as { version: string }).version;
  /** Each image the manifests run, by where it is named. */
  const named: Record<string, unknown> = {
    'control-plane Deployment': container['image'],
    'control-plane POLYCHROME_HARNESS_IMAGE': env.find((e) => e.name === 'POLYCHROME_HARNESS_IMAGE')
      ?.value,
    'state StatefulSet': obj(
      objs(
        obj(
          obj(
            obj(
              find('config/state/stateful-set.yaml', 'StatefulSet', 'polychrome-state')['spec'],
              'StatefulSet spec',
            )['template'],
            'StatefulSet template',
          )['spec'],
          'StatefulSet pod spec',
        )['containers'],
        'StatefulSet containers',
      )[0],
      'state container',
    )['image'],
    'SandboxTemplate harness': harnessContainer['image'],
  };

  it.each(Object.entries(named))(
    '%s names the registry placeholder, a Polychrome repository and the package version',
    (_where, image) => {
      // An unqualified name would be pulled from Docker Hub, where anyone may own
      // `polychrome/…`; the placeholder cannot resolve, so an overlay must set the registry.
      expect(image).toMatch(
        new RegExp(
          `^registry\\.invalid/polychrome/(control-plane|state|harness):${version.replace(/\./g, '\\.')}$`,
          'u',
        ),
      );
    },
  );

  it('names each plane once: the Deployment, the StatefulSet and the harness differ', () => {
    const repositories = new Set(
      Object.entries(named)
        .filter(([where]) => where !== 'control-plane POLYCHROME_HARNESS_IMAGE')
        .map(([, image]) => String(image).split(':')[0]),
    );
    expect(repositories.size).toBe(3);
  });
});

describe('kustomizations', () => {
  const resourcesOf = (path: string): unknown => readDoc(path)['resources'];
  const yamlFilesIn = (dir: string): string[] =>
    readdirSync(join(repoRoot, dir))
      .filter((f) => f.endsWith('.yaml') && f !== 'kustomization.yaml')
      .sort();

  it('the base includes config/control-plane, which lists every file in it', () => {
    expect(resourcesOf('config/kustomization.yaml')).toContain('control-plane');
    expect(
      [...(resourcesOf('config/control-plane/kustomization.yaml') as string[])].sort(),
    ).toEqual(yamlFilesIn('config/control-plane'));
  });

  it('config/sandbox lists every file in it, the NetworkPolicy included', () => {
    expect([...(resourcesOf('config/sandbox/kustomization.yaml') as string[])].sort()).toEqual(
      yamlFilesIn('config/sandbox'),
    );
    expect(resourcesOf('config/sandbox/kustomization.yaml')).toContain('network-policy.yaml');
  });
});

describe('config/sandbox NetworkPolicy', () => {
  const conversation = {
    apiVersion: 'polychrome.dev/v1alpha1',
    kind: 'Conversation',
    metadata: { name: 'c1', namespace: 'team', uid: '5a1d4c9e-0000-4000-8000-000000000001' },
    spec: { ...validMinimalConversationSpec, sandbox: { backend: 'pod' } },
  } as unknown as Conversation;

  it('selects harness pods of both backends and not the control plane', () => {
    const templateLabels = obj(
      obj(harnessPodTemplate['metadata'], 'podTemplate metadata')['labels'],
      'podTemplate labels',
    );
    const plainPod = desiredPod({ conversation, harnessImage: 'polychrome/harness:0.1.0' });
    expect(selects(policySpec['podSelector'], templateLabels)).toBe(true);
    expect(selects(policySpec['podSelector'], plainPod.metadata.labels)).toBe(true);
    expect(selects(policySpec['podSelector'], podLabels)).toBe(false);
    // An empty selector would select every pod of the namespace.
    expect(
      Object.keys(obj(policySpec['podSelector'], 'podSelector')['matchLabels'] ?? {}),
    ).not.toEqual([]);
  });

  it('restricts both directions', () => {
    expect([...(policySpec['policyTypes'] as string[])].sort()).toEqual(['Egress', 'Ingress']);
  });

  it('admits only the control plane pods of the base namespace, on the harness port', () => {
    const ingress = objs(policySpec['ingress'], 'ingress');
    // The control plane's rule and the monitoring rule (next test), nothing else.
    expect(ingress).toHaveLength(2);
    const rule = ingress[0] as Obj;
    const peers = objs(rule['from'], 'from');
    expect(peers.length).toBeGreaterThan(0);
    for (const peer of peers) {
      expect(peer['ipBlock']).toBeUndefined();
      expect(selects(peer['podSelector'], podLabels)).toBe(true);
      expect(selects(peer['podSelector'], { 'app.kubernetes.io/name': 'polychrome-harness' })).toBe(
        false,
      );
      expect(
        selects(peer['namespaceSelector'], { 'kubernetes.io/metadata.name': baseNamespace }),
      ).toBe(true);
      expect(selects(peer['namespaceSelector'], { 'kubernetes.io/metadata.name': 'team-a' })).toBe(
        false,
      );
    }
    expect(rule['ports']).toEqual([{ protocol: 'TCP', port: HARNESS_PORT }]);
    expect(containerPort(harnessContainer, 'grpc')).toBe(HARNESS_PORT);
    // agent-sandbox's own policy (from the template) admits the same peers.
    expect(
      obj(obj(sandboxTemplate['spec'], 'spec')['networkPolicy'], 'networkPolicy')['ingress'],
    ).toEqual(policySpec['ingress']);
  });

  it('admits scrapes from pods of the monitoring namespace on the metrics port only', () => {
    const rule = objs(policySpec['ingress'], 'ingress')[1] as Obj;
    const peers = objs(rule['from'], 'from');
    expect(peers).toHaveLength(1);
    const peer = peers[0] as Obj;
    expect(peer['ipBlock']).toBeUndefined();
    expect(
      selects(peer['namespaceSelector'], { 'kubernetes.io/metadata.name': 'monitoring' }),
    ).toBe(true);
    // Not the conversation's own namespace, not the base's, not a namespace that only claims
    // a `monitoring` label of another key.
    for (const labels of [
      { 'kubernetes.io/metadata.name': 'team-a' },
      { 'kubernetes.io/metadata.name': baseNamespace },
      { monitoring: 'true', 'kubernetes.io/metadata.name': 'evil' },
    ]) {
      expect(selects(peer['namespaceSelector'], labels)).toBe(false);
    }
    // Only the side port, which the harness names `metrics` (the PodMonitor's port).
    expect(rule['ports']).toEqual([{ protocol: 'TCP', port: 9090 }]);
    expect(containerPort(harnessContainer, 'metrics')).toBe(9090);
    expect(containerPort(harnessContainer, 'metrics')).toBe(DEFAULT_HEALTH_PORT);
    // The harness gRPC port is not open to the monitoring namespace.
    expect(objs(rule['ports'], 'ports').map((p) => p['port'])).not.toContain(HARNESS_PORT);
  });

  it('lets harness pods out only to DNS and HTTPS', () => {
    const egress = objs(policySpec['egress'], 'egress');
    const allowed = egress.flatMap((rule) => {
      // A rule without ports allows every port of its destinations.
      const ports = objs(rule['ports'], 'egress ports');
      expect(ports.length).toBeGreaterThan(0);
      return ports.map((p) => {
        const protocol = typeof p['protocol'] === 'string' ? p['protocol'] : 'TCP';
        return `${protocol}/${Number(p['port'])}`;
      });
    });
    expect(allowed.sort()).toEqual(['TCP/443', 'TCP/53', 'UDP/53']);
    for (const rule of egress) {
      for (const p of objs(rule['ports'], 'ports')) expect(p['endPort']).toBeUndefined();
    }
  });
});

describe('config/monitoring', () => {
  const monitor = (path: string, kind: string, name: string): Obj =>
    obj(find(`config/monitoring/${path}`, kind, name)['spec'], `${kind} ${name} spec`);
  /** The container port a Service port named `metrics` reaches in `c`. */
  const metricsTarget = (service: Obj, c: Container): number | undefined => {
    const port = objs(obj(service['spec'], 'Service spec')['ports'], 'ports').find(
      (p) => p['name'] === 'metrics',
    );
    return port === undefined ? undefined : containerPort(c, port['targetPort'] ?? port['port']);
  };
  const statefulSet = find('config/state/stateful-set.yaml', 'StatefulSet', 'polychrome-state');
  const stateTemplate = obj(obj(statefulSet['spec'], 'spec')['template'], 'template');
  const stateLabels = obj(obj(stateTemplate['metadata'], 'metadata')['labels'], 'labels');
  const stateContainer = objs(obj(stateTemplate['spec'], 'spec')['containers'], 'containers').find(
    (c) => c['name'] === 'state',
  ) as Container;

  it('lists its three files and is not part of the base (which must sync without these CRDs)', () => {
    expect(
      [...(readDoc('config/monitoring/kustomization.yaml')['resources'] as string[])].sort(),
    ).toEqual(['pod-monitor.yaml', 'prometheus-rule.yaml', 'service-monitors.yaml']);
    expect(readDoc('config/kustomization.yaml')['resources']).not.toContain('monitoring');
    expect(readDoc('config/monitoring/kustomization.yaml')['namespace']).toBe(baseNamespace);
  });

  it('scrapes the control plane Service, whose metrics port reaches the container port named metrics', () => {
    const spec = monitor('service-monitors.yaml', 'ServiceMonitor', 'polychrome-control-plane');
    const service = find(
      'config/control-plane/service.yaml',
      'Service',
      'polychrome-control-plane',
    );
    expect(selects(spec['selector'], obj(service['metadata'], 'metadata')['labels'] as Obj)).toBe(
      true,
    );
    expect(objs(spec['endpoints'], 'endpoints').map((e) => e['port'])).toEqual(['metrics']);
    expect(metricsTarget(service, container)).toBe(containerPort(container, 'metrics'));
    expect(containerPort(container, 'metrics')).toBe(DEFAULT_HEALTH_PORT);
    // Its job is the Service's name label, which the rules' `job=` matchers use.
    expect(spec['jobLabel']).toBe('app.kubernetes.io/name');
  });

  it('scrapes the state plane Service (not the control plane), whose metrics port reaches the state container', () => {
    const spec = monitor('service-monitors.yaml', 'ServiceMonitor', 'polychrome-state');
    const service = find('config/state/services.yaml', 'Service', 'polychrome-state');
    const serviceLabels = obj(service['metadata'], 'metadata')['labels'] as Obj;
    expect(selects(spec['selector'], serviceLabels)).toBe(true);
    expect(selects(obj(service['spec'], 'spec')['selector'], stateLabels)).toBe(true);
    expect(selects(spec['selector'], podLabels)).toBe(false);
    expect(objs(spec['endpoints'], 'endpoints').map((e) => e['port'])).toEqual(['metrics']);
    expect(metricsTarget(service, stateContainer)).toBe(DEFAULT_HEALTH_PORT);
    expect(containerPort(stateContainer, 'metrics')).toBe(DEFAULT_HEALTH_PORT);
  });

  it('scrapes harness pods of both backends in every namespace, on their port named metrics', () => {
    const spec = monitor('pod-monitor.yaml', 'PodMonitor', 'polychrome-harness');
    const templateLabels = obj(
      obj(harnessPodTemplate['metadata'], 'podTemplate metadata')['labels'],
      'podTemplate labels',
    );
    const plainPod = desiredPod({
      conversation: {
        apiVersion: 'polychrome.dev/v1alpha1',
        kind: 'Conversation',
        metadata: { name: 'c1', namespace: 'team', uid: '5a1d4c9e-0000-4000-8000-000000000002' },
        spec: { ...validMinimalConversationSpec, sandbox: { backend: 'pod' } },
      } as unknown as Conversation,
      harnessImage: 'polychrome/harness:0.1.0',
    });
    expect(selects(spec['selector'], templateLabels)).toBe(true);
    expect(selects(spec['selector'], plainPod.metadata.labels)).toBe(true);
    expect(selects(spec['selector'], podLabels)).toBe(false);
    expect(spec['namespaceSelector']).toEqual({ any: true });
    const endpoints = objs(spec['podMetricsEndpoints'], 'podMetricsEndpoints');
    expect(endpoints.map((e) => e['port'])).toEqual(['metrics']);
    expect(containerPort(harnessContainer, 'metrics')).toBe(DEFAULT_HEALTH_PORT);
    const plainContainer = plainPod.spec.containers[0] as unknown as Container;
    expect(containerPort(plainContainer, 'metrics')).toBe(DEFAULT_HEALTH_PORT);
    // The port the NetworkPolicy opens to the monitoring namespace.
    expect(objs(policySpec['ingress'], 'ingress')[1]?.['ports']).toEqual([
      { protocol: 'TCP', port: DEFAULT_HEALTH_PORT },
    ]);
  });

  it('gives every alert a severity, a summary, a description and a runbook that docs/observability.md has', () => {
    const spec = monitor('prometheus-rule.yaml', 'PrometheusRule', 'polychrome');
    const rules = objs(spec['groups'], 'groups').flatMap((g) => objs(g['rules'], 'rules'));
    const alerts = rules.filter((r) => typeof r['alert'] === 'string');
    expect(alerts.map((a) => a['alert'])).toEqual(
      expect.arrayContaining([
        'PolychromeStatePlaneDown',
        'PolychromeStatePlaneNotReady',
        'PolychromeStateAppendsFailing',
        'PolychromeTurnQuarantined',
        'PolychromeTurnLatencyHigh',
        'PolychromeLeasesChurning',
        'PolychromeJournalVerifyFailed',
      ]),
    );
    // Headings of the doc, as anchors (GitHub: lower case, spaces to dashes).
    const anchors = new Set(
      readText('docs/observability.md')
        .split('\n')
        .filter((l) => /^#{2,4} /.test(l))
        .map((l) => l.replace(/^#+ /, '').trim().toLowerCase().replace(/ /g, '-')),
    );
    for (const alert of alerts) {
      const name = String(alert['alert']);
      const labels = obj(alert['labels'], `${name} labels`);
      const annotations = obj(alert['annotations'], `${name} annotations`);
      expect({ name, severity: labels['severity'] }).toEqual({
        name,
        severity: expect.stringMatching(/^(critical|warning)$/),
      });
      expect({ name, summary: annotations['summary'] }).toEqual({
        name,
        summary: expect.stringMatching(/\S/),
      });
      expect({ name, description: annotations['description'] }).toEqual({
        name,
        description: expect.stringMatching(/\S{3,}.* .*\S/),
      });
      expect({ name, runbook: annotations['runbook_url'] }).toEqual({
        name,
        runbook: `docs/observability.md#${name.toLowerCase()}`,
      });
      expect({ name, documented: anchors.has(name.toLowerCase()) }).toEqual({
        name,
        documented: true,
      });
    }
  });
});
