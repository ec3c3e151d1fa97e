/**
 * The decisions of the turn path (docs/turns.md), pure: no I/O, no clock, no ids made
 * here. The coordinator (coordinator.ts) is the shell: it claims the conversation, reads
 * the journal view, asks one of these functions what to do, commits the events it returns
 * and runs the harness. Every rule about who may do what, what goes into a batch and what
 * a harness may have committed on its behalf lives here, so each one is table-tested
 * without a cluster (turn-plan.test.ts).
 *
 * Functions return either a plan or a typed refusal (`{ kind: 'refuse', error }`): a
 * refusal is decided before anything is committed, so nothing changes on refusal.
 */
import { approvalArgsSha256 } from '../../common/approval-bytes';
import { AppError } from '../../common/errors';
import { EventKind, type EventPayloads } from '../../common/event-kinds';
import { Role as CallerRole } from '../../common/persona-roles';
import { requestIds } from '../../common/request-ids';
import {
  ApprovalDecision as ProtoDecision,
  ToolEffect,
  type ApprovalRequest,
  type Attribution,
  type QuestionRequest,
} from '../../proto/gen/polychrome/events/v1/events';
import {
  ToolHost,
  type Step,
  type ToolSpec,
  type TurnResult,
  type TurnStart,
} from '../../proto/gen/polychrome/harness/v1/harness';
import {
  ConversationPhase,
  DEFAULT_MAX_STEPS,
  Visibility,
  type Conversation,
} from '../api/v1alpha1';
import {
  committedHistory,
  nextAttempt,
  oldestOrphan,
  pendingRequest,
  pendingTurn,
  recordedSteps,
  turnState,
  type JournalView,
  type PendingRequest,
  type TurnView,
} from './journal-view';
import { checkRecording, type RecordingFacts } from './recording-check';
import type { Caller, PostMessage } from './turn-service';
import type { TurnStatusChange } from './turn-status';

/** The reply when a turn cannot be settled any other way. */
export const FAILED_TURN_TEXT =
  'Sorry, I could not finish that. Please try again or rephrase your message.';

/** Reserved tools the harness handles itself (harness/turn/reserved-tools.ts). */
export const ASK_USER_TOOL = '__ask_user';
export const HANDOFF_TOOL = '__handoff_to';

/** Persona roles that decide what a caller may do. */
export { Role as CallerRole } from '../../common/persona-roles';

/** One event to commit, before encoding. */
export type PlannedEvent = {
  readonly [K in EventKind]: { readonly kind: K; readonly payload: Partial<EventPayloads[K]> };
}[EventKind];

/** The lease a turn is claimed under (docs/turns.md, "Claim"). */
export interface ClaimedLease {
  readonly holder: string;
  readonly fencingToken: number;
}

/** A decision not to act, made before anything is committed. */
export interface Refusal {
  readonly kind: 'refuse';
  readonly error: AppError;
}

function refuse(error: AppError): Refusal {
  return { kind: 'refuse', error };
}

function planned<K extends EventKind>(kind: K, payload: Partial<EventPayloads[K]>): PlannedEvent {
  return { kind, payload };
}

// ---- who may do what ----

function isAdmin(caller: Caller): boolean {
  return caller.roles.includes(CallerRole.Admin);
}

/**
 * Whether `caller` may use the conversation at all (read it, post, answer its questions):
 * admins always; a Kubernetes caller for the one conversation RBAC allowed; otherwise the
 * caller must hold the owner's identity or, for a shared conversation, a participant's.
 */
export function authorizeUse(
  caller: Caller,
  conversationId: string,
  conversation: Conversation | undefined,
): Refusal | undefined {
  if (conversation === undefined) {
    return refuse(
      new AppError('not_found', `conversation ${conversationId} does not exist`, {
        details: { conversationId },
      }),
    );
  }
  if (isAdmin(caller)) return undefined;
  // The Kubernetes door: RBAC (kube-apiserver, then a SubjectAccessReview) allowed this
  // request on this one conversation; personas do not apply.
  if (caller.kubernetes !== undefined) {
    if (caller.kubernetes.conversationId === conversationId) return undefined;
    return refuse(
      new AppError(
        'permission_denied',
        `${caller.identity} was allowed ${caller.kubernetes.subresource} on another conversation, not ${conversationId}`,
        { details: { conversationId } },
      ),
    );
  }
  const mine = (identity: string | undefined): boolean =>
    identity !== undefined && caller.identities.includes(identity);
  const spec = conversation.spec;
  if (mine(spec.owner)) return undefined;
  if (spec.visibility === Visibility.Shared && (spec.participants ?? []).some(mine)) {
    return undefined;
  }
  return refuse(
    new AppError(
      'permission_denied',
      `${caller.identity} may not use conversation ${conversationId}: it belongs to ${spec.owner ?? 'an admin'}${spec.visibility === Visibility.Shared ? ' and its participants' : ''}`,
      { details: { conversationId } },
    ),
  );
}

/**
 * Whether `caller` may answer the approval `request` of `turn`. The required approver is
 * the request's, else the turn directive's (the plan checks the harness copied the
 * directive's, so the two agree). A named approver must hold that identity and still be an
 * admin (a directive can only name an admin, and roles may have changed since); with none
 * named, any admin. Nobody else, the owner included: an approval is a second pair of eyes.
 */
export function authorizeApproval(
  caller: Caller,
  turn: TurnView,
  request: ApprovalRequest,
): Refusal | undefined {
  const required = request.requiredApprover || (turn.directive?.requiredApprover ?? '');
  if (required !== '' && !caller.identities.includes(required)) {
    return refuse(
      new AppError(
        'permission_denied',
        `approval ${request.requestId} must be answered by ${required}; ${caller.identity} is not that identity`,
        { details: { requestId: request.requestId, requiredApprover: required } },
      ),
    );
  }
  if (!isAdmin(caller)) {
    return refuse(
      new AppError(
        'permission_denied',
        `approval ${request.requestId} must be answered by an admin${required === '' ? '' : ` (${required})`}; ${caller.identity} does not have the admin role`,
        { details: { requestId: request.requestId } },
      ),
    );
  }
  return undefined;
}

// ---- a new message ----

export interface MessageInput {
  readonly view: JournalView;
  readonly conversation: Conversation;
  readonly caller: Caller;
  readonly request: PostMessage;
  /** `turnIdFor(conversation, idempotency key)`. */
  readonly turnId: string;
  readonly lease: ClaimedLease;
  readonly nowMs: number;
  /**
   * Whether the identity the directive names as required approver belongs to an admin
   * persona (the shell asks the records). Unset when the directive names none.
   */
  readonly approverIsAdmin?: boolean;
}

/** What to do next for a posted message; the shell repeats until `reply` or `dispatch`. */
export type MessageStep =
  | Refusal
  /** The turn exists and has settled or paused: answer with it. */
  | { readonly kind: 'reply'; readonly turn: TurnView }
  /** Recover first: dispatch this orphan again (one `turn_dispatched`), run it, then ask again. */
  | { readonly kind: 'recover'; readonly turn: TurnView; readonly events: readonly PlannedEvent[] }
  /** Batch one of a new turn; then run it. */
  | {
      readonly kind: 'dispatch';
      readonly turnId: string;
      readonly events: readonly PlannedEvent[];
    };

/**
 * The next step for a posted message (docs/turns.md "One message", 3 and 4), in order:
 * refuse a directive the caller may not send; an existing turn id is an exact retry (other
 * text: conflict) and gets that turn, after recovering the orphans before it; otherwise
 * orphans are recovered first, a paused turn blocks new messages, and batch one opens the
 * new turn at the view's head.
 */
export function planMessage(input: MessageInput): MessageStep {
  const { view, request, turnId } = input;
  const directiveRefusal = checkDirective(input);
  if (directiveRefusal !== undefined) return directiveRefusal;
  const existing = view.turnsById.get(turnId);
  if (existing !== undefined && existing.text !== request.text) {
    return refuse(
      new AppError(
        'conflict',
        `idempotency key ${existing.idempotencyKey} was used for another message (turn ${existing.turnId}); use a new key for a new message`,
        { details: { turnId: existing.turnId } },
      ),
    );
  }
  if (existing !== undefined && turnState(existing) !== 'orphan') {
    return { kind: 'reply', turn: existing };
  }
  const orphan = oldestOrphan(view);
  if (orphan !== undefined) {
    return {
      kind: 'recover',
      turn: orphan,
      events: [dispatchEvent(orphan, input.lease, orphan.attribution, input.nowMs)],
    };
  }
  if (existing !== undefined) return { kind: 'reply', turn: existing };
  const pending = pendingTurn(view);
  if (pending !== undefined) {
    const state = turnState(pending);
    return refuse(
      new AppError(
        'conflict',
        `turn ${pending.turnId} waits for ${state === 'awaiting_approval' ? 'an approval' : 'an answer'}; answer it before sending a new message`,
        { details: { turnId: pending.turnId, conversationId: request.conversationId } },
      ),
    );
  }
  return { kind: 'dispatch', turnId, events: batchOne(input) };
}

/**
 * Directives only narrow policy, and only edges send them (docs/api.md "Directives"): a
 * caller without the edge role gets 403; a required approver must be an admin's identity,
 * so nobody can make themselves, or someone who does not exist, the approver.
 */
function checkDirective(input: MessageInput): Refusal | undefined {
  const directive = input.request.directive;
  if (directive === undefined) return undefined;
  if (directive.maxSteps === undefined && directive.requiredApprover === undefined) {
    return undefined;
  }
  const { caller } = input;
  if (!caller.roles.includes(CallerRole.Edge)) {
    return refuse(
      new AppError(
        'permission_denied',
        `${caller.identity} may not send a directive: only a caller with the edge role may; send the message without "directive"`,
        { details: { field: 'directive' } },
      ),
    );
  }
  const approver = directive.requiredApprover;
  if (approver !== undefined && input.approverIsAdmin !== true) {
    return refuse(
      new AppError(
        'permission_denied',
        `directive.requiredApprover ${approver} is not an admin's identity: a directive may only name an approver who could approve anyway (an admin); name an admin or leave it out`,
        { details: { field: 'directive.requiredApprover' } },
      ),
    );
  }
  return undefined;
}

/** Who is acting and who takes part, recorded with every batch. */
export function attributionOf(caller: Caller, conversation: Conversation): Attribution {
  const participants = new Set<string>();
  if (conversation.spec.owner !== undefined) participants.add(conversation.spec.owner);
  for (const p of conversation.spec.participants ?? []) participants.add(p);
  return {
    caller: caller.identity,
    participants: [...participants].sort(),
    persona: caller.personaId,
  };
}

function batchOne(input: MessageInput): PlannedEvent[] {
  const { request, turnId, nowMs, conversation } = input;
  const attribution = attributionOf(input.caller, conversation);
  const events: PlannedEvent[] = [
    planned(EventKind.MessageReceived, {
      turnId,
      idempotencyKey: request.idempotencyKey,
      text: request.text,
      attribution,
      receivedAtMs: nowMs,
    }),
  ];
  const directive = request.directive;
  if (
    directive !== undefined &&
    (directive.maxSteps !== undefined || directive.requiredApprover !== undefined)
  ) {
    events.push(
      planned(EventKind.IngressDirective, {
        turnId,
        maxSteps: directive.maxSteps ?? 0,
        requiredApprover: directive.requiredApprover ?? '',
      }),
    );
  }
  if (conversation.status?.phase === ConversationPhase.Closed) {
    events.push(planned(EventKind.ConversationReopened, { reopenedAtMs: nowMs, attribution }));
  }
  events.push(
    planned(EventKind.TurnDispatched, {
      turnId,
      attempt: 1,
      leaseHolder: input.lease.holder,
      fencingToken: input.lease.fencingToken,
      attribution,
      dispatchedAtMs: nowMs,
      messagePosition: input.view.head,
    }),
  );
  return events;
}

/** The next `turn_dispatched` of an existing turn: attempt + 1, the original message. */
export function dispatchEvent(
  turn: TurnView,
  lease: ClaimedLease,
  attribution: Attribution | undefined,
  nowMs: number,
): PlannedEvent {
  return planned(EventKind.TurnDispatched, {
    turnId: turn.turnId,
    attempt: nextAttempt(turn),
    leaseHolder: lease.holder,
    fencingToken: lease.fencingToken,
    ...(attribution === undefined ? {} : { attribution }),
    dispatchedAtMs: nowMs,
    messagePosition: turn.messagePosition,
  });
}

// ---- answers ----

export interface AnswerInput {
  readonly view: JournalView;
  readonly conversation: Conversation;
  readonly caller: Caller;
  readonly requestId: string;
  readonly lease: ClaimedLease;
  readonly nowMs: number;
}

/** The pending request an answer is for, or why there is none to answer. */
function pendingFor(
  view: JournalView,
  requestId: string,
  type: PendingRequest['type'],
): Refusal | { readonly turn: TurnView; readonly pending: PendingRequest } {
  const turn = view.turns.find((t) =>
    (type === 'approval' ? t.approvalRequests : t.questionRequests).some(
      (r) => r.request.requestId === requestId,
    ),
  );
  if (turn === undefined) {
    return refuse(
      new AppError('not_found', `no ${type} ${requestId} in this conversation`, {
        details: { requestId },
      }),
    );
  }
  const pending = pendingRequest(turn);
  if (pending?.type !== type || pending.request.requestId !== requestId) {
    return refuse(
      new AppError(
        'conflict',
        `${type} ${requestId} is not waiting for an answer (turn ${turn.turnId} is ${turnState(turn)}); it was answered already`,
        { details: { turnId: turn.turnId, requestId } },
      ),
    );
  }
  return { turn, pending };
}

/** What the approval signer signs (docs/approvals.md, "Signed message"). */
export interface ApprovalToSign {
  readonly requestId: string;
  readonly toolName: string;
  readonly argsSha256: Uint8Array;
  readonly decision: 'approved' | 'denied';
  readonly turnId: string;
}

export type ApprovalPlan =
  | Refusal
  | {
      readonly kind: 'answer';
      readonly turn: TurnView;
      /** The shell signs this and builds the batch with {@link approvalAnswerBatch}. */
      readonly sign: ApprovalToSign;
    };

/** Whether and how `caller` answers approval `requestId` with `decision`. */
export function planApprovalAnswer(
  input: AnswerInput & { readonly decision: 'approve' | 'deny' },
): ApprovalPlan {
  const found = pendingFor(input.view, input.requestId, 'approval');
  if ('kind' in found) return found;
  const { turn, pending } = found;
  if (pending.type !== 'approval') throw new Error('unreachable: pendingFor checked the type');
  const asked = pending.request;
  const denied = authorizeApproval(input.caller, turn, asked);
  if (denied !== undefined) return denied;
  return {
    kind: 'answer',
    turn,
    sign: {
      requestId: asked.requestId,
      toolName: asked.toolName,
      argsSha256: approvalArgsSha256(asked.argsJson),
      decision: input.decision === 'approve' ? 'approved' : 'denied',
      turnId: turn.turnId,
    },
  };
}

/** The `approval_response` and the next dispatch, committed in one batch. */
export function approvalAnswerBatch(
  input: AnswerInput & { readonly comment?: string },
  turn: TurnView,
  signed: ApprovalToSign,
  signature: { readonly keyId: string; readonly signature: Uint8Array },
): PlannedEvent[] {
  return [
    planned(EventKind.ApprovalResponse, {
      turnId: turn.turnId,
      requestId: signed.requestId,
      toolName: signed.toolName,
      argsSha256: Buffer.from(signed.argsSha256),
      decision:
        signed.decision === 'approved'
          ? ProtoDecision.APPROVAL_DECISION_APPROVED
          : ProtoDecision.APPROVAL_DECISION_DENIED,
      answeredBy: input.caller.identity,
      keyId: signature.keyId,
      signature: Buffer.from(signature.signature),
      answeredAtMs: input.nowMs,
      comment: input.comment ?? '',
    }),
    dispatchEvent(turn, input.lease, attributionOf(input.caller, input.conversation), input.nowMs),
  ];
}

export type QuestionPlan =
  | Refusal
  | { readonly kind: 'answer'; readonly turn: TurnView; readonly events: readonly PlannedEvent[] };

/**
 * Whether `caller` answers question `requestId`: anyone who may use the conversation
 * (checked before the claim); the answer and the next dispatch go in one batch.
 */
export function planQuestionAnswer(input: AnswerInput & { readonly answer: string }): QuestionPlan {
  const found = pendingFor(input.view, input.requestId, 'question');
  if ('kind' in found) return found;
  const { turn } = found;
  return {
    kind: 'answer',
    turn,
    events: [
      planned(EventKind.QuestionResponse, {
        turnId: turn.turnId,
        requestId: input.requestId,
        answer: input.answer,
        answeredBy: input.caller.identity,
        answeredAtMs: input.nowMs,
      }),
      dispatchEvent(
        turn,
        input.lease,
        attributionOf(input.caller, input.conversation),
        input.nowMs,
      ),
    ],
  };
}

// ---- the harness call ----

/**
 * What the harness is given for a dispatched turn: the committed history (complete turns
 * only), the recorded steps and answers of earlier attempts, the step budget and the tools.
 * Built-in and reserved tools go by reference (the harness holds their definitions): the
 * agent may always ask the user; it may hand off only where targets are set.
 */
export function turnStartOf(
  conversation: Conversation,
  view: JournalView,
  turn: TurnView,
  attempt: number,
  deploymentMaxSteps: number,
): TurnStart {
  const spec = conversation.spec;
  const rules = new Set(spec.tools?.requireApproval ?? []);
  const names = [
    ...(spec.tools?.builtin ?? []),
    ASK_USER_TOOL,
    ...((spec.agent?.handoffTargets ?? []).length > 0 ? [HANDOFF_TOOL] : []),
  ];
  const tools: ToolSpec[] = names.map((name) => ({
    name,
    description: '',
    inputSchemaJson: '',
    effect: 0,
    needsApproval: rules.has(name),
    approvalReason: '',
    host: ToolHost.TOOL_HOST_HARNESS,
  }));
  return {
    conversationId: conversation.metadata.uid ?? '',
    turnId: turn.turnId,
    attempt,
    agent: { model: spec.agent?.model ?? '', systemPrompt: spec.agent?.systemPrompt ?? '' },
    history: committedHistory(view, turn.turnId),
    userMessage: turn.text,
    budget: {
      deploymentMaxSteps,
      conversationMaxSteps: spec.agent?.maxSteps ?? DEFAULT_MAX_STEPS,
      directiveMaxSteps: turn.directive?.maxSteps ?? 0,
    },
    tools,
    approvalAnswers: turn.approvalResponses.map((r) => r.response),
    questionAnswers: turn.questionResponses.map((r) => r.response),
    recordedSteps: recordedSteps(turn),
    requiredApprover: turn.directive?.requiredApprover ?? '',
    recordedConfigSha256: Buffer.from(view.newestAgentConfig?.sha256 ?? '', 'hex'),
  };
}

// ---- what the harness sends ----

/** The control plane's facts about a dispatched turn that the harness must agree with. */
export interface DispatchedTurn extends RecordingFacts {
  readonly turn: TurnView;
  readonly conversation: Conversation;
}

/**
 * Why a step the harness asks to commit is not what this turn can have produced, or
 * `undefined` when it is acceptable. The harness is less trusted than the control plane:
 * ids, tool names, argument digests and approvals it names are checked against the
 * dispatched turn and its recorded answers before anything is committed.
 */
export function checkStep(dispatched: DispatchedTurn, step: Step): string | undefined {
  const { turn, conversation } = dispatched;
  const content = step.step;
  if (content === undefined) return `step ${step.sequence} has no content`;
  const unrecorded = checkRecording(dispatched, step);
  if (unrecorded !== undefined) return unrecorded;
  const turnId = content.value.turnId;
  if (turnId !== turn.turnId) {
    return `a ${stepKind(content.$case)} step names turn ${turnId || '(none)'}, but turn ${turn.turnId} was dispatched`;
  }
  switch (content.$case) {
    case 'modelCall':
    case 'agentConfig':
      return undefined;
    case 'toolCall': {
      const call = content.value;
      if (call.approvalRequestId === '') {
        const gated = conversation.spec.tools?.requireApproval ?? [];
        return gated.includes(call.toolName)
          ? `tool_call ${call.toolCallId} runs ${call.toolName}, which needs approval, without one`
          : undefined;
      }
      const expected = requestIds.approvalRequestId(turn.turnId, call.toolCallId);
      if (call.approvalRequestId !== expected) {
        return `tool_call ${call.toolCallId} names approval ${call.approvalRequestId}, but its approval id is ${expected}`;
      }
      const digest = hex(approvalArgsSha256(call.argsJson));
      const approved = turn.approvalResponses.some(
        ({ response }) =>
          response.requestId === call.approvalRequestId &&
          response.decision === ProtoDecision.APPROVAL_DECISION_APPROVED &&
          response.toolName === call.toolName &&
          hex(response.argsSha256) === digest,
      );
      return approved
        ? undefined
        : `tool_call ${call.toolCallId} claims approval ${call.approvalRequestId} for ${call.toolName} with these arguments, but no such approval was given`;
    }
    case 'toolResult': {
      const result = content.value;
      if (!result.denied) return undefined;
      const deniedCall = turn.approvalRequests.some(
        ({ request }) =>
          request.toolCallId === result.toolCallId &&
          turn.approvalResponses.some(
            ({ response }) =>
              response.requestId === request.requestId &&
              response.decision === ProtoDecision.APPROVAL_DECISION_DENIED,
          ),
      );
      return deniedCall
        ? undefined
        : `tool_result ${result.toolCallId} says it was denied, but no denial was given for it`;
    }
  }
}

function stepKind(kind: NonNullable<Step['step']>['$case']): string {
  return kind.replace(/[A-Z]/g, (letter) => `_${letter.toLowerCase()}`);
}

/** Why an approval request the harness paused with is not this turn's to make. */
export function checkApprovalRequest(
  dispatched: DispatchedTurn,
  request: ApprovalRequest,
): string | undefined {
  const { turn } = dispatched;
  if (request.turnId !== turn.turnId) {
    return `approval_request ${request.requestId} names turn ${request.turnId || '(none)'}, but turn ${turn.turnId} was dispatched`;
  }
  const expected = requestIds.approvalRequestId(turn.turnId, request.toolCallId);
  if (request.requestId !== expected) {
    return `approval_request ${request.requestId} for tool call ${request.toolCallId} should have id ${expected}`;
  }
  if (hex(request.argsSha256) !== hex(approvalArgsSha256(request.argsJson))) {
    return `approval_request ${request.requestId}: args_sha256 is not the SHA-256 of its args_json`;
  }
  try {
    JSON.parse(request.argsJson);
  } catch {
    return `approval_request ${request.requestId}: args_json is not JSON`;
  }
  const approver = turn.directive?.requiredApprover ?? '';
  if (request.requiredApprover !== approver) {
    return `approval_request ${request.requestId} names required approver ${request.requiredApprover || '(none)'}, but the turn's directive names ${approver || 'none'}`;
  }
  return undefined;
}

function checkQuestionRequest(
  dispatched: DispatchedTurn,
  request: QuestionRequest,
): string | undefined {
  const { turn } = dispatched;
  if (request.turnId !== turn.turnId) {
    return `question_request ${request.requestId} names turn ${request.turnId || '(none)'}, but turn ${turn.turnId} was dispatched`;
  }
  const expected = requestIds.questionRequestId(turn.turnId, request.toolCallId);
  return request.requestId === expected
    ? undefined
    : `question_request ${request.requestId} for tool call ${request.toolCallId} should have id ${expected}`;
}

// ---- batch two ----

/** How the harness call ended, as the shell saw it. */
export type HarnessEnd =
  | {
      readonly kind: 'paused';
      readonly request:
        | { readonly $case: 'approvalRequest'; readonly value: ApprovalRequest }
        | { readonly $case: 'questionRequest'; readonly value: QuestionRequest }
        | undefined;
    }
  | { readonly kind: 'result'; readonly result: TurnResult; readonly carried: readonly Step[] }
  /** The call failed (unreachable, died, cancelled); `error` says how. */
  | { readonly kind: 'failed'; readonly error: unknown; readonly retryable: boolean }
  /** A step or request the harness sent was refused as forged (see {@link checkStep}). */
  | { readonly kind: 'forged'; readonly reason: string; readonly toolCallId: string };

export interface SettleInput {
  readonly dispatched: DispatchedTurn;
  readonly end: HarnessEnd;
  readonly attempt: number;
  readonly maxAttempts: number;
  readonly nowMs: number;
}

export type SettlePlan =
  /** The turn stays an orphan, recovered on the next claim; `message` says why. */
  | { readonly kind: 'orphan'; readonly message: string }
  | {
      readonly kind: 'commit';
      readonly events: readonly PlannedEvent[];
      readonly status: TurnStatusChange;
    };

/**
 * Batch two for how the harness ended (docs/turns.md "One message", 7): the carried reply
 * and `turn_complete`, a pause, a handoff, or `turn_ambiguous`; a retryable failure before
 * the last attempt leaves an orphan; anything else settles with the fallback, or as
 * ambiguous when a side effect is in doubt. What the harness says is checked first: a
 * forged request or outcome quarantines the turn with the reason, and none of it is
 * committed.
 */
export function planSettle(input: SettleInput): SettlePlan {
  const { dispatched, end } = input;
  const turnId = dispatched.turn.turnId;
  const lastAttempt = input.attempt >= input.maxAttempts;
  switch (end.kind) {
    case 'forged':
      return quarantine(turnId, end.toolCallId, forgedReason(end.reason), input.nowMs);
    case 'failed':
      if (!lastAttempt || !end.retryable) {
        return { kind: 'orphan', message: describe(end.error) };
      }
      return settleFailed(dispatched.turn, describe(end.error), input.nowMs);
    case 'paused': {
      const request = end.request;
      if (request?.$case === 'approvalRequest') {
        const forged = checkApprovalRequest(dispatched, request.value);
        if (forged !== undefined) {
          return quarantine(turnId, request.value.toolCallId, forgedReason(forged), input.nowMs);
        }
        return {
          kind: 'commit',
          events: [planned(EventKind.ApprovalRequest, request.value)],
          status: { kind: 'awaiting_approval', turnId, requestId: request.value.requestId },
        };
      }
      if (request?.$case === 'questionRequest') {
        const forged = checkQuestionRequest(dispatched, request.value);
        if (forged !== undefined) {
          return quarantine(turnId, request.value.toolCallId, forgedReason(forged), input.nowMs);
        }
        return {
          kind: 'commit',
          events: [planned(EventKind.QuestionRequest, request.value)],
          status: { kind: 'awaiting_answer', turnId, requestId: request.value.requestId },
        };
      }
      return quarantine(turnId, '', forgedReason('it paused without a request'), input.nowMs);
    }
    case 'result':
      return settleResult(input, end.result, end.carried);
  }
}

function settleResult(
  input: SettleInput,
  result: TurnResult,
  carried: readonly Step[],
): SettlePlan {
  const { dispatched } = input;
  const turnId = dispatched.turn.turnId;
  const outcome = result.outcome;
  const named =
    outcome?.$case === 'complete' || outcome?.$case === 'handoff' || outcome?.$case === 'ambiguous'
      ? outcome.value.turnId
      : turnId;
  if (named !== turnId) {
    return quarantine(
      turnId,
      '',
      forgedReason(
        `its ${outcome?.$case ?? 'result'} names turn ${named || '(none)'}, not ${turnId}`,
      ),
      input.nowMs,
    );
  }
  switch (outcome?.$case) {
    case 'complete': {
      for (const step of carried) {
        const forged = checkStep(dispatched, step);
        if (forged !== undefined) return quarantine(turnId, '', forgedReason(forged), input.nowMs);
      }
      return {
        kind: 'commit',
        events: [...carried.map(stepEventOf), planned(EventKind.TurnComplete, outcome.value)],
        status: { kind: 'settled', turnId },
      };
    }
    case 'handoff': {
      const targets = dispatched.conversation.spec.agent?.handoffTargets ?? [];
      if (!targets.includes(outcome.value.targetAgent)) {
        return quarantine(
          turnId,
          outcome.value.toolCallId,
          forgedReason(
            `it handed off to ${outcome.value.targetAgent || '(none)'}, which is not one of the conversation's handoff targets`,
          ),
          input.nowMs,
        );
      }
      return {
        kind: 'commit',
        events: [planned(EventKind.Handoff, outcome.value)],
        status: { kind: 'settled', turnId },
      };
    }
    case 'ambiguous':
      return {
        kind: 'commit',
        events: [planned(EventKind.TurnAmbiguous, outcome.value)],
        status: {
          kind: 'ambiguous',
          turnId,
          toolCallId: outcome.value.toolCallId,
          reason: outcome.value.reason,
        },
      };
    case 'failed':
      if (outcome.value.retryable && input.attempt < input.maxAttempts) {
        return { kind: 'orphan', message: outcome.value.message };
      }
      return settleFailed(dispatched.turn, outcome.value.message, input.nowMs);
    case 'cancelled':
    case undefined:
      return { kind: 'orphan', message: 'the harness gave up' };
  }
}

function forgedReason(what: string): string {
  return `the harness sent what this turn cannot have produced, so nothing of it was committed: ${what}`;
}

function quarantine(turnId: string, toolCallId: string, reason: string, nowMs: number): SettlePlan {
  return {
    kind: 'commit',
    events: [planned(EventKind.TurnAmbiguous, { turnId, toolCallId, reason, detectedAtMs: nowMs })],
    status: { kind: 'ambiguous', turnId, toolCallId, reason },
  };
}

/**
 * A turn that cannot finish: `turn_ambiguous` if its last committed step is a
 * side-effecting call (did it run?), else `turn_complete` with the fixed fallback.
 */
export function settleFailed(turn: TurnView, why: string, nowMs: number): SettlePlan {
  const steps = recordedSteps(turn);
  const last = steps.at(-1)?.step;
  if (last?.$case === 'toolCall' && last.value.effect === ToolEffect.TOOL_EFFECT_SIDE_EFFECT) {
    return quarantine(
      turn.turnId,
      last.value.toolCallId,
      `the turn could not be resumed after its side-effecting call ${last.value.toolName} was committed (${why})`,
      nowMs,
    );
  }
  return {
    kind: 'commit',
    events: [
      planned(EventKind.TurnComplete, {
        turnId: turn.turnId,
        text: FAILED_TURN_TEXT,
        steps: steps.filter((s) => s.step?.$case === 'modelCall').length,
        completedAtMs: nowMs,
        fallback: true,
      }),
    ],
    status: { kind: 'settled', turnId: turn.turnId },
  };
}

/** The event a harness step is committed as. */
export function stepEventOf(step: Step): PlannedEvent {
  switch (step.step?.$case) {
    case 'modelCall':
      return planned(EventKind.ModelCall, step.step.value);
    case 'toolCall':
      return planned(EventKind.ToolCall, step.step.value);
    case 'toolResult':
      return planned(EventKind.ToolResult, step.step.value);
    case 'agentConfig':
      return planned(EventKind.AgentConfig, step.step.value);
    case undefined:
      throw new AppError(
        'invalid_argument',
        `the harness sent step ${step.sequence} without content`,
      );
  }
}

function describe(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

function hex(bytes: Uint8Array): string {
  return Buffer.from(bytes).toString('hex');
}
