import {
  ApiException,
  CustomObjectsApi,
  NodeV1Api,
  type KubeConfig,
} from '@kubernetes/client-node';
import { AgentSandboxApi } from '../../../operator/controller/agent-sandbox-api';

/** agent-sandbox's extensions API (templates, warm pools, claims). */
export const sandboxExtensions = {
  group: AgentSandboxApi.extensionsGroup,
  version: AgentSandboxApi.version,
} as const;

/** agent-sandbox's core API (Sandboxes). */
export const sandboxCore = {
  group: AgentSandboxApi.coreGroup,
  version: AgentSandboxApi.version,
} as const;

/**
 * Creates the cluster-scoped RuntimeClass a harness pod names (admission rejects pods
 * naming one that does not exist). Several test files share the cluster: an existing one
 * is fine.
 */
export async function ensureRuntimeClass(
  kc: KubeConfig,
  name = 'gvisor',
  handler = 'runsc',
): Promise<void> {
  try {
    await kc.makeApiClient(NodeV1Api).createRuntimeClass({ body: { metadata: { name }, handler } });
  } catch (err: unknown) {
    if (!(err instanceof ApiException && err.code === 409)) throw err;
  }
}

/** What {@link createSandboxPool} makes. */
export interface SandboxPoolSpec {
  namespace: string;
  /** SandboxTemplate name. */
  template: string;
  /** SandboxWarmPool name (replicas 0: every claim starts a fresh sandbox). */
  pool: string;
  /** The template's `podTemplate` (metadata and spec). */
  podTemplate: Record<string, unknown>;
}

/** Creates a SandboxTemplate and a SandboxWarmPool that draws from it. */
export async function createSandboxPool(kc: KubeConfig, spec: SandboxPoolSpec): Promise<void> {
  const objects = kc.makeApiClient(CustomObjectsApi);
  const apiVersion = AgentSandboxApi.extensionsApiVersion;
  await objects.createNamespacedCustomObject({
    ...sandboxExtensions,
    namespace: spec.namespace,
    plural: 'sandboxtemplates',
    body: {
      apiVersion,
      kind: 'SandboxTemplate',
      metadata: { name: spec.template },
      spec: { podTemplate: spec.podTemplate },
    },
  });
  await objects.createNamespacedCustomObject({
    ...sandboxExtensions,
    namespace: spec.namespace,
    plural: 'sandboxwarmpools',
    body: {
      apiVersion,
      kind: 'SandboxWarmPool',
      metadata: { name: spec.pool },
      spec: { replicas: 0, sandboxTemplateRef: { name: spec.template } },
    },
  });
}

/** Creates a SandboxClaim on `pool`. */
export async function createSandboxClaim(
  kc: KubeConfig,
  namespace: string,
  name: string,
  pool: string,
): Promise<void> {
  await kc.makeApiClient(CustomObjectsApi).createNamespacedCustomObject({
    ...sandboxExtensions,
    namespace,
    plural: 'sandboxclaims',
    body: {
      apiVersion: AgentSandboxApi.extensionsApiVersion,
      kind: 'SandboxClaim',
      metadata: { name },
      spec: { warmPoolRef: { name: pool } },
    },
  });
}
