/**
 * The SandboxClaim a Conversation wants (backend agent-sandbox). Pure: the reconciler
 * compares it with the observed claim before writing anything.
 */
import type { Conversation } from '../api/v1alpha1';
import { DEFAULT_WARM_POOL } from '../api/v1alpha1';
import type { OwnerReference } from './child-meta';
import { childLabels, conversationOwnerReference } from './child-meta';

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
  spec: { warmPoolRef: { name: string } };
}

/** The warm pool a Conversation's claim draws from: `spec.sandbox.warmPool`, else the default. */
export function warmPoolNameOf(conversation: Conversation): string {
  return conversation.spec.sandbox?.warmPool ?? DEFAULT_WARM_POOL;
}

/**
 * The claim for `conversation`: named after it (one claim per Conversation, so a retry
 * finds the same claim instead of making a second), in its namespace, owned by it.
 * No `additionalPodMetadata`: agent-sandbox only accepts label domains on its allowlist.
 */
export function desiredClaim(conversation: Conversation): SandboxClaimManifest {
  return {
    apiVersion: 'extensions.agents.x-k8s.io/v1beta1',
    kind: 'SandboxClaim',
    metadata: {
      name: conversation.metadata.name ?? '',
      namespace: conversation.metadata.namespace ?? '',
      labels: childLabels(conversation),
      ownerReferences: [conversationOwnerReference(conversation)],
    },
    spec: { warmPoolRef: { name: warmPoolNameOf(conversation) } },
  };
}
