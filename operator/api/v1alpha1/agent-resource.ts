/**
 * The Agent API (polychrome.dev/v1alpha1): one agent's model (a ModelConfig), system
 * prompt, tools, step budget and approval rules, and the Agents it may hand a
 * conversation to or call as tools. A Conversation names its entry Agent in
 * `spec.agentRef` (docs/operator.md, "Agents and ModelConfigs").
 */
import { maxStepsField, systemPromptField, toolsField } from './conversation-spec';
import type { ObjectMeta } from './conversation-types';
import { DNS_LABEL_PATTERN, DNS_SUBDOMAIN_PATTERN } from './field-patterns';
import type { ReadyStatus } from './ready-status';
import type { CelRule, Infer } from './schema-builder';
import { CelReason, list, object, required, string } from './schema-builder';

/** Names of the Agent resource. */
export const AgentResource = {
  group: 'polychrome.dev',
  version: 'v1alpha1',
  apiVersion: 'polychrome.dev/v1alpha1',
  kind: 'Agent',
  listKind: 'AgentList',
  plural: 'agents',
  singular: 'agent',
  categories: ['polychrome'],
} as const;

/** The most handoff targets, and the most delegates, one Agent names. */
export const MAX_AGENT_TARGETS = 16;

/** A list of Agent names (handoffs, delegates). */
function agentNames(description: string) {
  return list(
    string({
      description: 'An Agent name, in this namespace.',
      maxLength: 63,
      pattern: DNS_LABEL_PATTERN,
    }),
    { description, maxItems: MAX_AGENT_TARGETS, listType: 'set' },
  );
}

/** `spec` of an Agent. */
export const agentResourceSpecField = object(
  {
    modelRef: required(
      object(
        {
          name: required(
            string({
              description: 'Name of a ModelConfig in this namespace.',
              maxLength: 253,
              pattern: DNS_SUBDOMAIN_PATTERN,
            }),
          ),
        },
        { description: 'The ModelConfig (provider, model, endpoint, key) this agent calls.' },
      ),
    ),
    description: string({
      description:
        'What this agent does, in a sentence or two: other agents see it when they are offered a handoff or a delegation to it. At most 1024 characters.',
      maxLength: 1024,
    }),
    systemPrompt: systemPromptField,
    tools: toolsField,
    maxSteps: maxStepsField,
    handoffs: agentNames(
      `Agents this agent may hand the conversation to (at most ${MAX_AGENT_TARGETS}); the one handed to answers from then on.`,
    ),
    delegates: agentNames(
      `Agents this agent may call as tools (at most ${MAX_AGENT_TARGETS}); each answers one task and returns.`,
    ),
  },
  { description: 'Desired state of the agent.' },
);

/**
 * Rules at the schema root, where CEL may read `self.metadata.name`: an Agent's name is a
 * DNS label (others name it in handoffs and delegates, which hold DNS labels), and it
 * names neither itself in handoffs nor in delegates.
 */
export const agentRootRules: readonly CelRule[] = [
  {
    rule: `size(self.metadata.name) <= 63 && self.metadata.name.matches('${DNS_LABEL_PATTERN}')`,
    message:
      'an Agent name must be a DNS label (at most 63 lower-case letters, digits and -), since other Agents name it in handoffs and delegates',
  },
  {
    rule: '!has(self.spec.handoffs) || !(self.metadata.name in self.spec.handoffs)',
    message: 'spec.handoffs must not name the Agent itself',
    fieldPath: '.spec.handoffs',
    reason: CelReason.FieldValueForbidden,
  },
  {
    rule: '!has(self.spec.delegates) || !(self.metadata.name in self.spec.delegates)',
    message: 'spec.delegates must not name the Agent itself',
    fieldPath: '.spec.delegates',
    reason: CelReason.FieldValueForbidden,
  },
];

/** Desired state of an Agent. */
export type AgentResourceSpec = Infer<typeof agentResourceSpecField>;

/** An Agent object. */
export interface Agent {
  apiVersion: typeof AgentResource.apiVersion;
  kind: typeof AgentResource.kind;
  metadata: ObjectMeta;
  spec: AgentResourceSpec;
  status?: ReadyStatus;
}
