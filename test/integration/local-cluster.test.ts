import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import {
  ApiException,
  CoreV1Api,
  CustomObjectsApi,
  RbacAuthorizationV1Api,
  VersionApi,
} from '@kubernetes/client-node';
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { defaultBinDir, repoRoot } from '../../hack/lib/paths';
import { pollUntil } from '../../hack/lib/processes';
import { freshNamespace, kubeConfig, sharedCluster } from './support/kube';

function kubectl(kubeconfig: string, args: readonly string[]): string {
  return execFileSync(join(defaultBinDir, 'kubectl'), [`--kubeconfig=${kubeconfig}`, ...args], {
    encoding: 'utf8',
  });
}

describe('local control plane', () => {
  let ns: { name: string; dispose: () => Promise<void> };
  beforeAll(async () => {
    ns = await freshNamespace(await kubeConfig(), 'cluster');
  });
  afterAll(async () => {
    await ns.dispose();
  });

  it('reports the pinned Kubernetes version, not v0.0.0-master', async () => {
    const info = await (await kubeConfig()).makeApiClient(VersionApi).getCode();
    expect(info.gitVersion).toBe(process.env.KUBE_VERSION ?? 'v1.36.3');
    expect(info.major).toBe('1');
  });

  it('builds kubectl at the same version', async () => {
    const out = kubectl((await sharedCluster()).kubeconfigPath, [
      'version',
      '--client',
      '-o',
      'json',
    ]);
    const parsed: unknown = JSON.parse(out);
    expect(parsed).toMatchObject({
      clientVersion: { gitVersion: process.env.KUBE_VERSION ?? 'v1.36.3' },
    });
  });

  it('authorizes with RBAC: a minted user is forbidden until a role grants it', async () => {
    const cluster = await sharedCluster();
    const user = `rbac-probe-${ns.name}`;
    const userKc = await kubeConfig(await cluster.mintUser(user, ['polychrome:test']));
    const list = (): Promise<unknown> =>
      userKc.makeApiClient(CustomObjectsApi).listNamespacedCustomObject({
        group: 'polychrome.dev',
        version: 'v1alpha1',
        namespace: ns.name,
        plural: 'conversations',
      });
    await expect(list()).rejects.toMatchObject({ code: 403 });

    const rbac = (await kubeConfig()).makeApiClient(RbacAuthorizationV1Api);
    await rbac.createNamespacedRole({
      namespace: ns.name,
      body: {
        metadata: { name: 'conv-reader' },
        rules: [{ apiGroups: ['polychrome.dev'], resources: ['conversations'], verbs: ['list'] }],
      },
    });
    await rbac.createNamespacedRoleBinding({
      namespace: ns.name,
      body: {
        metadata: { name: 'conv-reader' },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'conv-reader' },
        subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'User', name: user }],
      },
    });
    // RBAC is read from an informer cache: the grant shows up shortly, not at once.
    await pollUntil(
      'the role binding to take effect',
      async () => ((await list()) ? true : undefined),
      {
        timeoutMs: 10_000,
      },
    );
    // The grant is exactly what was bound: other resources stay forbidden.
    await expect(
      userKc.makeApiClient(CoreV1Api).listNamespacedConfigMap({ namespace: ns.name }),
    ).rejects.toMatchObject({ code: 403 });
  });

  it('runs kube-controller-manager: a deleted namespace is emptied and removed', async () => {
    const kc = await kubeConfig();
    const core = kc.makeApiClient(CoreV1Api);
    const doomed = await freshNamespace(kc, 'doomed');
    await core.createNamespacedConfigMap({
      namespace: doomed.name,
      body: { metadata: { name: 'x' }, data: { a: 'b' } },
    });
    await doomed.dispose();
    await pollUntil(
      `namespace ${doomed.name} to be deleted`,
      async () => {
        try {
          await core.readNamespace({ name: doomed.name });
          return undefined;
        } catch (err: unknown) {
          if (err instanceof ApiException && err.code === 404) return true;
          throw err;
        }
      },
      { timeoutMs: 45_000, intervalMs: 250 },
    );
  });

  it('installs the kustomize base config/default (without the Kubernetes door) the way Argo CD syncs it', async () => {
    // The door is opt-in (config/with-kube-api): no control-plane pods run here to back its
    // APIService (config-manifests.test.ts dry-runs config/with-kube-api).
    const kubeconfig = (await sharedCluster()).kubeconfigPath;
    const out = kubectl(kubeconfig, [
      'apply',
      '--server-side',
      '-k',
      join(repoRoot, 'config', 'default'),
    ]);
    expect(out).toMatch(/namespace\/polychrome-system serverside-applied/);
    expect(out).toMatch(
      /customresourcedefinition.apiextensions.k8s.io\/conversations.polychrome.dev serverside-applied/,
    );
    expect(out).toMatch(
      /clusterrole.rbac.authorization.k8s.io\/polychrome-control-plane serverside-applied/,
    );
    const sa = await (await kubeConfig()).makeApiClient(CoreV1Api).readNamespacedServiceAccount({
      namespace: 'polychrome-system',
      name: 'polychrome-control-plane',
    });
    expect(sa.metadata?.name).toBe('polychrome-control-plane');
    // Applying again changes nothing and conflicts with nothing (a GitOps resync).
    expect(
      kubectl(kubeconfig, ['diff', '--server-side', '-k', join(repoRoot, 'config', 'default')]),
    ).toBe('');
  });

  it('accepts config/sandbox (hardened template, warm pool) against the agent-sandbox CRDs', async () => {
    const kubeconfig = (await sharedCluster()).kubeconfigPath;
    const out = kubectl(kubeconfig, [
      'apply',
      '--server-side',
      '-n',
      ns.name,
      '-k',
      join(repoRoot, 'config', 'sandbox'),
    ]);
    expect(out).toMatch(
      /sandboxtemplate.extensions.agents.x-k8s.io\/polychrome-harness serverside-applied/,
    );
    expect(out).toMatch(
      /sandboxwarmpool.extensions.agents.x-k8s.io\/polychrome-harness serverside-applied/,
    );
    const template = JSON.parse(
      kubectl(kubeconfig, [
        'get',
        '-n',
        ns.name,
        'sandboxtemplate',
        'polychrome-harness',
        '-o',
        'json',
      ]),
    ) as unknown;
    // Nothing of the hardening was pruned by the CRD's schema.
    expect(template).toMatchObject({
      spec: {
        podTemplate: {
          spec: {
            runtimeClassName: 'gvisor',
            automountServiceAccountToken: false,
            securityContext: { runAsNonRoot: true, seccompProfile: { type: 'RuntimeDefault' } },
            containers: [
              {
                securityContext: {
                  readOnlyRootFilesystem: true,
                  allowPrivilegeEscalation: false,
                  capabilities: { drop: ['ALL'] },
                },
              },
            ],
          },
        },
        // The control plane on the harness port; Prometheus (namespace monitoring) on metrics.
        networkPolicy: {
          ingress: [
            {
              from: [
                {
                  namespaceSelector: {
                    matchLabels: { 'kubernetes.io/metadata.name': 'polychrome-system' },
                  },
                },
              ],
              ports: [{ port: 7070, protocol: 'TCP' }],
            },
            {
              from: [
                {
                  namespaceSelector: {
                    matchLabels: { 'kubernetes.io/metadata.name': 'monitoring' },
                  },
                },
              ],
              ports: [{ port: 9090, protocol: 'TCP' }],
            },
          ],
        },
      },
    });
  });
});
