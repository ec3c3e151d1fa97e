import {
  ApiException,
  CoreV1Api,
  CustomObjectsApi,
  KubeConfig,
  PatchStrategy,
  setHeaderOptions,
} from '@kubernetes/client-node';
import { randomBytes } from 'node:crypto';
import { LocalCluster } from '../../../hack/lib/local-cluster';
import { ConversationResource } from '../../../operator/api/v1alpha1/conversation-types';
import { clusterDirEnv } from '../shared-cluster';

/** The shared cluster started by the global setup. */
export async function sharedCluster(): Promise<LocalCluster> {
  const dir = process.env[clusterDirEnv];
  if (dir === undefined) {
    throw new Error(
      `${clusterDirEnv} is not set: run integration tests through jest's integration project`,
    );
  }
  return LocalCluster.attach(dir);
}

/** A KubeConfig for the admin, or for the identity in `kubeconfigPath`. */
export async function kubeConfig(kubeconfigPath?: string): Promise<KubeConfig> {
  const kc = new KubeConfig();
  kc.loadFromFile(kubeconfigPath ?? (await sharedCluster()).kubeconfigPath);
  return kc;
}

/**
 * A namespace of its own for one test file: created now, deleted by the returned
 * `dispose` (kube-controller-manager then empties it).
 */
export async function freshNamespace(
  kc: KubeConfig,
  prefix: string,
): Promise<{ name: string; dispose: () => Promise<void> }> {
  const core = kc.makeApiClient(CoreV1Api);
  const name = `${prefix}-${randomBytes(3).toString('hex')}`;
  await core.createNamespace({
    body: { metadata: { name, labels: { 'polychrome.dev/test': prefix } } },
  });
  return {
    name,
    dispose: async () => {
      try {
        await core.deleteNamespace({ name });
      } catch (err: unknown) {
        if (!(err instanceof ApiException && err.code === 404)) throw err;
      }
    },
  };
}

/** Conversations API shortcuts. */
export function conversations(kc: KubeConfig): {
  api: CustomObjectsApi;
  group: 'polychrome.dev';
  version: 'v1alpha1';
  plural: 'conversations';
} {
  return {
    api: kc.makeApiClient(CustomObjectsApi),
    group: 'polychrome.dev',
    version: 'v1alpha1',
    plural: 'conversations',
  };
}

/**
 * Creates the Conversation `name` in `namespace` as `kc`'s user; without `spec` the object
 * has none (for tests of the schema's refusals). `meta` adds labels and annotations.
 */
export function createConversationObject(
  kc: KubeConfig,
  namespace: string,
  name: string,
  spec?: unknown,
  meta: { labels?: Record<string, string>; annotations?: Record<string, string> } = {},
): Promise<unknown> {
  const { api, group, version, plural } = conversations(kc);
  return api.createNamespacedCustomObject({
    group,
    version,
    plural,
    namespace,
    body: {
      apiVersion: ConversationResource.apiVersion,
      kind: ConversationResource.kind,
      metadata: { name, ...meta },
      ...(spec === undefined ? {} : { spec }),
    },
  });
}

/** The message of an API error (the Status body's message when there is one). */
export function apiErrorMessage(err: unknown): string {
  if (err instanceof ApiException) {
    const body: unknown = err.body;
    if (typeof body === 'string') {
      try {
        const parsed: unknown = JSON.parse(body);
        if (typeof parsed === 'object' && parsed !== null && 'message' in parsed)
          return String(parsed.message);
      } catch {
        return body;
      }
    }
    if (typeof body === 'object' && body !== null && 'message' in body) return String(body.message);
  }
  return err instanceof Error ? err.message : String(err);
}

/** The value at `path` inside a parsed API object, or undefined when any step is missing. */
export function field(obj: unknown, ...path: string[]): unknown {
  let cur: unknown = obj;
  for (const key of path) {
    if (typeof cur !== 'object' || cur === null || !(key in cur)) return undefined;
    cur = Reflect.get(cur, key);
  }
  return cur;
}

/**
 * Drops the finalizers of every Conversation in `namespace`, so the namespace can go once
 * the controller that would have removed them is stopped.
 */
export async function dropConversationFinalizers(kc: KubeConfig, namespace: string): Promise<void> {
  const { api, group, version, plural } = conversations(kc);
  const list: unknown = await api.listNamespacedCustomObject({ group, version, plural, namespace });
  const items = field(list, 'items');
  for (const item of Array.isArray(items) ? items : []) {
    const name = field(item, 'metadata', 'name');
    if (typeof name !== 'string') continue;
    await api
      .patchNamespacedCustomObject(
        { group, version, plural, namespace, name, body: { metadata: { finalizers: null } } },
        setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
      )
      .catch(() => undefined);
  }
}
