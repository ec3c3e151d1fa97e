/**
 * What a journal view is made of: the view, its turns and what each turn recorded, and the
 * anomalies a fold reads past. Types and their constants only; journal-view.ts builds
 * views, and its parts (decoded-event.ts, lazy-view.ts, turn-state.ts,
 * turn-projections.ts) read and write these.
 */
import type { RecordedRoster } from './agent-roster';
import type { EventKind, EventPayloads } from '../../common/event-kinds';
import type { MemoryEntry } from '../../common/memory';
import type { StandingFold } from '../../common/turn-standing';
import type {
  AgentHandoff,
  ApprovalExpired,
  ApprovalRequest,
  ApprovalResponse,
  Attribution,
  Handoff,
  ModelCall,
  OutboundPaymentReceipt,
  PaymentCharge,
  PaymentSent,
  QuestionRequest,
  QuestionResponse,
  RequestCancelled,
  ToolCall,
  ToolResult,
  TurnAmbiguous,
  TurnComplete,
  TurnResolved,
} from '../../proto/gen/polychrome/events/v1/events';

/** Where the last `signed_root` is and what it says. */
export interface SignedRootRef {
  readonly position: number;
  /** Number of leaves the root covers: positions [0, leafCount). */
  readonly leafCount: number;
  /** The MMR root, lowercase hex. */
  readonly root: string;
  readonly keyId: string;
}

/** A turn's `ingress_directive` (the first one; later ones are anomalies). */
export interface TurnDirectiveRecord {
  readonly position: number;
  /** Lower step budget; 0 means none. */
  readonly maxSteps: number;
  /** Identity that must answer approvals; empty means any admin. */
  readonly requiredApprover: string;
}

/** One `turn_dispatched` of a turn. */
export interface TurnDispatch {
  readonly attempt: number;
  readonly position: number;
  readonly leaseHolder: string;
  readonly fencingToken: number;
  readonly attribution: Attribution;
  readonly dispatchedAtMs: number;
  /**
   * The history the attempt was given starts at the turn whose message is here (0: every
   * earlier complete turn); operator/turns/history-window.ts chooses it.
   */
  readonly historyFrom: number;
  /** The `summary` the attempt was given with its window, or 0 for none (summary-plan.ts). */
  readonly summaryPosition: number;
  /** The `agent_roster` the attempt ran under (lowercase hex), or '' for an inline agent. */
  readonly agentRosterSha256: string;
}

/** A committed step of a turn (any attempt). */
export type RecordedStep =
  | { readonly kind: 'model_call'; readonly position: number; readonly payload: ModelCall }
  | { readonly kind: 'tool_call'; readonly position: number; readonly payload: ToolCall }
  | { readonly kind: 'tool_result'; readonly position: number; readonly payload: ToolResult }
  | { readonly kind: 'agent_handoff'; readonly position: number; readonly payload: AgentHandoff };

/** A request event and where it sits. */
export interface RecordedRequest<T> {
  readonly position: number;
  readonly request: T;
}

/** An answer event and where it sits. */
export interface RecordedResponse<T> {
  readonly position: number;
  readonly response: T;
}

/** The marker that settled a turn. */
export type TurnTerminal =
  | { readonly kind: 'turn_complete'; readonly position: number; readonly payload: TurnComplete }
  | { readonly kind: 'turn_ambiguous'; readonly position: number; readonly payload: TurnAmbiguous }
  | { readonly kind: 'handoff'; readonly position: number; readonly payload: Handoff };

/** Everything the journal says about one turn. Records are immutable: a new event makes a new one. */
export interface TurnView {
  readonly turnId: string;
  readonly idempotencyKey: string;
  readonly text: string;
  readonly attribution: Attribution;
  readonly receivedAtMs: number;
  /** Position of its `message_received` (the API's `requestedAt`). */
  readonly messagePosition: number;
  readonly directive: TurnDirectiveRecord | undefined;
  /** In journal order. */
  readonly dispatches: readonly TurnDispatch[];
  /** `model_call` / `tool_call` / `tool_result` / `agent_handoff` in journal order, over all attempts. */
  readonly steps: readonly RecordedStep[];
  readonly approvalRequests: readonly RecordedRequest<ApprovalRequest>[];
  readonly approvalResponses: readonly RecordedResponse<ApprovalResponse>[];
  readonly questionRequests: readonly RecordedRequest<QuestionRequest>[];
  readonly questionResponses: readonly RecordedResponse<QuestionResponse>[];
  /** `request_cancelled` (an admin cancelled a pending request; a `turn_complete` follows). */
  readonly cancellations: readonly RecordedResponse<RequestCancelled>[];
  /** `approval_expired` (the signed denial it comes with is in `approvalResponses`). */
  readonly expiries: readonly RecordedResponse<ApprovalExpired>[];
  /**
   * The first terminal marker, if any; after a `turn_resolved`, the first one after it
   * (a resolution ends the quarantine: the turn is an orphan again).
   */
  readonly terminal: TurnTerminal | undefined;
  /** `turn_resolved`: an admin settled a quarantine of this turn, in journal order. */
  readonly resolutions: readonly RecordedResponse<TurnResolved>[];
  /** The turn's paid calls (docs/payments.md, "A paid call in a turn"), by charge, in journal order. */
  readonly payments: readonly RecordedPayment[];
  /**
   * Where the turn stands by the one rule (common/turn-standing.ts), folded over the events
   * the view applied to it; turn-state.ts reads it.
   */
  readonly standingFold: StandingFold;
  /**
   * Positions of this turn's entries an admin erased (erased-entries.ts), in order; absent
   * when none was. Their content is gone from the view: an erased message has empty text.
   */
  readonly erasedPositions?: readonly number[];
}

/**
 * One charge of a turn and what became of it: `payment_charge`, then `payment_sent` just
 * before the payment left the control plane, then `outbound_payment_receipt`.
 */
export interface RecordedPayment {
  /** Position of the `payment_charge`. */
  readonly position: number;
  readonly charge: PaymentCharge;
  readonly sent?: { readonly position: number; readonly payload: PaymentSent };
  readonly receipt?: { readonly position: number; readonly payload: OutboundPaymentReceipt };
}

/** A read-only keyed lookup (the view's indexes are persistent maps, not ES Maps). */
export interface Lookup<K, V> {
  get(key: K): V | undefined;
  has(key: K): boolean;
  readonly size: number;
  /** Entries in the index's order. */
  [Symbol.iterator](): Iterator<[K, V]>;
}

/**
 * The fold of events [0, head) of one conversation's journal.
 *
 * What the turn path reads costs the same however long the conversation is: `turnsById`,
 * `turnIdsByKey`, `openTurns` and the newest turns (`newestTurns`). `turns` lists every
 * turn: it is built the first time a view is asked for it, for the transcript, forensics
 * and tests, never on a turn's way through.
 */
export interface JournalView {
  /** The next position: events [0, head) were applied. */
  readonly head: number;
  readonly lastSignedRoot: SignedRootRef | undefined;
  /** In order of their `message_received` position. */
  readonly turns: readonly TurnView[];
  /** The turns that are not settled (common/turn-standing.ts `isSettled`), oldest first. */
  readonly openTurns: readonly TurnView[];
  /** Idempotency key to turn id; the first message of a key wins. */
  readonly turnIdsByKey: Lookup<string, string>;
  /** In order of their `message_received` position. */
  readonly turnsById: Lookup<string, TurnView>;
  /** The turns newest first: a lazy walk from the latest message back. */
  newestTurns(): Iterable<TurnView>;
  /** In journal order. */
  readonly anomalies: readonly JournalAnomaly[];
  /** The newest `agent_config` (docs/replay.md); absent when the journal has none. */
  readonly newestAgentConfig?: AgentConfigRef;
  /**
   * The newest `agent_config` of each agent, by its name ('' for an unnamed agent): the
   * tools that agent was last offered (plan-agent-tools.ts).
   */
  readonly agentConfigs: Lookup<string, AgentConfigRef>;
  /** The newest `agent_roster` (agent-roster.ts); absent when the journal has none. */
  readonly newestAgentRoster?: AgentRosterRef;
  /** The checkpoints of every `rollback_accepted`, in journal order. */
  readonly acceptedLosses: readonly LostCheckpoint[];
  /** The newest `payment_policy`; absent: no wallet was ever linked (docs/payments.md). */
  readonly paymentPolicy: PaymentPolicyRef | undefined;
  /** Every payment sent, in journal order: the spend limits' totals, derived from the journal. */
  readonly spentPayments: readonly SpentPayment[];
  /** The summaries that are not erased, newest first (docs/turns.md, "Summaries"). */
  newestSummaries(): Iterable<SummaryRecord>;
  /** The `summary` at `position`, unless there is none or it was erased. */
  summaryAt(position: number): SummaryRecord | undefined;
  /** The conversation's memory: key to its current entry (memory-fold.ts). */
  readonly memory: ReadonlyMap<string, MemoryEntry>;
}

/** A `summary` event, as the view keeps it. */
export interface SummaryRecord {
  readonly position: number;
  readonly fromPosition: number;
  readonly toPosition: number;
  readonly previousPosition: number;
  readonly text: string;
}

/** The newest `payment_policy`: the wallet linked, and the limits its payments are held to. */
export interface PaymentPolicyRef {
  readonly position: number;
  /** Empty: no wallet is linked; payments are off. */
  readonly wallet: string;
  /** Canonical JSON of the spend limits; empty when no wallet is linked. */
  readonly limitsJson: string;
  readonly actor: string;
  readonly setAtMs: number;
}

/**
 * A payment that counts against the spend limits: one a `payment_sent` marks as sent, paid
 * or of unknown outcome (docs/payments.md, "Spend limits").
 */
export interface SpentPayment {
  readonly network: string;
  readonly asset: string;
  /** Base units, decimal digits. */
  readonly amount: string;
  /** When it was sent (ISO 8601). */
  readonly at: string;
}

/** A checkpoint an admin accepted as lost (a `rollback_accepted`). */
export interface LostCheckpoint {
  /** `status.journal.head` as it was. */
  readonly head: number;
  /** The signed root that ended it, lowercase hex. */
  readonly root: string;
}

/** An `agent_roster`, where it is, and the roster it holds. */
export interface AgentRosterRef extends RecordedRoster {
  readonly position: number;
}

/** Where an `agent_config` is, its digest, and whose tools it records. */
export interface AgentConfigRef {
  readonly position: number;
  /** SHA-256 of its config_json, lowercase hex. */
  readonly sha256: string;
  /** The agent it configures (`agent` of its JSON); '' for an unnamed agent. */
  readonly agent: string;
  /** The names of the tools it offers the model, in order (`tools[].name`). */
  readonly toolNames: readonly string[];
}

/** One event as its typed payload: what a writer committed, before encoding. */
export type TypedEvent = {
  readonly [K in EventKind]: { readonly kind: K; readonly payload: EventPayloads[K] };
}[EventKind];

/** What is odd about an event the fold read past. */
export const AnomalyProblem = {
  /** A `message_received` reused an idempotency key; the first message keeps the key. */
  DuplicateIdempotencyKey: 'duplicate_idempotency_key',
  /** A `message_received` reused a turn id under another key; ignored. */
  DuplicateTurnId: 'duplicate_turn_id',
  /** A turn event names a turn no `message_received` opened; ignored. */
  UnknownTurn: 'unknown_turn',
  /** A second `ingress_directive` for a turn; the first one stands. */
  DuplicateDirective: 'duplicate_directive',
  /** A turn event after the turn's terminal marker: recorded (a second marker is not); the turn stays settled. */
  AfterTerminal: 'after_terminal',
  /** A `turn_resolved` for a turn that is not quarantined; ignored. */
  NotQuarantined: 'not_quarantined',
} as const;
export type AnomalyProblem = (typeof AnomalyProblem)[keyof typeof AnomalyProblem];

/** An event that breaks a journal invariant (a writer bug) but leaves the journal readable. */
export interface JournalAnomaly {
  readonly position: number;
  readonly kind: EventKind;
  readonly turnId: string;
  readonly problem: AnomalyProblem;
  /** For logs: what is odd and what the fold did about it. */
  readonly message: string;
}
