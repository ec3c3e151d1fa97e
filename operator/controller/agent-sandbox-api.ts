/**
 * The agent-sandbox API as the reconciler speaks it (v1beta1): its group, version and
 * resource names, the SandboxClaim it sends and the values it reads from a SandboxTemplate.
 * Shapes only; `desired-claim.ts` builds claims, `snapshot.ts` holds the observed ones.
 */
import type { OwnerReference } from './child-meta';

/** Names of the agent-sandbox API the reconciler speaks (v1beta1 only, no conversion webhook). */
export const AgentSandboxApi = {
  extensionsGroup: 'extensions.agents.x-k8s.io',
  coreGroup: 'agents.x-k8s.io',
  version: 'v1beta1',
  claimPlural: 'sandboxclaims',
  warmPoolPlural: 'sandboxwarmpools',
  templatePlural: 'sandboxtemplates',
  sandboxPlural: 'sandboxes',
} as const;

/** A SandboxClaim as sent to the API server. */
export interface SandboxClaimManifest {
  apiVersion: 'extensions.agents.x-k8s.io/v1beta1';
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

/** `SandboxTemplate.spec.envVarsInjectionPolicy` values (agent-sandbox v0.5). */
export const EnvVarsInjectionPolicy = {
  /** A claim may add variables the container does not set, and override none. */
  Allowed: 'Allowed',
  /** A claim may add variables and override the container's. */
  Overrides: 'Overrides',
  /** A claim with `env` is refused (the default). */
  Disallowed: 'Disallowed',
} as const;
