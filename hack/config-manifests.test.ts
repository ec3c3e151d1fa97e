/**
 * The deployment manifests under config/, as the real `kubectl kustomize` builds them,
 * against the code that runs in them: the control plane's Deployment sets the environment
 * operator/config.ts reads (its header table and its loader), mounts the Secrets those paths
 * name, probes the metrics port, runs restricted; the harness NetworkPolicy selects the pods
 * both sandbox backends make and admits exactly the control plane's pods, and Prometheus on
 * the metrics port. The base's shape for Argo CD: one namespace set in one place, cluster-scoped
 * objects in config/cluster only and in an earlier sync wave, every image settable with
 * `images:`, the example Application. No API server; test/integration/config-manifests sends
 * the same builds to a real one.
 */
import { ONBOARDING_LABEL } from '../operator/api/v1alpha1/conversation-values';
import { afterAll, describe, expect, it } from '@jest/globals';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, dirname, join, relative } from 'node:path';
import { parse, parseAllDocuments, stringify } from 'yaml';
import { loadControlPlaneConfig } from '../operator/config';
import { ONBOARDED_REFS } from '../operator/onboarding/catalog';
import type { Conversation } from '../operator/api/v1alpha1/conversation-types';
import { validMinimalConversationSpec } from '../operator/api/v1alpha1/conversation-cases';
import { DEFAULT_HEALTH_PORT } from '../common/health-server';
import { HARNESS_PORT } from '../operator/controller/child-meta';
import {
  CONTROL_PLANE_POD_LABELS,
  controlPlaneSelector,
  PEER_PORT_NAME,
} from '../operator/public-api/peer-endpoints';
import { DEFAULT_HARNESS_IMAGE, desiredPod } from '../operator/controller/desired-pod';
import {
  HARNESS_EGRESS_POLICY_NAME,
  harnessEgressPolicy,
} from '../operator/controller/harness-egress';
import { defaultBinDir, repoRoot } from './lib/paths';
import {
  CA_COMMON_NAMES,
  CONTROL_PLANE_ROLES,
  DEFAULT_LIFETIMES,
  leafSpecs,
  SECRET_NAMES,
  SecretName,
  type CaName,
} from '../operator/provision/catalog';
import { loadProvisionConfig } from '../operator/provision/config';
import { contentOf } from '../operator/provision/materials';
import type { Material } from '../operator/provision/plan';
import { mintCa } from '../operator/provision/x509-mint';

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

function readDoc(path: string): Obj {
  return obj(parse(readText(path)), path);
}

/** The objects `kubectl kustomize` (the kustomize built into the pinned kubectl) builds from `dir`. */
function kustomize(dir: string): Obj[] {
  const kubectl = join(defaultBinDir, 'kubectl');
  if (!existsSync(kubectl)) throw new Error(`${kubectl} is missing: run 'make binaries'`);
  const out = execFileSync(kubectl, ['kustomize', dir], {
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  return parseAllDocuments(out).map((d, i) => obj(d.toJS(), `${dir} #${i}`));
}

/** The build of a kustomization under config/. */
function build(dir: string): Obj[] {
  return kustomize(join(repoRoot, dir));
}

const metadataOf = (o: Obj): Obj => obj(o['metadata'], `${String(o['kind'])} metadata`);
const keyOf = (o: Obj): string => `${String(o['kind'])}/${String(metadataOf(o)['name'])}`;

/** The one object of `kind` named `name` among `objects` (a build, `what` naming it). */
function find(objects: readonly Obj[], kind: string, name: string, what = 'config/default'): Obj {
  const found = objects.filter((d) => d['kind'] === kind && metadataOf(d)['name'] === name);
  if (found.length !== 1) throw new Error(`${what}: expected one ${kind} ${name}`);
  return found[0] as Obj;
}

/**
 * The base, the base with the opt-in Kubernetes door (config/with-kube-api), config/sandbox
 * and config/monitoring, as kustomize builds them.
 */
const base = build('config/default');
const withDoor = build('config/with-kube-api');
const sandbox = build('config/sandbox');
const monitoring = build('config/monitoring');

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

/** The control plane's Deployment with the door's patch: all of the base's, and the door's port, Secret and variables. */
const deployment = find(withDoor, 'Deployment', 'polychrome-control-plane', 'config/with-kube-api');
const deploymentSpec = obj(deployment['spec'], 'Deployment spec');
const podTemplate = obj(deploymentSpec['template'], 'Deployment pod template');
const podLabels = obj(obj(podTemplate['metadata'], 'pod metadata')['labels'], 'pod labels');
const podSpec = obj(podTemplate['spec'], 'pod spec');
const containers = objs(podSpec['containers'], 'containers') as Container[];
const container = containers.find((c) => c.name === 'control-plane') as Container;
const env = container.env ?? [];

/** The namespace kustomize gives the base's namespaced objects, set in config/default only. */
const baseNamespace = readDoc('config/default/kustomization.yaml')['namespace'];

const sandboxTemplate = find(sandbox, 'SandboxTemplate', 'polychrome-harness', 'config/sandbox');
const harnessPodTemplate = obj(
  obj(sandboxTemplate['spec'], 'SandboxTemplate spec')['podTemplate'],
  'SandboxTemplate podTemplate',
);
const harnessContainer = objs(
  obj(harnessPodTemplate['spec'], 'harness pod spec')['containers'],
  'harness containers',
).find((c) => c['name'] === 'harness') as Container;
const networkPolicy = find(sandbox, 'NetworkPolicy', 'polychrome-harness', 'config/sandbox');
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
/** The payment settings' own table (operator/payments/payment-config.ts), read by the same process. */
const paymentTable = configTable(readText('operator/payments/payment-config.ts'));
const knownNames = new Set([...table, ...paymentTable].flatMap((r) => r.names));
const requiredNames = table.filter((r) => r.required).flatMap((r) => r.names);

/**
 * The environment a container with `vars` gets in namespace `namespace`, as a kubelet gives
 * it: downward-API values filled in, and `$(NAME)` in a value replaced by a variable defined
 * earlier in the list (left as written otherwise; `$$` escapes).
 */
function containerEnv(
  vars: readonly EnvVar[] = env,
  namespace = String(baseNamespace),
): Record<string, string> {
  const out: Record<string, string> = {};
  const fields: Record<string, string> = {
    'metadata.name': 'polychrome-control-plane-6d9f-abcde',
    'metadata.namespace': namespace,
    'status.podIP': '10.1.2.3',
  };
  for (const v of vars) {
    if (v.value !== undefined) {
      out[v.name] = v.value.replace(
        /\$\$|\$\(([A-Za-z_][A-Za-z0-9_]*)\)/gu,
        (ref, name?: string) => (name === undefined ? '$' : (out[name] ?? ref)),
      );
    }
    const fieldPath = isObj(v.valueFrom?.['fieldRef']) ? v.valueFrom['fieldRef']['fieldPath'] : '';
    if (typeof fieldPath === 'string' && fields[fieldPath] !== undefined)
      out[v.name] = fields[fieldPath];
  }
  return out;
}

/**
 * Secret and key behind a file path, through the container's mounts and the pod's volumes
 * (the control plane's, unless another container and pod spec are given).
 */
function secretFileAt(
  path: string,
  inContainer: Container = container,
  inPod: Obj = podSpec,
): { secret: unknown; key: string } | undefined {
  const mount = inContainer.volumeMounts?.find((m) => m.mountPath === dirname(path));
  if (mount === undefined) return undefined;
  const volume = objs(inPod['volumes'], 'volumes').find((v) => v['name'] === mount.name);
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
    for (const name of table.flatMap((r) => r.names))
      expect(configSource).toMatch(new RegExp(`\\n\\s+${name}: env`));
    expect(requiredNames).toEqual(
      expect.arrayContaining([
        'POLYCHROME_STATE_ADDRESS',
        'POLYCHROME_STATE_CA',
        'POLYCHROME_STATE_KEY',
        'POLYCHROME_HARNESS_CA_FILE',
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
  it('sets only variables operator/config.ts (or its payment settings) knows, each once, and every required one', () => {
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
    const service = find(base, 'Service', 'polychrome-state');
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
    const state = find(base, 'StatefulSet', 'polychrome-state');
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

  it('reads the harness CA from polychrome-harness-ca; harness pods serve the pair of polychrome-harness-tls', () => {
    const config = loadControlPlaneConfig(containerEnv());
    expect(secretFileAt(config.turns.harnessCaPath)).toEqual({
      secret: 'polychrome-harness-ca',
      key: 'ca.crt',
    });
    const harnessEnv = containerEnv(harnessContainer.env ?? []);
    const harnessPod = obj(harnessPodTemplate['spec'], 'harness pod spec');
    for (const [variable, key] of [
      ['HARNESS_TLS_CERT_FILE', 'tls.crt'],
      ['HARNESS_TLS_KEY_FILE', 'tls.key'],
    ] as const) {
      expect(secretFileAt(harnessEnv[variable] ?? '', harnessContainer, harnessPod)).toEqual({
        secret: 'polychrome-harness-tls',
        key,
      });
    }
    // No shared secret opens harnesses any more: the bearer token is gone from both sides.
    expect(harnessContainer.env?.map((v) => v.name)).not.toContain('HARNESS_AUTH_TOKEN');
    expect(env.map((v) => v.name)).not.toContain('POLYCHROME_HARNESS_TOKEN_FILE');
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
    expect(secretVolumes.length).toBe(4);
    for (const name of secretVolumes) {
      expect(container.volumeMounts?.find((m) => m.name === name)?.readOnly).toBe(true);
    }
    const config = loadControlPlaneConfig(containerEnv());
    expect(config.harnessImage).toBe(harnessContainer['image']);
    expect(config.harnessImage).not.toBe(DEFAULT_HARNESS_IMAGE);
  });

  it('serves the Kubernetes door on the port the kube-api Service targets, with the certificate cert-manager writes', () => {
    const config = loadControlPlaneConfig(containerEnv());
    expect(config.kubeApi?.port).toBe(8444);
    const port = container.ports?.find((p) => p.name === 'https-kube');
    expect(port?.containerPort).toBe(config.kubeApi?.port);
    const service = find(withDoor, 'Service', 'polychrome-kube-api');
    expect(objs(obj(service['spec'], 'spec')['ports'], 'ports')[0]).toMatchObject({
      targetPort: 'https-kube',
      port: 443,
    });
    const certificate = obj(find(withDoor, 'Certificate', 'polychrome-kube-api')['spec'], 'spec');
    for (const [path, key] of [
      [config.kubeApi?.certPath, 'tls.crt'],
      [config.kubeApi?.keyPath, 'tls.key'],
    ] as const) {
      expect(secretFileAt(String(path))).toEqual({ secret: certificate['secretName'], key });
    }
    // kube-apiserver dials the Service by this name and checks it against the certificate.
    expect(certificate['dnsNames']).toEqual([`polychrome-kube-api.${String(baseNamespace)}.svc`]);
    const apiService = find(withDoor, 'APIService', 'v1alpha1.api.polychrome.dev');
    expect(metadataOf(apiService)['annotations']).toMatchObject({
      'cert-manager.io/inject-ca-from': `${String(baseNamespace)}/polychrome-kube-api`,
    });
    expect(obj(apiService['spec'], 'spec')['service']).toEqual({
      name: 'polychrome-kube-api',
      namespace: baseNamespace,
      port: 443,
    });
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
    find(base, 'ServiceAccount', 'polychrome-control-plane');
    const binding = find(base, 'ClusterRoleBinding', 'polychrome-control-plane');
    expect(binding['subjects']).toContainEqual({
      kind: 'ServiceAccount',
      name: podSpec['serviceAccountName'],
      namespace: baseNamespace,
    });
  });

  it('may list and watch pods in its own namespace, to find its peers, and nothing else there', () => {
    const role = find(base, 'Role', 'polychrome-control-plane-peers');
    expect(role['rules']).toEqual([
      { apiGroups: [''], resources: ['pods'], verbs: ['list', 'watch'] },
    ]);
    const binding = find(base, 'RoleBinding', 'polychrome-control-plane-peers');
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

  it("keeps the conversations' Leases in its own namespace, granted there only", () => {
    const role = find(base, 'Role', 'polychrome-control-plane-leases');
    expect(role['rules']).toEqual([
      {
        apiGroups: ['coordination.k8s.io'],
        resources: ['leases'],
        verbs: ['get', 'create', 'update', 'delete'],
      },
    ]);
    const binding = find(base, 'RoleBinding', 'polychrome-control-plane-leases');
    expect(binding['roleRef']).toEqual({
      apiGroup: 'rbac.authorization.k8s.io',
      kind: 'Role',
      name: 'polychrome-control-plane-leases',
    });
    expect(binding['subjects']).toEqual([
      { kind: 'ServiceAccount', name: podSpec['serviceAccountName'], namespace: baseNamespace },
    ]);
    // No cluster-wide grant on Leases: in a conversation's namespace it has none.
    const clusterRules = objs(
      find(base, 'ClusterRole', 'polychrome-control-plane')['rules'],
      'rules',
    );
    for (const rule of clusterRules) {
      expect({ rule, leases: JSON.stringify(rule).includes('leases') }).toEqual({
        rule,
        leases: false,
      });
    }
    // The Role lands in the namespace the control plane keeps its Leases in.
    expect(loadControlPlaneConfig(containerEnv()).lease.namespace).toBe(baseNamespace);
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
    const pdb = find(base, 'PodDisruptionBudget', 'polychrome-control-plane');
    const pdbSpec = obj(pdb['spec'], 'PodDisruptionBudget spec');
    expect(pdbSpec['minAvailable']).toBe(1);
    expect(selects(pdbSpec['selector'], podLabels)).toBe(true);
  });

  it('is served by the Service: http-api on the API port, metrics on the metrics port, no peer port', () => {
    const service = find(base, 'Service', 'polychrome-control-plane');
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
            obj(find(base, 'StatefulSet', 'polychrome-state')['spec'], 'StatefulSet spec')[
              'template'
            ],
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
  /** The manifests of a bundle: its YAML files but the kustomization and its transformer config. */
  const yamlFilesIn = (dir: string): string[] =>
    readdirSync(join(repoRoot, dir))
      .filter(
        (f) => f.endsWith('.yaml') && f !== 'kustomization.yaml' && f !== 'kustomizeconfig.yaml',
      )
      .sort();
  const filesListed = (dir: string): string[] =>
    (resourcesOf(`${dir}/kustomization.yaml`) as string[])
      .filter((r) => r.endsWith('.yaml'))
      .sort();

  it('config/default is the cluster bundle and the namespaced bundles, nothing else', () => {
    expect(resourcesOf('config/default/kustomization.yaml')).toEqual([
      '../cluster',
      '../rbac',
      '../state',
      '../control-plane',
    ]);
    // The Kubernetes door is opt-in (docs/kube-api.md): config/with-kube-api adds it.
    expect(readDoc('config/default/kustomization.yaml')['components']).toBeUndefined();
    expect(resourcesOf('config/with-kube-api/kustomization.yaml')).toEqual(['../default']);
    expect(readDoc('config/with-kube-api/kustomization.yaml')['components']).toEqual([
      '../components/kube-api',
      '../components/kube-api-cert-manager',
    ]);
  });

  it.each([
    'config/cluster',
    'config/rbac',
    'config/state',
    'config/control-plane',
    'config/sandbox',
    'config/conversations',
  ])('%s lists every manifest in it', (dir) => {
    expect(filesListed(dir)).toEqual(yamlFilesIn(dir));
  });

  it('config/conversations makes the namespace the public API creates conversations in, never default, labelled for onboarding', () => {
    const conversations = build('config/conversations');
    const target = loadControlPlaneConfig(containerEnv()).turns.newConversationNamespace;
    expect(target).not.toBe('default');
    const namespace = find(conversations, 'Namespace', target, 'config/conversations');
    // The operator installs config/sandbox and the credentials there (operator/onboarding):
    // nothing of the sandbox is applied by hand beside it, which would be refused as not ours.
    expect(obj(namespace['metadata'], 'metadata')['labels']).toMatchObject({
      [ONBOARDING_LABEL.key]: ONBOARDING_LABEL.value,
    });
    expect(conversations.map(keyOf)).toEqual([`Namespace/${target}`]);
  });

  it('config/sandbox keeps its NetworkPolicy and no longer holds the RuntimeClass', () => {
    expect(resourcesOf('config/sandbox/kustomization.yaml')).toContain('network-policy.yaml');
    expect(sandbox.map((o) => o['kind'])).not.toContain('RuntimeClass');
    expect(find(base, 'RuntimeClass', 'gvisor')).toMatchObject({ handler: 'runsc' });
  });
});

// ---- the base as Argo CD syncs it --------------------------------------------------------

// Tests that build overlays wait for kubectl kustomize (seconds each on a loaded machine).

const SYNC_WAVE = 'argocd.argoproj.io/sync-wave';

/** An object's Argo CD sync wave (0 when it has none, as Argo CD reads it). */
function waveOf(o: Obj): number {
  const annotations = metadataOf(o)['annotations'];
  const wave = isObj(annotations) ? annotations[SYNC_WAVE] : undefined;
  return wave === undefined ? 0 : Number(wave);
}

const namespaceOf = (o: Obj): unknown => metadataOf(o)['namespace'];

const overlayDirs: string[] = [];
afterAll(() => {
  for (const dir of overlayDirs) rmSync(dir, { recursive: true, force: true });
});

/**
 * Builds an overlay in a fresh temporary directory: `kustomization` with `resources` naming
 * directories of the repository (as `config/...`), made relative as kustomize requires.
 */
function buildOverlay(resources: readonly string[], kustomization: Obj): Obj[] {
  const dir = mkdtempSync(join(tmpdir(), 'polychrome-overlay-'));
  overlayDirs.push(dir);
  writeFileSync(
    join(dir, 'kustomization.yaml'),
    stringify({
      apiVersion: 'kustomize.config.k8s.io/v1beta1',
      kind: 'Kustomization',
      resources: resources.map((r) => relative(dir, join(repoRoot, r))),
      ...kustomization,
    }),
  );
  return kustomize(dir);
}

const containersOf = (workload: Obj): Container[] =>
  objs(
    obj(obj(obj(workload['spec'], 'spec')['template'], 'template')['spec'], 'pod spec')[
      'containers'
    ],
    'containers',
  ) as Container[];

describe('config/default: one namespace, set in one place', () => {
  it('puts every namespaced object in the namespace config/default sets', () => {
    expect(baseNamespace).toBe('polychrome-system');
    const namespaced = base.filter((o) => namespaceOf(o) !== undefined);
    expect(namespaced.map(keyOf)).toEqual(
      expect.arrayContaining([
        'ServiceAccount/polychrome-control-plane',
        'Role/polychrome-control-plane-peers',
        'Role/polychrome-control-plane-leases',
        'Deployment/polychrome-control-plane',
        'StatefulSet/polychrome-state',
      ]),
    );
    for (const o of namespaced) {
      expect({ key: keyOf(o), namespace: namespaceOf(o) }).toEqual({
        key: keyOf(o),
        namespace: baseNamespace,
      });
    }
    expect(find(base, 'Namespace', String(baseNamespace))).toMatchObject({
      metadata: { labels: { 'pod-security.kubernetes.io/enforce': 'restricted' } },
    });
  });

  it('names no namespace but through `namespace:`: an overlay setting another moves everything', () => {
    const moved = 'acme-polychrome';
    // The base with the door, and the replacements config/with-kube-api has for the
    // namespace inside strings (the door's certificate name and CA injection), which
    // docs/kube-api.md tells such an overlay to repeat.
    const replacements = readDoc('config/with-kube-api/kustomization.yaml')['replacements'];
    expect(Array.isArray(replacements)).toBe(true);
    const built = buildOverlay(['config/with-kube-api'], { namespace: moved, replacements });
    // Not in a resource, a binding's subject, an address or a selector.
    expect(JSON.stringify(built)).not.toContain(String(baseNamespace));
    expect(built.map(keyOf).sort()).toEqual(
      withDoor
        .map(keyOf)
        .map((k) => (k === `Namespace/${String(baseNamespace)}` ? `Namespace/${moved}` : k))
        .sort(),
    );
    for (const o of built.filter((b) => namespaceOf(b) !== undefined)) {
      expect({ key: keyOf(o), namespace: namespaceOf(o) }).toEqual({
        key: keyOf(o),
        namespace: moved,
      });
    }
    const subject = { kind: 'ServiceAccount', name: 'polychrome-control-plane', namespace: moved };
    expect(find(built, 'ClusterRoleBinding', 'polychrome-control-plane')['subjects']).toEqual([
      subject,
    ]);
    expect(find(built, 'RoleBinding', 'polychrome-control-plane-peers')['subjects']).toEqual([
      subject,
    ]);
    expect(find(built, 'RoleBinding', 'polychrome-control-plane-leases')['subjects']).toEqual([
      subject,
    ]);
    // The control plane dials the state plane and looks for its peers in its own namespace.
    const movedEnv = containersOf(find(built, 'Deployment', 'polychrome-control-plane'))[0]?.env;
    const config = loadControlPlaneConfig(containerEnv(movedEnv, moved));
    expect(config.state.address).toBe(`polychrome-state.${moved}.svc:7443`);
    expect(config.peer.namespace).toBe(moved);
    expect(config.lease.namespace).toBe(moved);
  }, 60_000);

  it('keeps cluster-scoped objects in config/cluster and out of every namespaced bundle', () => {
    // kustomize gives a namespace to every kind it does not know to be cluster-scoped; the
    // integration test checks the same split against a real API server's discovery.
    const clusterScoped = withDoor.filter((o) => namespaceOf(o) === undefined).map(keyOf);
    const kubeApi = [
      'APIService/v1alpha1.api.polychrome.dev',
      'ClusterRole/polychrome-control-plane-authentication-reader',
      'ClusterRole/polychrome-conversation-admin',
      'ClusterRole/polychrome-conversation-eraser',
      'ClusterRole/polychrome-conversation-reader',
      'ClusterRole/polychrome-conversation-user',
      'ClusterRole/polychrome-conversation-viewer',
      'ClusterRole/polychrome-persona-admin',
      'ClusterRole/polychrome-persona-payment-admin',
      'ClusterRole/polychrome-session-admin',
      'ClusterRoleBinding/polychrome-control-plane-auth-delegator',
      'ClusterRoleBinding/polychrome-control-plane-authentication-reader',
    ];
    expect(clusterScoped.sort()).toEqual(
      [
        `Namespace/${String(baseNamespace)}`,
        'CustomResourceDefinition/agents.polychrome.dev',
        'CustomResourceDefinition/conversations.polychrome.dev',
        'CustomResourceDefinition/modelconfigs.polychrome.dev',
        'ClusterRole/polychrome-control-plane',
        'ClusterRoleBinding/polychrome-control-plane',
        'ClusterRole/polychrome-onboarding',
        'ClusterRoleBinding/polychrome-onboarding',
        'ClusterRole/polychrome-agent-editor',
        'ClusterRole/polychrome-conversation-object-viewer',
        'ClusterRole/polychrome-agent-viewer',
        'RuntimeClass/gvisor',
        ...kubeApi,
      ].sort(),
    );
    // config/cluster's, and the optional Kubernetes door's (config/components/kube-api),
    // which config/default leaves out.
    expect([...build('config/cluster').map(keyOf), ...kubeApi].sort()).toEqual(
      clusterScoped.sort(),
    );
    expect(
      base
        .filter((o) => namespaceOf(o) === undefined)
        .map(keyOf)
        .sort(),
    ).toEqual(build('config/cluster').map(keyOf).sort());
    for (const dir of ['config/rbac', 'config/state', 'config/control-plane', 'config/sandbox']) {
      const built = buildOverlay([dir], { namespace: 'probe' });
      expect(built.length).toBeGreaterThan(0);
      for (const o of built) {
        expect({ dir, key: keyOf(o), namespace: namespaceOf(o) }).toEqual({
          dir,
          key: keyOf(o),
          namespace: 'probe',
        });
      }
    }
    // Only Polychrome's own CRDs ship: agent-sandbox comes from its own release.
    expect(base.filter((o) => o['kind'] === 'CustomResourceDefinition').map(keyOf)).toEqual([
      'CustomResourceDefinition/agents.polychrome.dev',
      'CustomResourceDefinition/conversations.polychrome.dev',
      'CustomResourceDefinition/modelconfigs.polychrome.dev',
    ]);
  }, 60_000);
});

describe('the Kubernetes door: opt-in', () => {
  const door = (): Set<string> =>
    new Set([
      ...build('config/kube-api').map(keyOf),
      'Certificate/polychrome-kube-api',
      'Issuer/polychrome-kube-api',
    ]);

  it('config/default registers no APIService and asks nothing of cert-manager', () => {
    const kinds = new Set(base.map((o) => String(o['kind'])));
    expect([...kinds].filter((k) => ['APIService', 'Certificate', 'Issuer'].includes(k))).toEqual(
      [],
    );
    expect(base.map(keyOf).filter((k) => door().has(k))).toEqual([]);
    const plain = find(base, 'Deployment', 'polychrome-control-plane');
    const plainEnv = containersOf(plain)[0]?.env;
    expect(loadControlPlaneConfig(containerEnv(plainEnv, String(baseNamespace))).kubeApi).toBe(
      undefined,
    );
    expect(JSON.stringify(plain)).not.toContain('polychrome-kube-api-tls');
  });

  it('config/with-kube-api adds the door, only the door, in the same namespace', () => {
    expect(withDoor.map(keyOf).sort()).toEqual([...base.map(keyOf), ...door()].sort());
    expect(find(withDoor, 'APIService', 'v1alpha1.api.polychrome.dev')).toMatchObject({
      spec: { group: 'api.polychrome.dev', version: 'v1alpha1' },
    });
    for (const o of withDoor.filter((b) => namespaceOf(b) !== undefined)) {
      expect({ key: keyOf(o), namespace: namespaceOf(o) }).toEqual({
        key: keyOf(o),
        namespace: baseNamespace,
      });
    }
    // Every other object is config/default's, unchanged, but the Deployment the door patches.
    for (const o of withDoor.filter((b) => !door().has(keyOf(b)))) {
      if (keyOf(o) === 'Deployment/polychrome-control-plane') continue;
      expect(o).toEqual(base.find((b) => keyOf(b) === keyOf(o)));
    }
    expect(loadControlPlaneConfig(containerEnv()).kubeApi?.port).toBe(8444);
  });
});

describe('config/default: sync waves', () => {
  it('puts the APIService after the control plane that serves it: registered earlier, its group is Unavailable meanwhile', () => {
    const apiService = find(withDoor, 'APIService', 'v1alpha1.api.polychrome.dev');
    for (const key of [
      'Deployment/polychrome-control-plane',
      'Service/polychrome-kube-api',
      'Certificate/polychrome-kube-api',
    ]) {
      const o = withDoor.find((b) => keyOf(b) === key);
      expect({ key, before: o !== undefined && waveOf(o) < waveOf(apiService) }).toEqual({
        key,
        before: true,
      });
    }
  });

  it('puts the cluster-scoped objects (CRD, ClusterRole and binding) in a wave before every namespaced one', () => {
    const cluster = withDoor.filter(
      (o) => namespaceOf(o) === undefined && o['kind'] !== 'APIService',
    );
    const namespaced = withDoor.filter((o) => namespaceOf(o) !== undefined);
    const lastCluster = Math.max(...cluster.map(waveOf));
    const firstNamespaced = Math.min(...namespaced.map(waveOf));
    expect(lastCluster).toBe(-1);
    expect(firstNamespaced).toBe(0);
    for (const kind of ['Deployment', 'StatefulSet']) {
      for (const o of base.filter((b) => b['kind'] === kind)) {
        expect({ key: keyOf(o), after: waveOf(o) > lastCluster }).toEqual({
          key: keyOf(o),
          after: true,
        });
      }
    }
    // Argo CD reads the wave as an integer string.
    for (const o of cluster)
      expect(metadataOf(o)['annotations']).toMatchObject({ [SYNC_WAVE]: '-1' });
  });

  it('puts every sample after its CRD', () => {
    const plurals: Record<string, string> = {
      Conversation: 'conversations',
      Agent: 'agents',
      ModelConfig: 'modelconfigs',
    };
    const samples = build('config/samples');
    expect(samples.length).toBeGreaterThan(0);
    for (const sample of samples) {
      const plural = plurals[String(sample['kind'])];
      expect(plural).toBeDefined();
      const crd = find(base, 'CustomResourceDefinition', `${plural ?? ''}.polychrome.dev`);
      expect(waveOf(sample)).toBeGreaterThan(waveOf(crd));
    }
  }, 60_000);

  it('never prunes or deletes with the Application the Namespace (the journal volume) or the CRD (every Conversation)', () => {
    for (const key of [
      `Namespace/${String(baseNamespace)}`,
      'CustomResourceDefinition/conversations.polychrome.dev',
      'CustomResourceDefinition/agents.polychrome.dev',
      'CustomResourceDefinition/modelconfigs.polychrome.dev',
    ]) {
      const o = base.find((b) => keyOf(b) === key) as Obj;
      const options = String(
        obj(metadataOf(o)['annotations'], `${key} annotations`)['argocd.argoproj.io/sync-options'],
      )
        .split(',')
        .map((x) => x.trim());
      expect({ key, options }).toEqual({
        key,
        options: expect.arrayContaining(['Prune=false', 'Delete=false']),
      });
    }
  });
});

describe('images: set with kustomize `images:` in an overlay', () => {
  const digest = (c: string): string => `sha256:${c.repeat(64)}`;
  const images = [
    {
      name: 'registry.invalid/polychrome/control-plane',
      newName: 'ghcr.io/acme/polychrome-control-plane',
      digest: digest('a'),
    },
    {
      name: 'registry.invalid/polychrome/state',
      newName: 'ghcr.io/acme/polychrome-state',
      newTag: '1.2.3',
    },
    {
      name: 'registry.invalid/polychrome/harness',
      newName: 'ghcr.io/acme/polychrome-harness',
      digest: digest('b'),
    },
  ];
  const harness = `ghcr.io/acme/polychrome-harness@${digest('b')}`;
  const built = buildOverlay(['config/with-kube-api'], { namespace: 'acme-polychrome', images });
  const builtSandbox = buildOverlay(['config/sandbox'], { namespace: 'team-a', images });

  it('reaches the Deployment and the StatefulSet', () => {
    expect(containersOf(find(built, 'Deployment', 'polychrome-control-plane'))[0]?.['image']).toBe(
      `ghcr.io/acme/polychrome-control-plane@${digest('a')}`,
    );
    expect(containersOf(find(built, 'StatefulSet', 'polychrome-state'))[0]?.['image']).toBe(
      'ghcr.io/acme/polychrome-state:1.2.3',
    );
  });

  it("reaches the control plane's POLYCHROME_HARNESS_IMAGE (pod backend) and nothing else of its environment", () => {
    const builtEnv =
      containersOf(find(built, 'Deployment', 'polychrome-control-plane'))[0]?.env ?? [];
    expect(loadControlPlaneConfig(containerEnv(builtEnv, 'acme-polychrome')).harnessImage).toBe(
      harness,
    );
    const others = (vars: readonly EnvVar[]): EnvVar[] =>
      vars.filter((v) => v.name !== 'POLYCHROME_HARNESS_IMAGE');
    expect(others(builtEnv)).toEqual(others(env));
    expect(others(builtEnv).length).toBe(env.length - 1);
  });

  it("reaches config/sandbox's SandboxTemplate (agent-sandbox backend), the same reference", () => {
    const template = find(builtSandbox, 'SandboxTemplate', 'polychrome-harness', 'config/sandbox');
    const podSpec = obj(
      obj(obj(template['spec'], 'spec')['podTemplate'], 'podTemplate')['spec'],
      'podTemplate spec',
    );
    expect(objs(podSpec['containers'], 'containers').map((c) => c['image'])).toEqual([harness]);
  });

  it('leaves no placeholder image anywhere', () => {
    expect(JSON.stringify(built)).not.toContain('registry.invalid');
    expect(JSON.stringify(builtSandbox)).not.toContain('registry.invalid');
  });
});

// ---- config/argocd/application.yaml ------------------------------------------------------

/**
 * The fields Argo CD documents for an Application (argoproj.io/v1alpha1; its Application CRD
 * and "Declarative Setup"), for the parts the example uses. A key outside these is a typo
 * Argo CD's CRD would prune or refuse.
 */
const ARGOCD_FIELDS = {
  spec: [
    'project',
    'source',
    'sources',
    'destination',
    'syncPolicy',
    'ignoreDifferences',
    'info',
    'revisionHistoryLimit',
    'sourceHydrator',
  ],
  source: [
    'repoURL',
    'targetRevision',
    'path',
    'chart',
    'ref',
    'name',
    'helm',
    'kustomize',
    'directory',
    'plugin',
  ],
  kustomize: [
    'namePrefix',
    'nameSuffix',
    'images',
    'replicas',
    'commonLabels',
    'commonAnnotations',
    'commonAnnotationsEnvsubst',
    'forceCommonLabels',
    'forceCommonAnnotations',
    'labelWithoutSelector',
    'labelIncludeTemplates',
    'namespace',
    'version',
    'patches',
    'components',
    'ignoreMissingComponents',
    'kubeVersion',
    'apiVersions',
  ],
  destination: ['server', 'name', 'namespace'],
  syncPolicy: ['automated', 'syncOptions', 'retry', 'managedNamespaceMetadata'],
  automated: ['prune', 'selfHeal', 'allowEmpty', 'enabled'],
  retry: ['limit', 'backoff', 'refresh'],
  backoff: ['duration', 'factor', 'maxDuration'],
  ignoreDifferences: [
    'group',
    'kind',
    'name',
    'namespace',
    'jsonPointers',
    'jqPathExpressions',
    'managedFieldsManagers',
  ],
} as const;

/** Argo CD's sync options (user guide, "Sync Options"), each as `Name=value`. */
const ARGOCD_SYNC_OPTIONS: Record<string, readonly string[]> = {
  Validate: ['true', 'false'],
  CreateNamespace: ['true', 'false'],
  PruneLast: ['true', 'false'],
  ApplyOutOfSyncOnly: ['true', 'false'],
  PrunePropagationPolicy: ['foreground', 'background', 'orphan'],
  Replace: ['true', 'false'],
  ServerSideApply: ['true', 'false'],
  RespectIgnoreDifferences: ['true', 'false'],
  FailOnSharedResource: ['true', 'false'],
  SkipDryRunOnMissingResource: ['true', 'false'],
  Prune: ['true', 'false', 'confirm'],
  Delete: ['true', 'false', 'confirm'],
};

/** What is wrong with `app` as an Argo CD Application syncing a path of this repository. */
function applicationProblems(app: Obj): string[] {
  const problems: string[] = [];
  const unknownKeys = (value: unknown, allowed: readonly string[], where: string): void => {
    if (!isObj(value)) {
      problems.push(`${where}: not an object`);
      return;
    }
    for (const key of Object.keys(value)) {
      if (!allowed.includes(key)) problems.push(`${where}.${key}: not an Application field`);
    }
  };
  if (app['apiVersion'] !== 'argoproj.io/v1alpha1' || app['kind'] !== 'Application') {
    problems.push('not an argoproj.io/v1alpha1 Application');
  }
  const metadata = isObj(app['metadata']) ? app['metadata'] : {};
  if (typeof metadata['name'] !== 'string') problems.push('metadata.name: missing');
  const spec = app['spec'];
  unknownKeys(spec, ARGOCD_FIELDS.spec, 'spec');
  if (!isObj(spec)) return problems;
  if (typeof spec['project'] !== 'string') problems.push('spec.project: missing');
  const source = spec['source'];
  unknownKeys(source, ARGOCD_FIELDS.source, 'spec.source');
  if (isObj(source)) {
    if (typeof source['repoURL'] !== 'string') problems.push('spec.source.repoURL: missing');
    const path = source['path'];
    let isKustomization = false;
    try {
      isKustomization = typeof path === 'string' && isObj(readDoc(`${path}/kustomization.yaml`));
    } catch {
      isKustomization = false;
    }
    if (!isKustomization)
      problems.push(`spec.source.path: ${String(path)} is no kustomization here`);
    if (source['kustomize'] !== undefined) {
      unknownKeys(source['kustomize'], ARGOCD_FIELDS.kustomize, 'spec.source.kustomize');
    }
  }
  const destination = spec['destination'];
  unknownKeys(destination, ARGOCD_FIELDS.destination, 'spec.destination');
  if (
    isObj(destination) &&
    (destination['server'] === undefined) === (destination['name'] === undefined)
  ) {
    problems.push('spec.destination: set exactly one of server and name');
  }
  const syncPolicy = spec['syncPolicy'];
  if (syncPolicy !== undefined) {
    unknownKeys(syncPolicy, ARGOCD_FIELDS.syncPolicy, 'spec.syncPolicy');
    if (isObj(syncPolicy)) {
      if (syncPolicy['automated'] !== undefined) {
        unknownKeys(syncPolicy['automated'], ARGOCD_FIELDS.automated, 'spec.syncPolicy.automated');
      }
      const options: unknown[] = Array.isArray(syncPolicy['syncOptions'])
        ? syncPolicy['syncOptions']
        : [];
      for (const option of options) {
        const [name, value] = String(option).split('=');
        if (!(ARGOCD_SYNC_OPTIONS[name ?? '']?.includes(value ?? '') ?? false)) {
          problems.push(`spec.syncPolicy.syncOptions: ${String(option)} is not a sync option`);
        }
      }
      const retry = syncPolicy['retry'];
      if (retry !== undefined) {
        unknownKeys(retry, ARGOCD_FIELDS.retry, 'spec.syncPolicy.retry');
        if (isObj(retry) && retry['backoff'] !== undefined) {
          unknownKeys(retry['backoff'], ARGOCD_FIELDS.backoff, 'spec.syncPolicy.retry.backoff');
        }
      }
    }
  }
  const ignored: unknown[] = Array.isArray(spec['ignoreDifferences'])
    ? spec['ignoreDifferences']
    : [];
  ignored.forEach((entry, i) => {
    unknownKeys(entry, ARGOCD_FIELDS.ignoreDifferences, `spec.ignoreDifferences[${i}]`);
    if (isObj(entry) && typeof entry['kind'] !== 'string') {
      problems.push(`spec.ignoreDifferences[${i}].kind: missing`);
    }
  });
  return problems;
}

describe('config/argocd/application.yaml', () => {
  const application = readDoc('config/argocd/application.yaml');
  const spec = obj(application['spec'], 'Application spec');
  const source = obj(spec['source'], 'Application source');

  it('uses only fields Argo CD documents, with the sync options the base needs', () => {
    expect(applicationProblems(application)).toEqual([]);
    expect(source['path']).toBe('config/default');
    expect(obj(spec['syncPolicy'], 'syncPolicy')['syncOptions']).toEqual(
      expect.arrayContaining(['ServerSideApply=true', 'CreateNamespace=true']),
    );
    // The base's namespace, which the objects carry whatever this says.
    expect(obj(spec['destination'], 'destination')['namespace']).toBe(baseNamespace);
    // Deleting the Application must not cascade to the CRD and with it every Conversation.
    expect(obj(application['metadata'], 'metadata')['finalizers'] ?? []).not.toContain(
      'resources-finalizer.argocd.argoproj.io',
    );
  });

  it('sets all three images by the names the manifests use', () => {
    const entries = (obj(source['kustomize'], 'kustomize')['images'] as string[]).map(
      (e) => e.split('=')[0],
    );
    const named = [
      ...containersOf(deployment),
      ...containersOf(find(base, 'StatefulSet', 'polychrome-state')),
      harnessContainer,
    ].map((c) => String(c['image']).split(':')[0]);
    expect([...entries].sort()).toEqual([...named].sort());
  });

  it('finds what Argo CD would refuse or prune: unknown fields, bad options, a missing path', () => {
    const broken = structuredClone(application);
    const brokenSpec = obj(broken['spec'], 'spec');
    obj(brokenSpec['syncPolicy'], 'syncPolicy')['syncOption'] = ['ServerSideApply=true'];
    obj(brokenSpec['syncPolicy'], 'syncPolicy')['syncOptions'] = [
      'ServerSideApply=yes',
      'CreateNamespaces=true',
    ];
    obj(brokenSpec['source'], 'source')['path'] = 'config';
    obj(brokenSpec['destination'], 'destination')['name'] = 'in-cluster';
    brokenSpec['ignoreDifferences'] = [{ group: 'polychrome.dev', jsonPointer: ['/status'] }];
    expect(applicationProblems(broken)).toEqual([
      'spec.source.path: config is no kustomization here',
      'spec.destination: set exactly one of server and name',
      'spec.syncPolicy.syncOption: not an Application field',
      'spec.syncPolicy.syncOptions: ServerSideApply=yes is not a sync option',
      'spec.syncPolicy.syncOptions: CreateNamespaces=true is not a sync option',
      'spec.ignoreDifferences[0].jsonPointer: not an Application field',
      'spec.ignoreDifferences[0].kind: missing',
    ]);
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

  it("lets harness pods out only to DNS: HTTPS is the control plane's policy, which excludes the API server", () => {
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
    // NetworkPolicies add up: a 443 rule here would re-open the API server that
    // polychrome-harness-egress excludes.
    expect(allowed.sort()).toEqual(['TCP/53', 'UDP/53']);
    for (const rule of egress) {
      for (const p of objs(rule['ports'], 'ports')) expect(p['endPort']).toBeUndefined();
    }
    // The control plane owns that policy; config/sandbox does not ship a copy of it.
    expect(
      sandbox.filter((d) => d['kind'] === 'NetworkPolicy').map((d) => metadataOf(d)['name']),
    ).toEqual(['polychrome-harness']);
    expect(HARNESS_EGRESS_POLICY_NAME).not.toBe('polychrome-harness');
  });

  it("the control plane's egress policy selects the same harness pods", () => {
    const written = harnessEgressPolicy('team', { kind: 'closed', reason: 'test' });
    expect(written.spec.podSelector).toEqual(policySpec['podSelector']);
    const templateLabels = obj(
      obj(harnessPodTemplate['metadata'], 'podTemplate metadata')['labels'],
      'podTemplate labels',
    );
    expect(selects(written.spec.podSelector, templateLabels)).toBe(true);
    expect(selects(written.spec.podSelector, podLabels)).toBe(false);
  });

  it("agent-sandbox's template policy opens no egress", () => {
    // With spec.networkPolicy set, agent-sandbox (v1.0.3, as 0.5.6 did) writes policyTypes
    // Ingress and Egress with exactly these egress rules; without it, its default allows public
    // addresses on every port.
    const templatePolicy = obj(
      obj(sandboxTemplate['spec'], 'spec')['networkPolicy'],
      'SandboxTemplate networkPolicy',
    );
    expect(templatePolicy['egress'] ?? []).toEqual([]);
    expect(obj(sandboxTemplate['spec'], 'spec')['networkPolicyManagement']).toBe('Managed');
  });
});

describe('config/monitoring', () => {
  const monitor = (kind: string, name: string): Obj =>
    obj(find(monitoring, kind, name, 'config/monitoring')['spec'], `${kind} ${name} spec`);
  /** The container port a Service port named `metrics` reaches in `c`. */
  const metricsTarget = (service: Obj, c: Container): number | undefined => {
    const port = objs(obj(service['spec'], 'Service spec')['ports'], 'ports').find(
      (p) => p['name'] === 'metrics',
    );
    return port === undefined ? undefined : containerPort(c, port['targetPort'] ?? port['port']);
  };
  const statefulSet = find(base, 'StatefulSet', 'polychrome-state');
  const stateTemplate = obj(obj(statefulSet['spec'], 'spec')['template'], 'template');
  const stateLabels = obj(obj(stateTemplate['metadata'], 'metadata')['labels'], 'labels');
  const stateContainer = objs(obj(stateTemplate['spec'], 'spec')['containers'], 'containers').find(
    (c) => c['name'] === 'state',
  ) as Container;

  it('lists its three files and is not part of the base (which must sync without these CRDs)', () => {
    expect(
      [...(readDoc('config/monitoring/kustomization.yaml')['resources'] as string[])].sort(),
    ).toEqual(['pod-monitor.yaml', 'prometheus-rule.yaml', 'service-monitors.yaml']);
    expect(readDoc('config/default/kustomization.yaml')['resources']).not.toContain(
      '../monitoring',
    );
    expect(readDoc('config/monitoring/kustomization.yaml')['namespace']).toBe(baseNamespace);
  });

  it('scrapes the control plane Service, whose metrics port reaches the container port named metrics', () => {
    const spec = monitor('ServiceMonitor', 'polychrome-control-plane');
    const service = find(base, 'Service', 'polychrome-control-plane');
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
    const spec = monitor('ServiceMonitor', 'polychrome-state');
    const service = find(base, 'Service', 'polychrome-state');
    const serviceLabels = obj(service['metadata'], 'metadata')['labels'] as Obj;
    expect(selects(spec['selector'], serviceLabels)).toBe(true);
    expect(selects(obj(service['spec'], 'spec')['selector'], stateLabels)).toBe(true);
    expect(selects(spec['selector'], podLabels)).toBe(false);
    expect(objs(spec['endpoints'], 'endpoints').map((e) => e['port'])).toEqual(['metrics']);
    expect(metricsTarget(service, stateContainer)).toBe(DEFAULT_HEALTH_PORT);
    expect(containerPort(stateContainer, 'metrics')).toBe(DEFAULT_HEALTH_PORT);
  });

  it('scrapes harness pods of both backends in every namespace, on their port named metrics', () => {
    const spec = monitor('PodMonitor', 'polychrome-harness');
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
    const spec = monitor('PrometheusRule', 'polychrome');
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

describe('the provisioner (operator/provision): nothing to create by hand', () => {
  const provisioner = find(base, 'Deployment', 'polychrome-provisioner');
  const provisionerPod = obj(
    obj(obj(provisioner['spec'], 'spec')['template'], 'template')['spec'],
    'pod spec',
  );
  const [provisionerContainer] = containersOf(provisioner);
  const provisionTable = configTable(readText('operator/provision/config.ts'));

  /** The keys the provisioner writes into each Secret (operator/provision/materials.ts). */
  function writtenKeys(name: string): string[] {
    const signer = mintCa({
      commonName: 'CA',
      notBefore: new Date(),
      notAfter: new Date(Date.now() + 1e10),
    });
    const leaf = leafSpecs('ns').find((l) => l.name === name);
    const material: Material =
      name in CA_COMMON_NAMES
        ? { kind: 'ca', name: name as CaName, keep: [] }
        : leaf !== undefined
          ? { kind: 'leaf', spec: leaf, signer, bundle: signer.certificate }
          : name === SecretName.SigningKey
            ? { kind: 'signing-key' }
            : name === SecretName.RecordsKey
              ? { kind: 'records-key' }
              : { kind: 'approval-key' };
    return Object.keys(contentOf(material, new Date(), DEFAULT_LIFETIMES).data).sort();
  }

  it('runs the control plane image with the provisioner entry, set as operator/provision/config.ts reads', () => {
    if (provisionerContainer === undefined) throw new Error('no provisioner container');
    expect(provisionerContainer['image']).toBe(container['image']);
    // The image's entrypoint, operator/main.ts, with the argument it hands to the provisioner.
    expect(provisionerContainer['command']).toBeUndefined();
    expect(provisionerContainer['args']).toEqual(['provision']);
    expect(readText('operator/main.ts')).toContain(
      "process.argv[2] === 'provision' ? runProvisioner()",
    );
    const known = new Set(provisionTable.flatMap((r) => r.names));
    expect(
      (provisionerContainer.env ?? []).map((v) => v.name).filter((n) => !known.has(n)),
    ).toEqual([]);
    const config = loadProvisionConfig(
      containerEnv(provisionerContainer.env, String(baseNamespace)),
    );
    expect(config.namespace).toBe(baseNamespace);
    expect([...config.external]).toEqual([]);
    const probe = obj(provisionerContainer['readinessProbe'], 'readinessProbe');
    expect(obj(probe['httpGet'], 'httpGet')).toEqual({ path: '/readyz', port: 'metrics' });
    expect(containerPort(provisionerContainer, 'metrics')).toBe(config.healthPort);
  });

  it('runs restricted, as a ServiceAccount of its own', () => {
    expect(provisionerPod['serviceAccountName']).toBe('polychrome-provisioner');
    expect(provisionerPod['serviceAccountName']).not.toBe(podSpec['serviceAccountName']);
    expect(obj(provisionerPod['securityContext'], 'securityContext')).toMatchObject({
      runAsNonRoot: true,
      seccompProfile: { type: 'RuntimeDefault' },
    });
    expect(obj(provisionerContainer?.['securityContext'], 'securityContext')).toEqual({
      allowPrivilegeEscalation: false,
      readOnlyRootFilesystem: true,
      capabilities: { drop: ['ALL'] },
    });
  });

  it('may create Secrets in its namespace and read and replace only the seven it keeps; nothing else in the base touches Secrets', () => {
    const role = find(base, 'Role', 'polychrome-provisioner');
    expect(role['rules']).toEqual([
      { apiGroups: [''], resources: ['secrets'], verbs: ['create'] },
      {
        apiGroups: [''],
        resources: ['secrets'],
        resourceNames: [...SECRET_NAMES],
        verbs: ['get', 'update'],
      },
    ]);
    expect(find(base, 'RoleBinding', 'polychrome-provisioner')['subjects']).toEqual([
      { kind: 'ServiceAccount', name: 'polychrome-provisioner', namespace: baseNamespace },
    ]);
    const grants = base.filter(
      (o) =>
        (o['kind'] === 'Role' || o['kind'] === 'ClusterRole') &&
        JSON.stringify(o['rules']).includes('secrets'),
    );
    expect(grants.map(keyOf).sort()).toEqual([
      'ClusterRole/polychrome-onboarding',
      'Role/polychrome-provisioner',
    ]);
  });

  it('onboards namespaces as the provisioner: read namespaces, write only the objects onboarding names, read no Secret of anyone else', () => {
    const role = find(base, 'ClusterRole', 'polychrome-onboarding');
    const rules = objs(role['rules'], 'rules');
    // Every object onboarding keeps (operator/onboarding/catalog.ts) can be read, applied and
    // deleted by name, and created; nothing else of its kind can be read or changed.
    for (const ref of ONBOARDED_REFS) {
      const group = ref.apiVersion.includes('/') ? ref.apiVersion.split('/')[0] : '';
      const plural = `${ref.kind.toLowerCase()}s`.replace(/policys$/, 'policies');
      const about = rules.filter(
        (r) =>
          (r['apiGroups'] as string[]).includes(String(group)) &&
          (r['resources'] as string[]).includes(plural),
      );
      const byName = about.filter((r) => r['resourceNames'] !== undefined);
      expect({ ref, byName: byName.map((r) => [r['resourceNames'], r['verbs']]) }).toEqual({
        ref,
        byName: [[expect.arrayContaining([ref.name]), ['get', 'patch', 'delete']]],
      });
      const unnamed = about.filter((r) => r['resourceNames'] === undefined);
      // create cannot be narrowed by name; list only where the start needs it (policies).
      for (const r of unnamed) {
        expect(r['verbs']).toEqual(ref.kind === 'NetworkPolicy' ? ['create', 'list'] : ['create']);
      }
    }
    const secretNames = rules
      .filter((r) => (r['resources'] as string[]).includes('secrets'))
      .flatMap((r) => (r['resourceNames'] as string[] | undefined) ?? []);
    expect(secretNames.sort()).toEqual(['polychrome-harness', 'polychrome-harness-tls']);
    expect(rules.find((r) => (r['resources'] as string[]).includes('namespaces'))).toEqual({
      apiGroups: [''],
      resources: ['namespaces'],
      verbs: ['get', 'list', 'watch'],
    });
    expect(find(base, 'ClusterRoleBinding', 'polychrome-onboarding')['subjects']).toEqual([
      { kind: 'ServiceAccount', name: 'polychrome-provisioner', namespace: baseNamespace },
    ]);
  });

  it('makes every Secret the state plane and the control plane mount, with the keys they read', () => {
    const state = find(base, 'StatefulSet', 'polychrome-state');
    const mounted = [state, find(base, 'Deployment', 'polychrome-control-plane')].flatMap((w) =>
      objs(
        obj(obj(obj(w['spec'], 'spec')['template'], 'template')['spec'], 'pod spec')['volumes'],
        'volumes',
      )
        .map((v) => v['secret'])
        .filter(isObj),
    );
    expect(mounted.length).toBe(6);
    for (const secret of mounted) {
      const name = String(secret['secretName']);
      expect(SECRET_NAMES).toContain(name);
      const items = Array.isArray(secret['items']) ? secret['items'].filter(isObj) : [];
      for (const item of items) expect(writtenKeys(name)).toContain(item['key']);
    }
    // The files the state plane reads through its mounts.
    const stateContainer = containersOf(state)[0] as Container;
    const stateEnv = Object.fromEntries(
      (stateContainer.env ?? []).map((v) => [v.name, v.value ?? '']),
    );
    const statePod = obj(
      obj(obj(state['spec'], 'spec')['template'], 'template')['spec'],
      'pod spec',
    );
    for (const variable of [
      'STATE_TLS_CA_FILE',
      'STATE_TLS_CERT_FILE',
      'STATE_TLS_KEY_FILE',
      'STATE_SIGNING_KEY_FILE',
      'STATE_RECORDS_KEY_FILE',
    ]) {
      const file = secretFileAt(String(stateEnv[variable]), stateContainer, statePod);
      expect({ variable, found: file !== undefined }).toEqual({ variable, found: true });
      expect(writtenKeys(String(file?.secret))).toContain(file?.key);
    }
  });

  it('config/with-cert-manager-pki: cert-manager writes the four TLS Secrets, which the provisioner only checks', () => {
    const pki = build('config/with-cert-manager-pki');
    const certificates = pki.filter((o) => o['kind'] === 'Certificate');
    const specOf = (name: string): Obj => obj(find(pki, 'Certificate', name, 'pki')['spec'], name);
    const moved = containersOf(find(pki, 'Deployment', 'polychrome-provisioner'))[0]?.env;
    const config = loadProvisionConfig(containerEnv(moved, String(baseNamespace)));
    expect([...config.external].sort()).toEqual(
      certificates.map((c) => String(obj(c['spec'], 'spec')['secretName'])).sort(),
    );
    expect([...config.external].sort()).toEqual(
      [
        SecretName.StateCa,
        SecretName.StateTls,
        SecretName.ControlPlaneTls,
        SecretName.HarnessCa,
      ].sort(),
    );
    for (const leaf of leafSpecs(String(baseNamespace))) {
      const spec = specOf(leaf.name);
      expect(spec['dnsNames']).toEqual(expect.arrayContaining([...leaf.requiredDnsNames]));
      expect(spec['commonName']).toBe(leaf.commonName);
      expect(spec['usages']).toEqual(
        expect.arrayContaining(
          leaf.usage === 'both' ? ['client auth', 'server auth'] : [`${leaf.usage} auth`],
        ),
      );
    }
    expect(obj(specOf(SecretName.ControlPlaneTls)['subject'], 'subject')['organizations']).toEqual(
      CONTROL_PLANE_ROLES,
    );
    // An overlay in another namespace takes the names along, as the control plane dials them.
    const replacements = readDoc('config/with-cert-manager-pki/kustomization.yaml')['replacements'];
    const other = buildOverlay(['config/with-cert-manager-pki'], {
      namespace: 'acme',
      replacements,
    });
    const names = obj(find(other, 'Certificate', SecretName.StateTls, 'moved')['spec'], 'spec')[
      'dnsNames'
    ];
    expect(names).toEqual(
      expect.arrayContaining([...(leafSpecs('acme')[0]?.requiredDnsNames ?? [])]),
    );
    expect(JSON.stringify(names)).not.toContain(String(baseNamespace));
  }, 60_000);
});
