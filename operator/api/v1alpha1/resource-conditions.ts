/**
 * The Ready condition of an Agent and of a ModelConfig: its reasons, declared once beside
 * the CRD types (docs/operator.md, "Agents and ModelConfigs"). The control plane's pure
 * cores (controller/agent-ready.ts, controller/model-config-ready.ts) decide them.
 */

/** Reasons of a ModelConfig's Ready condition. */
export const ModelConfigReason = {
  /** True: the key Secret is readable and holds the key, or no key is needed. */
  Resolved: 'Resolved',
  /** False: the control plane may not `get` the Secret; the message says how to grant it. */
  SecretForbidden: 'SecretForbidden',
  /** False: the Secret named by secretKeyRef does not exist. */
  SecretNotFound: 'SecretNotFound',
  /** False: the Secret exists but has no such key, or the key is empty. */
  SecretKeyMissing: 'SecretKeyMissing',
} as const;
export type ModelConfigReason = (typeof ModelConfigReason)[keyof typeof ModelConfigReason];

/** Reasons of an Agent's Ready condition. */
export const AgentReason = {
  /** True: the ModelConfig is Ready and every handoff and delegate target exists. */
  Resolved: 'Resolved',
  /** False: no ModelConfig of that name in the Agent's namespace. */
  ModelConfigNotFound: 'ModelConfigNotFound',
  /** False: the ModelConfig exists but is not Ready; the message names its reason. */
  ModelConfigNotReady: 'ModelConfigNotReady',
  /** False: handoffs or delegates name Agents that do not exist; the message lists them. */
  TargetNotFound: 'TargetNotFound',
} as const;
export type AgentReason = (typeof AgentReason)[keyof typeof AgentReason];
