/**
 * The fixed values of Conversation fields: the defaults a reader applies when a field is
 * omitted, the limits, and the closed sets a field takes its value from (`as const`).
 * The schema (conversation-spec.ts, conversation-status.ts) declares them; readers use them.
 */
/** Model used when `spec.agent.model` is omitted. */
export const DEFAULT_MODEL = 'claude-sonnet-5-5';
/** Steps (model calls) per turn when `spec.agent.maxSteps` is omitted. */
export const DEFAULT_MAX_STEPS = 8;
/**
 * History budget in estimated tokens when neither `spec.agent.historyTokens` nor the
 * deployment (POLYCHROME_HISTORY_TOKENS) sets one: about 200 KB of text, a fraction of
 * a current model's context window and of the harness's 4 MiB message limit.
 */
export const DEFAULT_HISTORY_TOKENS = 50_000;
/** Bounds of `spec.agent.historyTokens` (docs/turns.md, "The history window"). */
export const HISTORY_TOKENS_MIN = 256;
export const HISTORY_TOKENS_MAX = 1_000_000;
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

/**
 * What happens to a Conversation's journal partition when the Conversation is deleted
 * (docs/operator.md, "Journal retention").
 */
export const JournalRetention = {
  /** The journal stays on the state volume, readable, forever (the default). */
  Keep: 'keep',
  /** The events go; a signed record of the final head, root and key stays. */
  Checkpoint: 'checkpoint',
  /** The events go; only a tombstone stays. */
  Delete: 'delete',
} as const;
export type JournalRetention = (typeof JournalRetention)[keyof typeof JournalRetention];

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

/**
 * The Namespace label that onboards it. Only the value `true` counts: any other value, or
 * none, offboards. Tenants cannot write it: the built-in `admin` and `edit` roles of a
 * namespace grant no update on the Namespace object itself.
 */
export const ONBOARDING_LABEL = { key: 'polychrome.dev/enabled', value: 'true' } as const;
