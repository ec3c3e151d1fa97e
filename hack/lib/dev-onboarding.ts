/**
 * The conversations' namespace under `make dev`, onboarded as a user's is (docs/operator.md,
 * "Conversation namespaces"): config/conversations labels it, and the provisioner installs
 * the sandbox objects and the harness credentials. What stays `make dev`'s own is the
 * model's keys and endpoints from this machine's environment, which a user adds to the
 * onboarded Secret with their own field manager too ("Model keys" there): nothing else here
 * writes to the namespace.
 */
import {
  CoreV1Api,
  CustomObjectsApi,
  KubernetesObjectApi,
  PatchStrategy,
  type KubeConfig,
  type V1Secret,
} from '@kubernetes/client-node';

import { AgentSandboxApi } from '../../operator/controller/agent-sandbox-api';
import { CredentialSecret, ONBOARDED_LABEL } from '../../operator/onboarding/catalog';
import { MAKE_DEV_MANAGER } from './dev-base';
import { isApiError } from './local-node-pod-worker';
import { pollUntil } from './processes';

/** The warm pool (and template) config/sandbox names, which onboarding installs. */
const HARNESS_POOL = 'polychrome-harness';

const isOnboarded = (labels: Record<string, string> | undefined): boolean =>
  labels?.[ONBOARDED_LABEL.key] === ONBOARDED_LABEL.value;

/** Reads the namespace's `polychrome-harness` Secret; undefined when absent. */
async function readHarnessSecret(kc: KubeConfig, namespace: string): Promise<V1Secret | undefined> {
  try {
    return await kc
      .makeApiClient(CoreV1Api)
      .readNamespacedSecret({ name: CredentialSecret.Harness, namespace });
  } catch (err: unknown) {
    if (isApiError(err, 404)) return undefined;
    throw err;
  }
}

/**
 * Waits until onboarding has installed the namespace's harness Secret and warm pool, each
 * with onboarding's label.
 */
export async function waitOnboarded(
  kc: KubeConfig,
  namespace: string,
  timeoutMs = 120_000,
): Promise<void> {
  const custom = kc.makeApiClient(CustomObjectsApi);
  await pollUntil(
    `the provisioner to onboard namespace ${namespace} (its label polychrome.dev/enabled=true)`,
    async () => {
      const secret = await readHarnessSecret(kc, namespace);
      if (!isOnboarded(secret?.metadata?.labels)) return undefined;
      const pool = (await custom
        .getNamespacedCustomObject({
          group: AgentSandboxApi.extensionsGroup,
          version: AgentSandboxApi.version,
          plural: AgentSandboxApi.warmPoolPlural,
          namespace,
          name: HARNESS_POOL,
        })
        .catch((err: unknown) => {
          if (isApiError(err, 404)) return undefined;
          throw err;
        })) as { metadata?: { labels?: Record<string, string> } } | undefined;
      return isOnboarded(pool?.metadata?.labels) ? true : undefined;
    },
    { timeoutMs, intervalMs: 500 },
  );
}

/** What {@link applyModelKeys} did. */
export type ModelKeysResult = 'absent' | 'unchanged' | 'changed';

/**
 * Puts `model` (Secret key → value, hack/lib/harness-config.ts's modelSecretData) into the
 * onboarded `polychrome-harness` Secret as `make dev`'s fields: a server-side apply with
 * its own field manager, so onboarding's syncs keep them and a key left out now (unset in
 * the environment since the last run) is removed. Never creates the Secret: the apply
 * carries the resourceVersion read, which a create refuses, so an absent Secret (not
 * onboarded yet) is `absent` and one onboarding does not own is refused.
 *
 * @throws Error when the Secret is not onboarding's.
 */
export async function applyModelKeys(
  kc: KubeConfig,
  namespace: string,
  model: Readonly<Record<string, string>>,
): Promise<ModelKeysResult> {
  const current = await readHarnessSecret(kc, namespace);
  if (current === undefined) return 'absent';
  if (!isOnboarded(current.metadata?.labels)) {
    throw new Error(
      `dev: Secret ${namespace}/${CredentialSecret.Harness} lacks the label ${ONBOARDED_LABEL.key}=${ONBOARDED_LABEL.value}: it was not made by onboarding (an earlier make dev?); run make dev-reset to start over`,
    );
  }
  const resourceVersion = current.metadata?.resourceVersion ?? '';
  const applied = await KubernetesObjectApi.makeApiClient(kc).patch(
    {
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: { name: CredentialSecret.Harness, namespace, resourceVersion },
      data: Object.fromEntries(
        Object.entries(model).map(([k, v]) => [k, Buffer.from(v, 'utf8').toString('base64')]),
      ),
    },
    undefined,
    undefined,
    MAKE_DEV_MANAGER,
    false,
    PatchStrategy.ServerSideApply,
  );
  return applied.metadata?.resourceVersion === resourceVersion ? 'unchanged' : 'changed';
}

/**
 * Deletes the warm pool's unclaimed Sandboxes (those it still owns), so the pool starts new
 * ones, whose harnesses read the Secret as it is now: a pod reads its variables when it
 * starts. Returns how many.
 */
export async function renewWarmSandboxes(kc: KubeConfig, namespace: string): Promise<number> {
  const custom = kc.makeApiClient(CustomObjectsApi);
  const where = {
    group: AgentSandboxApi.coreGroup,
    version: AgentSandboxApi.version,
    plural: AgentSandboxApi.sandboxPlural,
    namespace,
  };
  const list = (await custom.listNamespacedCustomObject(where)) as {
    items?: {
      metadata?: { name?: string; ownerReferences?: { kind?: string; name?: string }[] };
    }[];
  };
  const pooled = (list.items ?? []).filter((s) =>
    s.metadata?.ownerReferences?.some(
      (o) => o.kind === 'SandboxWarmPool' && o.name === HARNESS_POOL,
    ),
  );
  for (const sandbox of pooled) {
    await custom
      .deleteNamespacedCustomObject({ ...where, name: sandbox.metadata?.name ?? '' })
      .catch((err: unknown) => {
        if (!isApiError(err, 404)) throw err;
      });
  }
  return pooled.length;
}
