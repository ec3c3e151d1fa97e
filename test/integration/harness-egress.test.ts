import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import {
  ApiException,
  CoreV1Api,
  DiscoveryV1Api,
  KubeConfig,
  NetworkingV1Api,
  RbacAuthorizationV1Api,
  type V1ClusterRole,
  type V1NetworkPolicy,
  type V1PolicyRule,
} from '@kubernetes/client-node';
import { readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { parse } from 'yaml';
import { LocalCluster } from '../../hack/lib/local-cluster';
import { repoRoot } from '../../hack/lib/paths';
import { pollUntil } from '../../hack/lib/processes';
import { validMinimalConversationSpec } from '../../operator/api/v1alpha1/conversation-cases';
import { ConversationController } from '../../operator/controller/conversation-controller';
import {
  EGRESS_CLOSED_ANNOTATION,
  HARNESS_EGRESS_POLICY_NAME,
  METADATA_EXCEPTIONS,
} from '../../operator/controller/harness-egress';
import { HarnessEgressController } from '../../operator/controller/harness-egress-controller';
import { createConversationObject } from './support/kube';

// A cluster whose API server listens on 443, as a managed cluster's does. The shared cluster's
// listens on a free port and advertises 127.0.0.1, which EndpointSlices refuse, so this file
// starts its own etcd and kube-apiserver: bound to 127.254.0.43:443 (a loopback address no
// local node hands out; 443 needs root, as the local node does) and advertising 198.51.100.7.
// The API server itself then writes the `kubernetes` Service (ClusterIP 10.0.0.1) and its
// EndpointSlice (198.51.100.7, port 443), as on a managed cluster. The control plane's egress
// controller runs as the polychrome-control-plane identity with config/cluster's ClusterRole.
// Object level only: hack's local node enforces no NetworkPolicy, so what is checked is the
// policy the control plane wrote, not packets.
const BIND = '127.254.0.43';
const ADVERTISED = '198.51.100.7';
const CLUSTER_IP = '10.0.0.1';
const OPERATOR = 'system:serviceaccount:polychrome-system:polychrome-control-plane';
const poll = { timeoutMs: 30_000, intervalMs: 200 };
const quiet = pino({ level: process.env['POLYCHROME_TEST_LOG'] ?? 'silent' });

/** config/cluster's ClusterRole rules, optionally without those matching `drop`. */
function controlPlaneRules(drop?: (rule: V1PolicyRule) => boolean): V1PolicyRule[] {
  const role = parse(
    readFileSync(join(repoRoot, 'config', 'cluster', 'cluster-role.yaml'), 'utf8'),
  ) as V1ClusterRole;
  return (role.rules ?? []).filter((rule) => drop === undefined || !drop(rule));
}

/** Every ipBlock the policy opens 443 to. */
function blocks(policy: V1NetworkPolicy): { cidr: string; except: string[] }[] {
  return (policy.spec?.egress ?? []).flatMap((rule) =>
    (rule.to ?? []).map((peer) => ({
      cidr: peer.ipBlock?.cidr ?? '',
      except: peer.ipBlock?.except ?? [],
    })),
  );
}

describe('harness egress on a cluster whose API server listens on 443', () => {
  let dir: string;
  let cluster: LocalCluster;
  let admin: KubeConfig;
  let egress: HarnessEgressController;
  const namespaces = ['egress-a', 'egress-b', 'egress-c', 'egress-d'] as const;

  const net = (): NetworkingV1Api => admin.makeApiClient(NetworkingV1Api);
  const policyOf = async (namespace: string): Promise<V1NetworkPolicy | undefined> => {
    try {
      return await net().readNamespacedNetworkPolicy({
        namespace,
        name: HARNESS_EGRESS_POLICY_NAME,
      });
    } catch (err: unknown) {
      if (err instanceof ApiException && err.code === 404) return undefined;
      throw err;
    }
  };
  const waitPolicy = (
    namespace: string,
    what: string,
    ok: (policy: V1NetworkPolicy) => boolean,
  ): Promise<V1NetworkPolicy> =>
    pollUntil(
      `${what} in ${namespace}`,
      async () => {
        const policy = await policyOf(namespace);
        return policy !== undefined && ok(policy) ? policy : undefined;
      },
      poll,
    );
  /** A user bound to a ClusterRole of `rules`, and a kubeconfig for it. */
  const identity = async (user: string, rules: V1PolicyRule[]): Promise<KubeConfig> => {
    const rbac = admin.makeApiClient(RbacAuthorizationV1Api);
    const name = user.replace(/[^a-z0-9-]/g, '-');
    await rbac.createClusterRole({ body: { metadata: { name }, rules } });
    await rbac.createClusterRoleBinding({
      body: {
        metadata: { name },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name },
        subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'User', name: user }],
      },
    });
    const kc = new KubeConfig();
    kc.loadFromFile(await cluster.mintUser(user));
    return kc;
  };

  beforeAll(async () => {
    if (process.getuid?.() !== 0) {
      throw new Error(
        'this test binds kube-apiserver to port 443, which needs root: run make test as root (README)',
      );
    }
    dir = await mkdtemp(join(tmpdir(), 'polychrome-egress-'));
    cluster = await LocalCluster.start({
      dir,
      controllerManager: false,
      crdDirs: [join(repoRoot, 'config', 'crd', 'bases')],
      apiServer: { bindAddress: BIND, port: 443, advertiseAddress: ADVERTISED },
    });
    admin = cluster.kubeConfig();
    const core = admin.makeApiClient(CoreV1Api);
    for (const name of namespaces) await core.createNamespace({ body: { metadata: { name } } });
    egress = new HarnessEgressController({
      kubeConfig: await identity(OPERATOR, controlPlaneRules()),
      logger: quiet,
      baseDelayMs: 50,
      maxDelayMs: 1_000,
    });
    await egress.start();
  }, 180_000);

  afterAll(async () => {
    await egress?.close();
    await cluster?.stop();
    if (dir !== undefined) await rm(dir, { recursive: true, force: true });
  });

  it('has the API server advertise itself on 443 in the kubernetes EndpointSlice', async () => {
    expect(cluster.server).toBe(`https://${BIND}:443`);
    const slice = await pollUntil(
      'the kubernetes EndpointSlice',
      async () => {
        const list = await admin.makeApiClient(DiscoveryV1Api).listNamespacedEndpointSlice({
          namespace: 'default',
          labelSelector: 'kubernetes.io/service-name=kubernetes',
        });
        return list.items.find((s) => (s.endpoints ?? []).length > 0);
      },
      poll,
    );
    expect(slice.endpoints.flatMap((e) => e.addresses)).toEqual([ADVERTISED]);
    expect(slice.ports?.map((p) => p.port)).toEqual([443]);
    const service = await admin
      .makeApiClient(CoreV1Api)
      .readNamespacedService({ namespace: 'default', name: 'kubernetes' });
    expect(service.spec?.clusterIP).toBe(CLUSTER_IP);
    expect(service.spec?.ports?.map((p) => p.port)).toEqual([443]);
  });

  it('writes the policy where a Conversation is: 443 to all but the API server', async () => {
    egress.addNamespace('egress-a');
    const policy = await waitPolicy('egress-a', 'the egress policy', () => true);
    expect(policy.metadata?.labels).toMatchObject({
      'app.kubernetes.io/managed-by': 'polychrome-control-plane',
    });
    expect(policy.spec?.podSelector?.matchLabels).toEqual({
      'app.kubernetes.io/name': 'polychrome-harness',
      'app.kubernetes.io/part-of': 'polychrome',
    });
    expect(policy.spec?.policyTypes).toEqual(['Egress']);
    expect(policy.spec?.egress?.map((r) => r.ports)).toEqual([[{ protocol: 'TCP', port: 443 }]]);
    // The advertised address and the ClusterIP, each alone; no IPv6 rule (no IPv6 address).
    expect(blocks(policy)).toEqual([
      {
        cidr: '0.0.0.0/0',
        except: [`${CLUSTER_IP}/32`, `${ADVERTISED}/32`, ...METADATA_EXCEPTIONS.ipv4],
      },
    ]);
    expect(policy.metadata?.annotations?.[EGRESS_CLOSED_ANNOTATION]).toBeUndefined();
    // A namespace without Conversations gets none.
    expect(await policyOf('egress-b')).toBeUndefined();
  });

  it('follows the EndpointSlices: an IPv6 address of the API server added, then removed', async () => {
    const discovery = admin.makeApiClient(DiscoveryV1Api);
    await discovery.createNamespacedEndpointSlice({
      namespace: 'default',
      body: {
        metadata: {
          name: 'kubernetes-ipv6',
          labels: { 'kubernetes.io/service-name': 'kubernetes' },
        },
        addressType: 'IPv6',
        endpoints: [{ addresses: ['fd00:10::7'], conditions: { ready: true } }],
        ports: [{ name: 'https', port: 443, protocol: 'TCP' }],
      },
    });
    const dual = await waitPolicy('egress-a', 'an ::/0 rule', (p) => blocks(p).length === 2);
    expect(blocks(dual)[1]).toEqual({
      cidr: '::/0',
      except: ['fd00:10::7/128', ...METADATA_EXCEPTIONS.ipv6],
    });
    expect(blocks(dual)[0]?.except).toContain(`${ADVERTISED}/32`);

    await discovery.deleteNamespacedEndpointSlice({
      namespace: 'default',
      name: 'kubernetes-ipv6',
    });
    await waitPolicy('egress-a', 'the ::/0 rule gone', (p) => blocks(p).length === 1);
  });

  it('puts back a policy someone opened to the API server', async () => {
    const current = await waitPolicy('egress-a', 'the egress policy', () => true);
    const resourceVersion = current.metadata?.resourceVersion;
    await net().replaceNamespacedNetworkPolicy({
      namespace: 'egress-a',
      name: HARNESS_EGRESS_POLICY_NAME,
      body: {
        ...current,
        spec: {
          ...current.spec,
          podSelector: current.spec?.podSelector ?? {},
          egress: [
            { ports: [{ protocol: 'TCP', port: 443 }], to: [{ ipBlock: { cidr: '0.0.0.0/0' } }] },
          ],
        },
      },
    });
    const restored = await waitPolicy(
      'egress-a',
      'the exclusions restored',
      (p) =>
        p.metadata?.resourceVersion !== resourceVersion &&
        (blocks(p)[0]?.except ?? []).includes(`${ADVERTISED}/32`),
    );
    expect(blocks(restored)[0]?.except).toContain(`${CLUSTER_IP}/32`);
  });

  it('writes a deleted policy again', async () => {
    const current = await waitPolicy('egress-a', 'the egress policy', () => true);
    await net().deleteNamespacedNetworkPolicy({
      namespace: 'egress-a',
      name: HARNESS_EGRESS_POLICY_NAME,
    });
    const again = await waitPolicy(
      'egress-a',
      'a new policy',
      (p) => p.metadata?.uid !== current.metadata?.uid,
    );
    expect(blocks(again)[0]?.except).toContain(`${ADVERTISED}/32`);
  });

  it('writes it when the Conversation watch sees the first Conversation of a namespace', async () => {
    const controller = new ConversationController({
      kubeConfig: cluster.kubeConfig(),
      logger: quiet,
      namespace: 'egress-c',
      agentSandbox: false,
      events: false,
      onConversationNamespace: (namespace) => egress.addNamespace(namespace),
    });
    await controller.start();
    try {
      expect(await policyOf('egress-c')).toBeUndefined();
      await createConversationObject(admin, 'egress-c', 'c1', {
        ...validMinimalConversationSpec,
        sandbox: { backend: 'pod' },
      });
      const policy = await waitPolicy('egress-c', 'the egress policy', () => true);
      expect(blocks(policy)[0]?.except).toContain(`${ADVERTISED}/32`);
    } finally {
      await controller.close();
    }
  });

  it('fails closed, naming the permission, when it may not read the EndpointSlices', async () => {
    // An open policy is there first; then a control plane without the endpointslices rule.
    egress.addNamespace('egress-d');
    await waitPolicy('egress-d', 'the open policy', (p) => blocks(p).length > 0);
    await egress.close();
    const blind = new HarnessEgressController({
      kubeConfig: await identity(
        'blind-control-plane',
        controlPlaneRules((rule) => (rule.resources ?? []).includes('endpointslices')),
      ),
      logger: quiet,
      namespace: 'egress-d',
      baseDelayMs: 50,
      maxDelayMs: 1_000,
    });
    await blind.start();
    try {
      blind.addNamespace('egress-d');
      const closed = await waitPolicy(
        'egress-d',
        'the closed policy',
        (p) => p.metadata?.annotations?.[EGRESS_CLOSED_ANNOTATION] !== undefined,
      );
      expect(closed.spec?.egress ?? []).toEqual([]);
      expect(closed.spec?.policyTypes).toEqual(['Egress']);
      expect(closed.metadata?.annotations?.[EGRESS_CLOSED_ANNOTATION]).toMatch(
        /^the control plane may not read EndpointSlices kubernetes.io\/service-name=kubernetes in namespace default \(403: .*endpointslices.*\): it needs get, list and watch on discovery.k8s.io endpointslices/,
      );
    } finally {
      await blind.close();
    }
  });
});
