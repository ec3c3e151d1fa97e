import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import {
  ApiException,
  CoreV1Api,
  CustomObjectsApi,
  RbacAuthorizationV1Api,
  type KubeConfig,
} from '@kubernetes/client-node';
import { pollUntil } from '../../hack/lib/processes';
import { field, freshNamespace, kubeConfig, sharedCluster } from './support/kube';
import {
  createSandboxClaim,
  createSandboxPool,
  ensureRuntimeClass,
  sandboxCore,
  sandboxExtensions,
} from './support/sandbox';

// The agent-sandbox controller built by hack/ from its pinned module runs in the shared
// cluster. This checks the contract the operator relies on (KUBERNETES-FACTS.md): a claim
// against a warm pool becomes a Sandbox, and the Sandbox's pod is created from the
// template's pod spec. There is no kubelet here, so the pod stays Pending.
const ext = sandboxExtensions;
const core = sandboxCore;

describe('agent-sandbox controller', () => {
  let kc: KubeConfig;
  let ns: { name: string; dispose: () => Promise<void> };
  beforeAll(async () => {
    kc = await kubeConfig();
    ns = await freshNamespace(kc, 'sandbox');
    await ensureRuntimeClass(kc);
  });
  afterAll(async () => {
    await ns.dispose();
  });

  it('turns a SandboxClaim into a Sandbox and a pod from the template', async () => {
    const objects = kc.makeApiClient(CustomObjectsApi);
    const namespace = ns.name;
    await createSandboxPool(kc, {
      namespace,
      template: 'harness',
      pool: 'harness-pool',
      podTemplate: {
        metadata: { labels: { 'app.kubernetes.io/name': 'polychrome-harness' } },
        spec: {
          runtimeClassName: 'gvisor',
          automountServiceAccountToken: false,
          containers: [
            { name: 'harness', image: 'polychrome/harness:dev', ports: [{ containerPort: 7070 }] },
          ],
        },
      },
    });
    await createSandboxClaim(kc, namespace, 'conv-a', 'harness-pool');

    const sandboxName = await pollUntil(
      'the claim to name its sandbox',
      async () => {
        const claim: unknown = await objects.getNamespacedCustomObject({
          ...ext,
          namespace,
          plural: 'sandboxclaims',
          name: 'conv-a',
        });
        const name = field(claim, 'status', 'sandbox', 'name');
        return typeof name === 'string' && name !== '' ? name : undefined;
      },
      { timeoutMs: 30_000, intervalMs: 250 },
    );
    const sandbox: unknown = await objects.getNamespacedCustomObject({
      ...core,
      namespace,
      plural: 'sandboxes',
      name: sandboxName,
    });
    const annotated = field(sandbox, 'metadata', 'annotations', 'agents.x-k8s.io/pod-name');
    const podName = typeof annotated === 'string' && annotated !== '' ? annotated : sandboxName;

    const pod = await pollUntil(
      `pod ${podName} to be created by the Sandbox controller`,
      async () => {
        try {
          return await kc.makeApiClient(CoreV1Api).readNamespacedPod({ namespace, name: podName });
        } catch (err: unknown) {
          if (err instanceof ApiException && err.code === 404) return undefined;
          throw err;
        }
      },
      { timeoutMs: 30_000, intervalMs: 250 },
    );
    expect(pod.spec?.runtimeClassName).toBe('gvisor');
    expect(pod.spec?.automountServiceAccountToken).toBe(false);
    expect(pod.spec?.containers.map((c) => c.image)).toEqual(['polychrome/harness:dev']);
    expect(pod.metadata?.ownerReferences?.map((o) => o.kind)).toContain('Sandbox');
    // No kubelet: the Sandbox must not claim readiness for a pod that never ran.
    const conditions = field(sandbox, 'status', 'conditions');
    const ready: unknown = Array.isArray(conditions)
      ? conditions.find((c) => field(c, 'type') === 'Ready')
      : undefined;
    expect(field(ready, 'status')).not.toBe('True');
  });

  // A claim's env reaches the harness (docs/operator.md, "Why letting claims set env is
  // safe"), so only the control plane may write claims. agent-sandbox ships no roles
  // aggregated into admin or edit: a namespace editor, who can write its ConfigMaps, cannot
  // create a claim or change one.
  it('refuses a namespace editor who tries to create or change a SandboxClaim', async () => {
    const namespace = ns.name;
    const user = `editor-${namespace}`;
    await kc.makeApiClient(RbacAuthorizationV1Api).createNamespacedRoleBinding({
      namespace,
      body: {
        metadata: { name: 'editor' },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'edit' },
        subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'User', name: user }],
      },
    });
    const editor = await kubeConfig(await (await sharedCluster()).mintUser(user));
    // The binding works (the edit role's rules are there): the editor writes a ConfigMap.
    await pollUntil(
      'the editor to be allowed a ConfigMap',
      async () => {
        try {
          await editor.makeApiClient(CoreV1Api).createNamespacedConfigMap({
            namespace,
            body: { metadata: { name: 'editor-probe' }, data: { a: 'b' } },
          });
          return true;
        } catch (err: unknown) {
          if (err instanceof ApiException && err.code === 403) return undefined;
          throw err;
        }
      },
      { timeoutMs: 30_000, intervalMs: 500 },
    );
    const status = async (write: () => Promise<unknown>): Promise<number> => {
      try {
        await write();
        return 200;
      } catch (err: unknown) {
        if (err instanceof ApiException) return err.code;
        throw err;
      }
    };
    const claims = editor.makeApiClient(CustomObjectsApi);
    const body = {
      apiVersion: `${ext.group}/${ext.version}`,
      kind: 'SandboxClaim',
      metadata: { name: 'by-editor' },
      spec: {
        warmPoolRef: { name: 'harness-pool' },
        env: [{ name: 'ANTHROPIC_BASE_URL', value: 'https://attacker.invalid' }],
      },
    };
    expect(
      await status(() =>
        claims.createNamespacedCustomObject({ ...ext, namespace, plural: 'sandboxclaims', body }),
      ),
    ).toBe(403);
    expect(
      await status(() =>
        claims.patchNamespacedCustomObject({
          ...ext,
          namespace,
          plural: 'sandboxclaims',
          name: 'conv-a',
          body: [{ op: 'add', path: '/spec/env', value: body.spec.env }],
        }),
      ),
    ).toBe(403);
  });
});
