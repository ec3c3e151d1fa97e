/**
 * The contract between the public API (operator/public-api) and the turn coordinator
 * (operator/turns): what an edge may ask of a conversation, in the edge's terms. The API
 * authenticates, parses and maps errors; the service authorizes, claims, commits and runs.
 *
 * Errors are `AppError`s (common/errors.ts) whose code the API maps to an HTTP status
 * (docs/api.md, "Status codes and who may do what", pinned by
 * operator/public-api/api-rules.test.ts): `not_found` (unknown conversation or request),
 * `permission_denied` (not the owner, a participant or an admin; not the required
 * approver; a cancel by anyone but an admin), `conflict` (same idempotency key with another
 * message; a message while a turn awaits an answer; a request answered, cancelled or
 * expired already: 409), `failed_precondition` (the
 * conversation is being deleted), `unavailable` (the harness or the state plane cannot be
 * reached; retry with the same idempotency key), `invalid_argument`.
 */

/**
 * What Kubernetes RBAC allowed a caller on the Kubernetes door (operator/kube-api): one
 * subresource of one Conversation, checked by kube-apiserver and again by a
 * SubjectAccessReview for exactly this request.
 */
export interface KubernetesGrant {
  /** The Conversation's uid the request named (by namespace and name). */
  readonly conversationId: string;
  /** The subresource RBAC allowed (`transcript`, `messages`, `log`, ...). */
  readonly subresource: string;
  /** The RBAC verb allowed on it (`get`, `create`, `delete`): DELETE on approvals cancels. */
  readonly verb: string;
  /** The user's Kubernetes groups, as kube-apiserver authenticated them. */
  readonly groups: readonly string[];
}

/**
 * Who is calling: from a bearer token's session and persona (the public API), or from
 * kube-apiserver's front proxy (the Kubernetes door; `kubernetes` set, no persona).
 */
export interface Caller {
  /** The identity attributed to the caller (`provider:external_id` or `provider:scope:external_id`). */
  readonly identity: string;
  /** Every identity the persona links (`identity` among them). */
  readonly identities: readonly string[];
  /** Empty for a Kubernetes caller. */
  readonly personaId: string;
  /** `admin`, `member`, `edge`; none for a Kubernetes caller (RBAC decides). */
  readonly roles: readonly string[];
  /** Empty for a Kubernetes caller. */
  readonly sessionId: string;
  /** Set on the Kubernetes door only: what RBAC allowed this request. */
  readonly kubernetes?: KubernetesGrant;
}

/** A turn's settled state, as a client sees it. */
export const TurnStatus = {
  /** `turn_complete` exists: `reply` holds the final text. */
  Complete: 'complete',
  /** Waiting for an approval (`approval`) or an answer (`question`). */
  Paused: 'paused',
  /** Quarantined: a side effect's outcome is unknown; an admin must resolve it. */
  Ambiguous: 'ambiguous',
  /** The turn continues with another agent (`handoff`). */
  Handoff: 'handoff',
} as const;
export type TurnStatus = (typeof TurnStatus)[keyof typeof TurnStatus];

/** What a paused turn shows instead of partial text: the pending call. */
export interface ApprovalCard {
  readonly requestId: string;
  readonly toolCallId: string;
  readonly toolName: string;
  /** The call's arguments (parsed from their canonical JSON). */
  readonly args: unknown;
  /** SHA-256 of the canonical JSON of `args`, lowercase hex: what an approval binds. */
  readonly argsSha256: string;
  readonly reason: string;
  /** Identity that must answer (else the turn's directive's); when neither names one, an admin. */
  readonly requiredApprover: string;
  /** The Agent that made the call, when the turn runs Agents. */
  readonly agent?: string;
  /** The delegation thread the call runs on, when not the turn's own (docs/turns.md, "Delegation"). */
  readonly thread?: string;
}

export interface QuestionCard {
  readonly requestId: string;
  readonly question: string;
  /** The Agent that asked, when the turn runs Agents. */
  readonly agent?: string;
  /** The delegation thread it asked on, when not the turn's own. */
  readonly thread?: string;
}

/** Where a settled or paused turn stands: what a reply and a transcript both show. */
export interface TurnOutcome {
  readonly status: TurnStatus;
  /** Final text (status complete). */
  readonly reply?: string;
  /** True when `reply` is the fixed fallback (budget spent, or the turn failed for good). */
  readonly fallback?: boolean;
  readonly approval?: ApprovalCard;
  readonly question?: QuestionCard;
  readonly ambiguous?: { readonly toolCallId: string; readonly reason: string };
  readonly handoff?: { readonly targetAgent: string; readonly reason: string };
}

/** The answer to a posted message or an approval/question answer. */
export interface TurnReply extends TurnOutcome {
  readonly conversationId: string;
  readonly turnId: string;
  /**
   * Journal position of the turn's `message_received`: pass it as `?since=` to the
   * stream to get this turn's events from the start.
   */
  readonly requestedAt: number;
}

/** Limits the edge asks for on one turn (recorded as `ingress_directive`). */
export interface TurnDirective {
  /** Lower step budget for this turn. */
  readonly maxSteps?: number;
  /** Identity that must answer this turn's approvals. */
  readonly requiredApprover?: string;
}

export interface PostMessage {
  readonly conversationId: string;
  readonly text: string;
  /** Same key + same text: the same turn. Same key + other text: conflict. */
  readonly idempotencyKey: string;
  readonly directive?: TurnDirective;
}

export interface AnswerApproval {
  readonly conversationId: string;
  readonly requestId: string;
  /** `cancel`: an admin ends the turn without running the call (docs/turns.md, "Cancel"). */
  readonly decision: 'approve' | 'deny' | 'cancel';
  readonly comment?: string;
}

/** An answer to a question, or an admin's cancel of it (`cancel`, with an optional comment). */
export type AnswerQuestion =
  | { readonly conversationId: string; readonly requestId: string; readonly answer: string }
  | {
      readonly conversationId: string;
      readonly requestId: string;
      readonly cancel: true;
      readonly comment?: string;
    };

/** One turn of the committed transcript (the committed-turn filter applied). */
export interface TranscriptTurn extends TurnOutcome {
  readonly turnId: string;
  /** Journal position of its `message_received`. */
  readonly position: number;
  readonly user: { readonly text: string; readonly caller: string; readonly receivedAtMs: number };
}

export interface Transcript {
  readonly conversationId: string;
  /** Committed (and paused / quarantined) turns, oldest first; in-flight turns are absent. */
  readonly turns: readonly TranscriptTurn[];
  /** Journal head when read: events [0, head) were considered. */
  readonly head: number;
}

/** What the API shows about a conversation. */
export interface ConversationSummary {
  readonly conversationId: string;
  readonly namespace: string;
  readonly name: string;
  /** `conv-{conversationId}`: the journal partition the stream reads. */
  readonly partition: string;
  readonly phase: string;
  readonly ready: boolean;
  readonly owner: string;
  readonly visibility: string;
  readonly currentTurn?: string;
}

/** A live, uncommitted text fragment of a running turn (SSE sends it without an id). */
export interface TextDeltaEvent {
  readonly turnId: string;
  readonly step: number;
  readonly text: string;
  /** The delegation thread writing; '' (or absent) for the turn's own agent. */
  readonly thread?: string;
}

export interface NewConversation {
  /** Optional first message; posted as the first turn when given. */
  readonly message?: Omit<PostMessage, 'conversationId'>;
}

/**
 * An admin settles a quarantined turn (docs/turns.md, "Resolving a quarantined turn"):
 * the side-effecting call did not run, or it ran (with its result, or `result` absent: the
 * result is unknown).
 */
export interface ResolveTurn {
  readonly conversationId: string;
  readonly turnId: string;
  /** The identity the admin acts as: one of the caller's own, recorded with the decision. */
  readonly actor: string;
  readonly decision:
    | { readonly kind: 'did_not_run' }
    | {
        readonly kind: 'ran';
        readonly result: string | undefined;
        /**
         * For a turn quarantined on a payment sent without a receipt: the transaction
         * that paid it (docs/payments.md, "Exactly once"); `result` is then undefined.
         */
        readonly transaction?: string;
      };
}

/**
 * An admin's decision to go on from a rolled-back journal (docs/turns.md, "A rolled-back
 * journal"): `head` is the journal head the admin saw and accepts; the decision is refused
 * when the journal has moved from it.
 */
export interface AcceptRollback {
  readonly conversationId: string;
  readonly head: number;
  /** Why the loss is accepted; recorded with the decision. */
  readonly reason: string;
  /** The identity the admin acts as: one of the caller's own, recorded with the decision. */
  readonly actor: string;
}

/** What accepting a rollback committed (`AcceptRollbackResult` in docs/api/openapi.json). */
export interface AcceptRollbackAnswer {
  readonly conversationId: string;
  /** The checkpoint that was lost: its head and signed root. */
  readonly checkpointHead: number;
  readonly checkpointRoot: string;
  /** Position of the `rollback_accepted` (the journal's head when it was accepted). */
  readonly position: number;
  /** The journal head after the batch: the new checkpoint. */
  readonly head: number;
  readonly actor: string;
  readonly message: string;
}

/**
 * An admin links a wallet to the conversation with the limits its payments are held to, or
 * unlinks it (`wallet` empty, `limits` absent) (docs/payments.md, "Linking a wallet").
 */
export interface SetPaymentPolicy {
  readonly conversationId: string;
  /** A wallet name of the control plane's SecretStore (a DNS label); empty: unlink. */
  readonly wallet: string;
  /** The spend limits as given (a JSON object); required with a wallet, refused without. */
  readonly limits: unknown;
  /** Why; recorded with the policy. */
  readonly reason: string;
  /** The identity the admin acts as: one of the caller's own, recorded with the policy. */
  readonly actor: string;
}

/** The payment policy in force (`PaymentPolicy` in docs/api/openapi.json). */
export interface PaymentPolicyView {
  readonly conversationId: string;
  /** The wallet linked; empty: none, payments are off. */
  readonly wallet: string;
  /** The spend limits; absent without a wallet. */
  readonly limits?: unknown;
  /** Who set it (the actor recorded), when (Unix ms) and where: absent when never set. */
  readonly setBy?: string;
  readonly setAtMs?: number;
  readonly position?: number;
  /** Journal head when read. */
  readonly head: number;
}

/** What setting a payment policy committed (`PaymentPolicySet` in docs/api/openapi.json). */
export interface PaymentPolicyAnswer extends PaymentPolicyView {
  readonly setBy: string;
  readonly setAtMs: number;
  /** Position of the `payment_policy`. */
  readonly position: number;
  readonly message: string;
}

/** What a resolve committed (`ResolveResult` in docs/api/openapi.json). */
export interface ResolveAnswer {
  readonly conversationId: string;
  readonly turnId: string;
  readonly decision: 'did_not_run' | 'ran';
  readonly resultUnknown: boolean;
  readonly actor: string;
  /** Position of the `turn_resolved`. */
  readonly position: number;
  /** The journal head after the batch. */
  readonly head: number;
  readonly message: string;
}

/** One memory entry as the API shows it (`MemoryEntry` in docs/api/openapi.json). */
export interface MemoryEntryView {
  readonly key: string;
  readonly value: string;
  /** Journal position of the `memory_set` that set the current value. */
  readonly position: number;
  /** The turn and tool call whose `memory` call set it. */
  readonly turnId: string;
  readonly toolCallId: string;
  /** When the control plane committed it (Unix ms). */
  readonly setAtMs: number;
}

/** A conversation's memory (`Memory` in docs/api/openapi.json), oldest set first. */
export interface MemoryView {
  readonly conversationId: string;
  readonly entries: readonly MemoryEntryView[];
  /** Journal head when read: events [0, head) were considered. */
  readonly head: number;
}

/** A person's clear of a conversation's memory: one key, or all of it (`key` absent). */
export interface ClearMemory {
  readonly conversationId: string;
  readonly key?: string;
}

/** What a clear committed (`MemoryCleared` in docs/api/openapi.json). */
export interface ClearMemoryAnswer {
  readonly conversationId: string;
  /** The key cleared; absent: all. */
  readonly key?: string;
  /** The keys the clear removed (none: memory held nothing to clear, nothing was committed). */
  readonly cleared: readonly string[];
  /** Position of the `memory_cleared`; absent when nothing was committed. */
  readonly position?: number;
  /** Positions of the `memory_set` events whose content the clear erased. */
  readonly erasedPositions?: readonly number[];
  /** Who asked, as recorded. */
  readonly clearedBy: string;
  readonly head: number;
}

export interface TurnService {
  /** Creates a Conversation from the deployment's default agent, owned by the caller. */
  createConversation(
    caller: Caller,
    request: NewConversation,
    signal: AbortSignal,
  ): Promise<{ summary: ConversationSummary; turn?: TurnReply }>;
  /** The conversation, if it exists and the caller may see it. */
  conversation(caller: Caller, conversationId: string): Promise<ConversationSummary>;
  postMessage(caller: Caller, request: PostMessage, signal: AbortSignal): Promise<TurnReply>;
  answerApproval(caller: Caller, request: AnswerApproval, signal: AbortSignal): Promise<TurnReply>;
  answerQuestion(caller: Caller, request: AnswerQuestion, signal: AbortSignal): Promise<TurnReply>;
  transcript(caller: Caller, conversationId: string, signal: AbortSignal): Promise<Transcript>;
  /** The conversation's memory; who may read it is who may read the transcript. */
  memory(caller: Caller, conversationId: string, signal: AbortSignal): Promise<MemoryView>;
  /** Clears one key or all memory, recorded as `memory_cleared` naming the caller. */
  clearMemory(
    caller: Caller,
    request: ClearMemory,
    signal: AbortSignal,
  ): Promise<ClearMemoryAnswer>;
  /** An admin settles a quarantined turn; it is recovered on the conversation's next claim. */
  resolveTurn(caller: Caller, request: ResolveTurn, signal: AbortSignal): Promise<ResolveAnswer>;
  /** An admin accepts a rolled-back journal, recorded in it (accept-rollback.ts). */
  acceptRollback(
    caller: Caller,
    request: AcceptRollback,
    signal: AbortSignal,
  ): Promise<AcceptRollbackAnswer>;
  /** An admin links or unlinks a wallet, recorded in the journal (payment-policy.ts). */
  setPaymentPolicy(
    caller: Caller,
    request: SetPaymentPolicy,
    signal: AbortSignal,
  ): Promise<PaymentPolicyAnswer>;
  /** The payment policy in force, for an admin acting as `actor` (payment-policy.ts). */
  paymentPolicy(
    caller: Caller,
    conversationId: string,
    actor: string,
    signal: AbortSignal,
  ): Promise<PaymentPolicyView>;
  /**
   * Live text deltas of turns this replica runs for the conversation (other replicas'
   * turns send none: deltas are not committed). Returns the unsubscribe function.
   */
  onTextDelta(conversationId: string, listener: (delta: TextDeltaEvent) => void): () => void;
}
