/**
 * The agent-sandbox API as Polychrome speaks it (v1beta1, agent-sandbox v1.0.x): its group,
 * version and resource names, the SandboxClaim it sends and the values it reads from a
 * SandboxTemplate. The one place the group and version are written in TypeScript: the
 * operator, hack/ and the tests take them from here, and `hack/config-manifests.test.ts`
 * checks that config/sandbox and the ClusterRole name the same. Shapes only;
 * `desired-claim.ts` builds claims, `snapshot.ts` holds the observed ones.
 */
import type { OwnerReference } from './child-meta';

const extensionsGroup = 'extensions.agents.x-k8s.io';
const coreGroup = 'agents.x-k8s.io';
const version = 'v1beta1';

/**
 * Names of the agent-sandbox API Polychrome speaks. agent-sandbox v1.0 serves every kind
 * as v1beta1 only (v1alpha1 and the conversion webhook are gone).
 */
export const AgentSandboxApi = {
  extensionsGroup,
  coreGroup,
  version,
  /** `apiVersion` of SandboxClaim, SandboxTemplate and SandboxWarmPool. */
  extensionsApiVersion: `${extensionsGroup}/${version}`,
  /** `apiVersion` of Sandbox. */
  coreApiVersion: `${coreGroup}/${version}`,
  claimPlural: 'sandboxclaims',
  warmPoolPlural: 'sandboxwarmpools',
  templatePlural: 'sandboxtemplates',
  sandboxPlural: 'sandboxes',
} as const;

/**
 * A SandboxClaim as sent to the API server. `spec.warmPoolRef` is the one required field.
 * No `spec.lifecycle`: the claim lives as long as its Conversation wants a sandbox (owner
 * reference, idle close and retention delete it); a `shutdownTime` would let agent-sandbox
 * end a sandbox under a running turn. No `volumeClaimTemplates`. `env` forces a cold start
 * (agent-sandbox makes a new Sandbox from the template instead of adopting a warm one).
 */
export interface SandboxClaimManifest {
  apiVersion: typeof AgentSandboxApi.extensionsApiVersion;
  kind: 'SandboxClaim';
  metadata: {
    name: string;
    namespace: string;
    labels: Record<string, string>;
    ownerReferences: OwnerReference[];
  };
  spec: { warmPoolRef: { name: string }; env?: ClaimEnvVar[] };
}

/** One `SandboxClaim.spec.env` item: a plain value (the claim has no `valueFrom`). */
export interface ClaimEnvVar {
  name: string;
  value: string;
  /** The container it goes to; agent-sandbox's default is the template's first container. */
  containerName?: string;
}

/** `SandboxTemplate.spec.envVarsInjectionPolicy` values. */
export const EnvVarsInjectionPolicy = {
  /** A claim may add variables the container does not set, and override none. */
  Allowed: 'Allowed',
  /** A claim may add variables and override the container's. */
  Overrides: 'Overrides',
  /** A claim with `env` is refused (the default). */
  Disallowed: 'Disallowed',
} as const;
