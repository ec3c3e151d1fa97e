/**
 * What the turn coordinator (coordinator.ts) is built from: its ports, its bounds and what
 * the metrics see of each turn.
 */
import type { PaymentSettings } from './pay-charge';
import type { Logger } from 'pino';
import type { SummaryModelClient, SummaryOutcome } from './summarizer';
import type { StateJournal } from '../../common/state-journal';
import type { LeaseSource } from '../lease/lease-source';
import type { ApprovalSigner } from './approval-signer';
import type { ConversationStore } from './conversation-access';
import type { HarnessConnector } from './harness-client';
import type { AgentDirectory } from '../controller/agent-resource-reads';
import type { ModelRelay, ModelRouteSource } from './model-relay-port';
import type { PersonaPaymentStore } from './persona-payment-facts';

/** Who holds which roles, for rules that name an identity other than the caller's. */
export interface IdentityDirectory {
  /** Whether `identity` is linked to a persona with the admin role. */
  isAdmin(identity: string, signal: AbortSignal): Promise<boolean>;
}

export interface TurnCoordinatorOptions {
  readonly state: StateJournal;
  readonly harness: HarnessConnector;
  readonly leases: LeaseSource;
  readonly conversations: ConversationStore;
  readonly approvals: ApprovalSigner;
  readonly identities: IdentityDirectory;
  /** This replica (lease holder identity). */
  readonly identity: string;
  readonly logger: Logger;
  /** How long a turn waits for the sandbox (e.g. after a reopen). @default 120000 */
  readonly sandboxWaitMs?: number;
  /** Dispatch attempts of one turn before it is settled with the fallback. @default 3 */
  readonly maxAttempts?: number;
  /** Steps per turn set by the deployment (the harness applies its own too). */
  readonly deploymentMaxSteps?: number;
  /**
   * Bytes of a conversation's memory a model request may carry (docs/turns.md, "Memory").
   * @default 8192 (`DEFAULT_MEMORY_BUDGET_BYTES`)
   */
  readonly memoryBudgetBytes?: number;
  /**
   * History budget (estimated tokens) of an agent that sets none (history-window.ts).
   * @default DEFAULT_HISTORY_TOKENS
   */
  readonly historyTokens?: number;
  readonly nowMs?: () => number;
  /**
   * How long the running mark of a turn on a Ready conversation waits before it is
   * written, so a turn settled by then costs one status write. @default 250
   */
  readonly statusDelayMs?: number;
  /**
   * Least time between two status writes of one conversation: changes that come meanwhile
   * are merged into the next write (a quarantine is never merged away), so a busy
   * conversation costs the API server about one write per interval, not two per turn.
   * A change that reopens a conversation, and shutdown, cut the wait short. @default 1000
   */
  readonly statusIntervalMs?: number;
  /** Journal views kept in memory (conversations). @default 1000 */
  readonly viewCacheSize?: number;
  /** How long a pending approval waits for an answer (`POLYCHROME_APPROVAL_TTL`). @default 24 h */
  readonly approvalTtlMs?: number;
  /**
   * Whether the person whose message started a turn may approve its calls
   * (`POLYCHROME_ALLOW_SELF_APPROVAL`, for single-person installs; each such answer records
   * `self_approval`). @default false: an approval is a second pair of eyes
   */
  readonly allowSelfApproval?: boolean;
  /** What the metrics see of each turn; given at construction, never set later. */
  readonly observer?: TurnObserver;
  /** The model that writes summaries (summarizer.ts); absent: no summaries. */
  readonly summaryModel?: SummaryModelClient;
  /**
   * The Agents and ModelConfigs of a namespace, as the control plane's watches hold them
   * (agent-roster.ts); absent: a Conversation that names an Agent takes no turn.
   */
  readonly agentDirectory?: (namespace: string) => AgentDirectory;
  /**
   * Makes the model calls of agents with a route (model-relay-port.ts); absent: a relayed
   * request is answered `failed_precondition`.
   */
  readonly modelRelay?: ModelRelay;
  /** Each dispatched turn's model routes; absent: no agent's calls are relayed. */
  readonly modelRoutes?: ModelRouteSource;
  /** How paid calls are paid (docs/payments.md); absent: every charge is refused. */
  readonly payments?: PaymentSettings;
  /**
   * The state plane's persona payment records (docs/payments.md, "A persona's wallet and
   * limits"): a persona's wallet and limits, and its period totals. Absent: only the
   * conversation's link applies.
   */
  readonly personaPayments?: PersonaPaymentStore;
}

/** What the metrics see of each turn. */
export interface TurnObserver {
  onTurn?(outcome: string, seconds: number): void;
  onCommit?(seconds: number): void;
  onStatusWrite?(result: 'ok' | 'failed'): void;
  onSummary?(outcome: SummaryOutcome, seconds: number): void;
}
