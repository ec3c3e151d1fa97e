/**
 * `spec` of a Conversation, declared once with the schema builder: the CRD's schema is
 * `conversationSpecField.schema`, and the TypeScript types below are inferred from the same
 * declarations. Field documentation lives in the `description`s (also shown by
 * `kubectl explain conversation.spec`).
 */
import { APPROVAL_RULE_PATTERN } from '../../../common/approval-rules';
import { IDENTITY_MAX_LENGTH, IDENTITY_PATTERN } from '../../../common/identity';
import {
  DEFAULT_MAX_STEPS,
  DEFAULT_MCP_TIMEOUT_MS,
  DEFAULT_MODEL,
  DEFAULT_RETENTION,
  DEFAULT_TEMPLATE,
  DEFAULT_WARM_POOL,
  HISTORY_TOKENS_MAX,
  HISTORY_TOKENS_MIN,
  JournalRetention,
  MAX_STEPS_LIMIT,
  McpTransport,
  RETENTION_NEVER,
  SandboxBackend,
  Visibility,
} from './conversation-values';
import {
  DNS_LABEL_PATTERN,
  DNS_SUBDOMAIN_PATTERN,
  DURATION_PATTERN,
  HTTP_URL_PATTERN,
  HTTP_URL_RULE,
  MODEL_PATTERN,
  RETENTION_PATTERN,
  TOOL_NAME_PATTERN,
} from './field-patterns';
import type { Infer } from './schema-builder';
import {
  CelReason,
  enumOf,
  integer,
  list,
  object,
  quantity,
  required,
  string,
} from './schema-builder';

/**
 * The Conversation rule "agentRef or the inline agent, never both", over the defaulted
 * object: every inline field is absent, and model and maxSteps hold their defaults.
 */
export const AGENT_REF_EXCLUSIVE_RULE =
  '!has(self.agentRef) || !has(self.agent) || (' +
  '!has(self.agent.name) && !has(self.agent.systemPrompt) && ' +
  '!has(self.agent.historyTokens) && !has(self.agent.handoffTargets) && ' +
  `(!has(self.agent.model) || self.agent.model == '${DEFAULT_MODEL}') && ` +
  `(!has(self.agent.maxSteps) || self.agent.maxSteps == ${DEFAULT_MAX_STEPS}))`;

/** Identity field (owner, participants). */
function identity(description: string) {
  return string({ description, maxLength: IDENTITY_MAX_LENGTH, pattern: IDENTITY_PATTERN });
}

/** A duration field (idleTimeout, retention). */
function duration(description: string, pattern = DURATION_PATTERN, defaultValue?: string) {
  return string({
    description,
    maxLength: 32,
    pattern,
    ...(defaultValue !== undefined ? { default: defaultValue } : {}),
  });
}

/** `spec.agent.systemPrompt`, and an Agent's `spec.systemPrompt`. */
export const systemPromptField = string({
  description: 'System prompt for every turn. At most 32768 characters.',
  maxLength: 32768,
});

/** `spec.agent.maxSteps`, and an Agent's `spec.maxSteps`. */
export const maxStepsField = integer({
  description: `Most model calls in one turn before it stops (1..${MAX_STEPS_LIMIT}). Default ${DEFAULT_MAX_STEPS}.`,
  format: 'int32',
  minimum: 1,
  maximum: MAX_STEPS_LIMIT,
  default: DEFAULT_MAX_STEPS,
});

/** `spec.agent`. */
export const agentField = object(
  {
    name: string({
      description:
        'Name of this agent, used by handoffs: another agent names it in handoffTargets. A DNS label.',
      maxLength: 63,
      pattern: DNS_LABEL_PATTERN,
    }),
    model: string({
      description: `Model id sent to the provider. Default ${DEFAULT_MODEL}.`,
      default: DEFAULT_MODEL,
      minLength: 1,
      maxLength: 128,
      pattern: MODEL_PATTERN,
    }),
    systemPrompt: systemPromptField,
    maxSteps: maxStepsField,
    historyTokens: integer({
      description: `How much of the conversation's history each turn is given, in estimated tokens (${HISTORY_TOKENS_MIN}..${HISTORY_TOKENS_MAX}): the newest complete turns that fit. Unset: the deployment's default (POLYCHROME_HISTORY_TOKENS).`,
      format: 'int32',
      minimum: HISTORY_TOKENS_MIN,
      maximum: HISTORY_TOKENS_MAX,
    }),
    handoffTargets: list(
      string({ description: 'An agent name.', maxLength: 63, pattern: DNS_LABEL_PATTERN }),
      {
        description: 'Agents (by name) this agent may hand the conversation to.',
        maxItems: 16,
        listType: 'set',
      },
    ),
  },
  {
    description: 'The agent that answers in this conversation.',
    default: {},
    rules: [
      {
        rule: '!has(self.name) || !has(self.handoffTargets) || !(self.name in self.handoffTargets)',
        message: 'handoffTargets must not include the agent itself (agent.name)',
        fieldPath: '.handoffTargets',
      },
    ],
  },
);

/** One `spec.tools.mcpServers` item. */
export const mcpServerField = object(
  {
    name: required(
      string({
        description: 'Server name, unique in the list; approval rules say <name>/<tool>.',
        maxLength: 63,
        pattern: DNS_LABEL_PATTERN,
      }),
    ),
    transport: required(
      enumOf(McpTransport, { description: 'stdio (needs command) or http (needs url).' }),
    ),
    command: string({
      description: 'Executable the harness starts (transport stdio only).',
      minLength: 1,
      maxLength: 1024,
    }),
    args: list(string({ description: 'An argument.', maxLength: 4096 }), {
      description: 'Arguments for command (transport stdio only).',
      maxItems: 64,
    }),
    url: string({
      description:
        'MCP streamable HTTP endpoint (transport http only): an absolute http:// or https:// URL with a host.',
      maxLength: 2048,
      pattern: HTTP_URL_PATTERN,
      rules: [
        {
          rule: HTTP_URL_RULE,
          message:
            'url must be an absolute URL with scheme https (or http) and a host, such as https://mcp.example.com/mcp',
        },
      ],
    }),
    timeoutMs: integer({
      description: `Timeout of one MCP request in milliseconds (1..600000). Default ${DEFAULT_MCP_TIMEOUT_MS}.`,
      format: 'int32',
      minimum: 1,
      maximum: 600_000,
      default: DEFAULT_MCP_TIMEOUT_MS,
    }),
  },
  {
    description: 'An MCP server whose tools the agent may call.',
    rules: [
      {
        rule: '!(has(self.command) && has(self.url))',
        message: 'set either command (transport stdio) or url (transport http), not both',
        fieldPath: '.url',
        reason: CelReason.FieldValueForbidden,
      },
      {
        rule: 'has(self.command) || has(self.url)',
        message: 'one of command (transport stdio) or url (transport http) is required',
        reason: CelReason.FieldValueRequired,
      },
      {
        rule: "self.transport == 'stdio' ? !has(self.url) : !has(self.command)",
        message: 'transport stdio takes command and args; transport http takes url',
        fieldPath: '.transport',
      },
      {
        rule: "!has(self.args) || self.transport == 'stdio'",
        message: 'args is only used with transport stdio',
        fieldPath: '.args',
        reason: CelReason.FieldValueForbidden,
      },
    ],
  },
);

/** `spec.tools`. */
export const toolsField = object(
  {
    mcpServers: list(mcpServerField, {
      description: 'MCP servers, unique by name.',
      maxItems: 16,
      listType: 'map',
      listMapKeys: ['name'],
    }),
    builtin: list(
      string({ description: 'A builtin tool name.', maxLength: 64, pattern: TOOL_NAME_PATTERN }),
      { description: 'Builtin harness tools the agent may call.', maxItems: 32, listType: 'set' },
    ),
    requireApproval: list(
      string({
        description: 'A builtin tool name, <mcpServer>/<tool>, or <mcpServer>/*.',
        maxLength: 192,
        pattern: APPROVAL_RULE_PATTERN,
      }),
      {
        description:
          'Tools whose calls wait for a person to approve them. Each entry names a tool in builtin, or <mcpServer>/<tool> or <mcpServer>/* of a server in mcpServers.',
        maxItems: 64,
        listType: 'set',
      },
    ),
  },
  {
    description: 'Tools the agent may call.',
    rules: [
      {
        rule:
          "!has(self.requireApproval) || self.requireApproval.all(t, t.contains('/') ? " +
          "(has(self.mcpServers) && self.mcpServers.exists(s, t.startsWith(s.name + '/'))) : " +
          '(has(self.builtin) && t in self.builtin))',
        message:
          'every requireApproval entry must name a tool in builtin, or <server>/<tool> or <server>/* of a server in mcpServers',
        fieldPath: '.requireApproval',
      },
    ],
  },
);

/** Requests or limits of `spec.sandbox.resources`. */
function resourceList(description: string) {
  return object(
    {
      cpu: quantity({ description: 'CPU, e.g. 500m or 2.' }),
      memory: quantity({ description: 'Memory, e.g. 512Mi or 2Gi.' }),
      'ephemeral-storage': quantity({ description: 'Scratch disk, e.g. 1Gi.' }),
    },
    { description },
  );
}

/** `spec.sandbox`. */
export const sandboxField = object(
  {
    backend: enumOf(SandboxBackend, {
      description:
        'agent-sandbox: a SandboxClaim on a warm pool; pod: a plain pod with the same spec. Default agent-sandbox. Immutable.',
      default: SandboxBackend.AgentSandbox,
      rules: [{ rule: 'self == oldSelf', message: 'sandbox.backend is immutable' }],
    }),
    warmPool: string({
      description: `SandboxWarmPool the claim draws from (backend agent-sandbox only). Default ${DEFAULT_WARM_POOL}.`,
      maxLength: 253,
      pattern: DNS_SUBDOMAIN_PATTERN,
    }),
    template: string({
      description: `Harness template: a SandboxTemplate (backend agent-sandbox) or a core/v1 PodTemplate (backend pod) in this namespace. Default ${DEFAULT_TEMPLATE}.`,
      maxLength: 253,
      pattern: DNS_SUBDOMAIN_PATTERN,
    }),
    resources: object(
      {
        requests: resourceList('Resources the harness container is guaranteed.'),
        limits: resourceList('Most resources the harness container may use.'),
      },
      { description: 'Resources of the harness container; the template decides when omitted.' },
    ),
  },
  {
    description: 'The isolated sandbox (harness pod) the conversation runs in.',
    default: {},
    rules: [
      {
        // backend is defaulted before CEL runs; the has() guard only keeps the rule total.
        rule: "!has(self.warmPool) || !has(self.backend) || self.backend == 'agent-sandbox'",
        message: 'warmPool is only used by backend agent-sandbox',
        fieldPath: '.warmPool',
        reason: CelReason.FieldValueForbidden,
      },
    ],
  },
);

/** `spec`. */
export const conversationSpecField = object(
  {
    agentRef: object(
      {
        name: required(
          string({
            description: 'Name of an Agent in this namespace.',
            maxLength: 63,
            pattern: DNS_LABEL_PATTERN,
          }),
        ),
      },
      {
        description:
          'The entry Agent (polychrome.dev/v1alpha1) of this conversation, in its namespace: the agent that answers first. Set either agentRef or the inline agent fields, not both.',
      },
    ),
    agent: agentField,
    tools: toolsField,
    idleTimeout: duration(
      'Close the conversation and release its pod after this long without a turn (e.g. 30m, 1h30m). 0s or omitted: never close for idleness. Units h, m, s.',
    ),
    // Retention is validated as strictly as idleTimeout: the API server rejects a malformed
    // value with a message naming the field. The reconciler still parses defensively (an
    // object stored before this validation existed, or a pattern-valid value that
    // overflows) and then disables deletion and sets Degraded/RetentionInvalid.
    // `never` and GitOps-managed objects (docs/operator.md, "Retention") are closed but kept:
    // deleting an object Git declares makes Argo CD or Flux recreate it with a new uid and
    // an empty journal.
    retention: duration(
      `Delete the object this long after the conversation is fully closed. Units h, m, s. Default ${DEFAULT_RETENTION}. ${RETENTION_NEVER}: close it but never delete it. A Conversation that Argo CD or Flux manages (its tracking annotation or label) is never deleted whatever this says.`,
      RETENTION_PATTERN,
      DEFAULT_RETENTION,
    ),
    // No schema default: omitted means the deployment's default (POLYCHROME_JOURNAL_RETENTION).
    journalRetention: enumOf(JournalRetention, {
      description:
        "What happens to the conversation's journal when this object is deleted. keep: it stays on the state volume, readable; checkpoint: its events are removed and a record of its final head and root, signed by the state plane's journal key, stays, so an export taken before can still be checked; delete: its events are removed and nothing but a tombstone stays. Omitted: the control plane's default (keep unless configured otherwise).",
    }),
    visibility: enumOf(Visibility, {
      description: 'private: owner only; shared: owner and participants. Default private.',
      default: Visibility.Private,
    }),
    owner: identity(
      'Identity that owns the conversation: provider:external_id or provider:scope:external_id.',
    ),
    participants: list(
      identity('An identity: provider:external_id or provider:scope:external_id.'),
      {
        description: 'Identities that take part in a shared conversation.',
        maxItems: 64,
        listType: 'set',
      },
    ),
    sandbox: sandboxField,
  },
  {
    description: 'Desired state of the conversation.',
    rules: [
      {
        // spec.agent defaults to {} and its model and maxSteps have defaults, so after
        // defaulting an agentRef-only spec still carries those two: they count as unset
        // while they hold the default value.
        rule: AGENT_REF_EXCLUSIVE_RULE,
        message:
          'spec.agentRef names an Agent, so spec.agent must be left out (its systemPrompt, name, model, maxSteps, historyTokens and handoffTargets come from the Agent and its ModelConfig): set agentRef or agent, not both',
        fieldPath: '.agentRef',
        reason: CelReason.FieldValueForbidden,
      },
    ],
  },
);

/** Desired state of a Conversation (see the field descriptions in `conversationSpecField`). */
export type ConversationSpec = Infer<typeof conversationSpecField>;
/** `spec.agentRef`. */
export type AgentRefSpec = NonNullable<ConversationSpec['agentRef']>;
/** `spec.agent`. */
export type AgentSpec = Infer<typeof agentField>;
/** `spec.tools`. */
export type ToolsSpec = Infer<typeof toolsField>;
/** One `spec.tools.mcpServers` item. */
export type McpServerSpec = Infer<typeof mcpServerField>;
/** `spec.sandbox`. */
export type SandboxSpec = Infer<typeof sandboxField>;
