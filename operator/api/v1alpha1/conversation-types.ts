/**
 * The Conversation API (polychrome.dev/v1alpha1). Every field is declared once below with
 * the schema builder: the CRD's OpenAPI schema is `conversationSpecField.schema` /
 * `conversationStatusField.schema` and the TypeScript types are inferred from the same
 * declarations. Field documentation lives in the `description`s (also shown by
 * `kubectl explain conversation.spec`).
 *
 * The TypeScript types describe the object as a client may send it: a field with a schema
 * default is optional here even though objects read back from the API server carry it.
 * Readers use the `DEFAULT_*` constants for fields whose default the schema cannot set.
 */
import { ConditionStatus, ConversationPhase } from './conditions';
import { IDENTITY_MAX_LENGTH, IDENTITY_PATTERN } from '../../../common/identity';
import { MAX_RECORDED_JOURNAL_KEYS } from '../../../common/journal-keys';
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
import { APPROVAL_RULE_PATTERN } from '../../../common/approval-rules';

/** Names of the Conversation resource. */
export const ConversationResource = {
  group: 'polychrome.dev',
  version: 'v1alpha1',
  apiVersion: 'polychrome.dev/v1alpha1',
  kind: 'Conversation',
  listKind: 'ConversationList',
  plural: 'conversations',
  singular: 'conversation',
  shortNames: ['conv'],
  categories: ['polychrome'],
} as const;

/** Model used when `spec.agent.model` is omitted. */
export const DEFAULT_MODEL = 'claude-sonnet-5-5';
/** Steps (model calls) per turn when `spec.agent.maxSteps` is omitted. */
export const DEFAULT_MAX_STEPS = 8;
/** Upper bound of `spec.agent.maxSteps`. */
export const MAX_STEPS_LIMIT = 64;
/** MCP call timeout when `timeoutMs` is omitted. */
export const DEFAULT_MCP_TIMEOUT_MS = 60_000;
/** How long a closed conversation's object is kept when `spec.retention` is omitted. */
export const DEFAULT_RETENTION = '24h';
/** `spec.retention` that closes the conversation but never deletes its object. */
export const RETENTION_NEVER = 'never';
/**
 * SandboxWarmPool a claim draws from when `spec.sandbox.warmPool` is omitted. Applied by
 * the operator, not the schema: a schema default would also land on `backend: pod`
 * objects, where a warm pool is rejected.
 */
export const DEFAULT_WARM_POOL = 'polychrome-harness';
/**
 * Harness template when `spec.sandbox.template` is omitted: the SandboxTemplate (backend
 * agent-sandbox) or core/v1 PodTemplate (backend pod) in the conversation's namespace.
 */
export const DEFAULT_TEMPLATE = 'polychrome-harness';

/** Conversation visibility. */
export const Visibility = {
  /** Only the owner (and admins) may read or continue it. */
  Private: 'private',
  /** The owner and the listed participants may read and continue it. */
  Shared: 'shared',
} as const;
export type Visibility = (typeof Visibility)[keyof typeof Visibility];

/** How the harness reaches an MCP server. */
export const McpTransport = {
  /** The harness starts `command` with `args` and speaks MCP over its stdin/stdout. */
  Stdio: 'stdio',
  /** The harness connects to `url` with MCP streamable HTTP. */
  Http: 'http',
} as const;
export type McpTransport = (typeof McpTransport)[keyof typeof McpTransport];

/**
 * `status.turns.current.state`: where the turn in flight is. The turn code writes it; the
 * status derivation (operator/controller/conversation-conditions.ts) turns it into
 * `Progressing` and `phase`.
 */
export const TurnState = {
  /** The harness runs the turn. */
  Running: 'running',
  /** The turn waits for a person to approve a tool call (`requestId` names the request). */
  AwaitingApproval: 'awaiting_approval',
  /** The turn waits for a person to answer the agent's question (`requestId`). */
  AwaitingAnswer: 'awaiting_answer',
} as const;
export type TurnState = (typeof TurnState)[keyof typeof TurnState];

/** Where the harness pod comes from. */
export const SandboxBackend = {
  /** A SandboxClaim (kubernetes-sigs/agent-sandbox) on a warm pool. */
  AgentSandbox: 'agent-sandbox',
  /** A plain pod with the same spec, for clusters without agent-sandbox. */
  Pod: 'pod',
} as const;
export type SandboxBackend = (typeof SandboxBackend)[keyof typeof SandboxBackend];

// --- Patterns. Each is RE2 (the API server) and a valid JavaScript RegExp (our tests). ---

/** RFC 1123 label, as Kubernetes object and container names. */
export const DNS_LABEL_PATTERN = '^[a-z0-9]([-a-z0-9]*[a-z0-9])?$';
/** RFC 1123 subdomain, as most Kubernetes object names. */
export const DNS_SUBDOMAIN_PATTERN =
  '^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$';
/**
 * A Go `time.ParseDuration` string restricted to h, m and s, non-negative, so the operator
 * can parse it with a small parser: `30m`, `1h30m`, `1.5h`, `0s`, `0`.
 */
export const DURATION_PATTERN = '^(0|([0-9]+(\\.[0-9]+)?(h|m|s))+)$';
/** `spec.retention`: a {@link DURATION_PATTERN} duration, or `never`. */
export const RETENTION_PATTERN = '^(never|0|([0-9]+(\\.[0-9]+)?(h|m|s))+)$';
/** Identities (`provider:scope:external_id` or `provider:external_id`): one rule, in common/identity.ts. */
export { IDENTITY_MAX_LENGTH, IDENTITY_PATTERN } from '../../../common/identity';
/** An approval rule (common/approval-rules.ts, one pattern for the CRD and the harness). */
export { APPROVAL_RULE_PATTERN };
/** A tool name as the Messages API accepts it. */
export const TOOL_NAME_PATTERN = '^[a-zA-Z0-9_-]{1,64}$';
/** A model id: no whitespace. */
export const MODEL_PATTERN = '^\\S+$';
/** An http(s) URL without whitespace; the harness resolves it. */
export const HTTP_URL_PATTERN = '^https?://\\S+$';
/** Lower-case hex SHA-256 (the journal's root hash). */
export const SHA256_HEX_PATTERN = '^[0-9a-f]{64}$';
/** A journal key id: 16 bytes, lower-case hex (docs/journal-format.md, section 6). */
export const KEY_ID_PATTERN = '^[0-9a-f]{32}$';
/** The canonical base64 of 32 bytes: a raw ed25519 public key. */
export const ED25519_BASE64_PATTERN = '^[A-Za-z0-9+/]{43}=$';
/** `metav1.Condition` type pattern. */
export const CONDITION_TYPE_PATTERN =
  '^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$';
/** `metav1.Condition` reason pattern. */
export const CONDITION_REASON_PATTERN = '^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$';

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

// --- Spec ---

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
    systemPrompt: string({
      description: 'System prompt for every turn. At most 32768 characters.',
      maxLength: 32768,
    }),
    maxSteps: integer({
      description: `Most model calls in one turn before it stops (1..${MAX_STEPS_LIMIT}). Default ${DEFAULT_MAX_STEPS}.`,
      format: 'int32',
      minimum: 1,
      maximum: MAX_STEPS_LIMIT,
      default: DEFAULT_MAX_STEPS,
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
      description: 'MCP streamable HTTP endpoint (transport http only).',
      maxLength: 2048,
      pattern: HTTP_URL_PATTERN,
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
  { description: 'Desired state of the conversation.' },
);

// --- Status (written by the operator's lease holder only) ---

/** One `status.conditions` item: the shape of `metav1.Condition`. */
export const conditionField = object(
  {
    type: required(
      string({
        description: 'Condition type: Ready, Progressing or Degraded.',
        maxLength: 316,
        pattern: CONDITION_TYPE_PATTERN,
      }),
    ),
    status: required(enumOf(ConditionStatus, { description: 'True, False or Unknown.' })),
    observedGeneration: integer({
      description: 'metadata.generation the condition was set for.',
      format: 'int64',
      minimum: 0,
    }),
    lastTransitionTime: required(
      string({
        description: 'When status last changed.',
        format: 'date-time',
        maxLength: 64,
      }),
    ),
    reason: required(
      string({
        description: 'PascalCase cause, e.g. TurnRunning.',
        minLength: 1,
        maxLength: 1024,
        pattern: CONDITION_REASON_PATTERN,
      }),
    ),
    message: required(string({ description: 'Details for people.', maxLength: 32768 })),
  },
  { description: 'A condition (metav1.Condition).' },
);

/** `status`. */
export const conversationStatusField = object(
  {
    phase: enumOf(ConversationPhase, { description: 'Display value derived from conditions.' }),
    conditions: list(conditionField, {
      description: 'Ready, Progressing and Degraded.',
      maxItems: 16,
      listType: 'map',
      listMapKeys: ['type'],
    }),
    observedGeneration: integer({
      description: 'metadata.generation of the last clean reconcile.',
      format: 'int64',
      minimum: 0,
    }),
    lastTurnTime: string({
      description: 'When the last turn started; the idle timer counts from here.',
      format: 'date-time',
      maxLength: 64,
    }),
    closedTime: string({
      description: 'When the conversation was last fully closed; retention counts from here.',
      format: 'date-time',
      maxLength: 64,
    }),
    currentTurn: string({
      description:
        'Id of the turn in flight, if any (the same as turns.current.turnId, kept for older readers).',
      maxLength: 128,
    }),
    turns: object(
      {
        current: object(
          {
            turnId: required(string({ description: 'Id of the turn.', maxLength: 128 })),
            state: required(
              enumOf(TurnState, {
                description: 'running, awaiting_approval or awaiting_answer.',
              }),
            ),
            requestId: string({
              description: 'The approval or question the turn waits for.',
              maxLength: 128,
            }),
          },
          { description: 'The turn in flight; absent when none is.' },
        ),
        quarantined: object(
          {
            turnId: required(string({ description: 'Id of the turn.', maxLength: 128 })),
            toolCallId: string({
              description: 'The side-effecting tool call whose outcome is unknown, if any.',
              maxLength: 128,
            }),
            reason: required(string({ description: 'Why it was quarantined.', maxLength: 4096 })),
            since: required(
              string({
                description: 'When it was quarantined.',
                format: 'date-time',
                maxLength: 64,
              }),
            ),
          },
          {
            description:
              'The last quarantined turn: Degraded TurnAmbiguous while set. Cleared when an admin resolves the turn (polychrome conversation resolve; docs/turns.md).',
          },
        ),
      },
      {
        description:
          'What the turn code reports about turns; conditions and phase are derived from it.',
      },
    ),
    sandbox: object(
      {
        claimName: string({ description: 'SandboxClaim name.', maxLength: 253 }),
        sandboxName: string({ description: 'Sandbox name.', maxLength: 253 }),
        podName: string({ description: 'Harness pod name.', maxLength: 253 }),
        endpoint: string({ description: 'Harness address, host:port.', maxLength: 512 }),
      },
      { description: 'The sandbox the conversation runs in now.' },
    ),
    journal: object(
      {
        head: integer({
          description: 'Number of committed journal entries.',
          format: 'int64',
          minimum: 0,
        }),
        lastSignedRoot: string({
          description: 'Last signed MMR root, lower-case hex SHA-256.',
          maxLength: 64,
          pattern: SHA256_HEX_PATTERN,
        }),
        keyId: string({ description: 'Id of the key that signed it.', maxLength: 128 }),
        publicKeys: list(
          object(
            {
              keyId: required(
                string({
                  description: 'Key id: the first 16 bytes of the SHA-256 of the key, hex.',
                  maxLength: 32,
                  pattern: KEY_ID_PATTERN,
                }),
              ),
              publicKey: required(
                string({
                  description: 'The raw 32-byte ed25519 public key, base64.',
                  maxLength: 44,
                  pattern: ED25519_BASE64_PATTERN,
                }),
              ),
            },
            { description: 'One journal signing key.' },
          ),
          {
            description:
              "The state plane's journal signing keys this conversation's journal was seen " +
              'signed with: first the key that signed its first root (recorded when the control ' +
              'plane first recorded the journal), then keys handed over to by key_rotated events ' +
              'signed by a recorded key, newest last; at most 4 (the first and the newest). ' +
              'Verifiers pin them (polychrome conversation verify; docs/replay.md).',
            maxItems: MAX_RECORDED_JOURNAL_KEYS,
          },
        ),
        rollback: object(
          {
            checkpointHead: required(
              integer({
                description: 'The head the checkpoint (or this control plane) had recorded.',
                format: 'int64',
                minimum: 0,
              }),
            ),
            checkpointRoot: required(
              string({
                description: 'The signed root recorded at that head, lower-case hex SHA-256.',
                maxLength: 64,
                pattern: SHA256_HEX_PATTERN,
              }),
            ),
            journalHead: required(
              integer({
                description: "The state plane's head when the rollback was found.",
                format: 'int64',
                minimum: 0,
              }),
            ),
            journalRoot: string({
              description:
                "The state plane's signed root at checkpointHead, when it has one (lower-case hex SHA-256); absent when the journal is shorter.",
              maxLength: 64,
              pattern: SHA256_HEX_PATTERN,
            }),
            since: required(
              string({
                description: 'When the control plane found it.',
                format: 'date-time',
                maxLength: 64,
              }),
            ),
          },
          {
            description:
              "Set while the state plane holds a journal shorter than head, or different at it: Degraded JournalRolledBack, and no turn is appended. Cleared when the journal is restored, or by an admin's recorded decision (polychrome conversation accept-rollback; docs/turns.md).",
          },
        ),
      },
      { description: 'Journal position and integrity.' },
    ),
  },
  { description: 'Observed state, written by the operator.' },
);

/** Desired state of a Conversation (see the field descriptions in `conversationSpecField`). */
export type ConversationSpec = Infer<typeof conversationSpecField>;
/** `spec.agent`. */
export type AgentSpec = Infer<typeof agentField>;
/** `spec.tools`. */
export type ToolsSpec = Infer<typeof toolsField>;
/** One `spec.tools.mcpServers` item. */
export type McpServerSpec = Infer<typeof mcpServerField>;
/** `spec.sandbox`. */
export type SandboxSpec = Infer<typeof sandboxField>;
/** Observed state of a Conversation. */
export type ConversationStatus = Infer<typeof conversationStatusField>;
/**
 * `status.journal.rollback`: the state plane's journal no longer holds the checkpoint
 * (operator/turns/journal-checkpoint.ts). Degraded JournalRolledBack while set.
 */
export type JournalRollback = NonNullable<NonNullable<ConversationStatus['journal']>['rollback']>;
/** One status condition (`metav1.Condition`). */
export type Condition = Infer<typeof conditionField>;

/**
 * The metadata fields Polychrome reads, in wire form (timestamps are RFC 3339 strings).
 * Declared here rather than imported so this folder stays free of client libraries.
 */
export interface ObjectMeta {
  name?: string;
  namespace?: string;
  uid?: string;
  generation?: number;
  resourceVersion?: string;
  creationTimestamp?: string;
  deletionTimestamp?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  finalizers?: string[];
}

/** A Conversation object. */
export interface Conversation {
  apiVersion: typeof ConversationResource.apiVersion;
  kind: typeof ConversationResource.kind;
  metadata: ObjectMeta;
  spec: ConversationSpec;
  status?: ConversationStatus;
}
