/**
 * Answers to a paused turn (docs/turns.md "Approvals and questions"): approval answers,
 * question answers and an admin's cancel. Pure.
 */
import { approvalArgsSha256 } from '../../common/approval-bytes';
import { AppError } from '../../common/errors';
import { EventKind } from '../../common/event-kinds';
import { ApprovalDecision as ProtoDecision } from '../../proto/gen/polychrome/events/v1/events';
import type { Conversation } from '../api/v1alpha1/conversation-types';
import { nextHistoryFrom, type DeploymentHistory } from './history-window';
import { pendingRequest, turnState, type PendingRequest } from './turn-state';
import { type JournalView, type TurnView } from './journal-view-types';
import {
  authorizeApproval,
  authorizeCancel,
  authorizeQuestionAnswer,
  isRequester,
  selfApprovalError,
} from './plan-access';
import {
  attributionOf,
  dispatchEvent,
  planned,
  refuse,
  approvalSignatureFields,
  type ApprovalSignature,
  type ApprovalToSign,
  type ClaimedLease,
  type PlannedEvent,
  type Refusal,
} from './plan-common';
import { dueExpiry, durationText, type ApprovalDeadline } from './plan-expiry';
import type { Caller } from './turn-service';

export interface AnswerInput {
  readonly view: JournalView;
  readonly conversation: Conversation;
  readonly caller: Caller;
  readonly requestId: string;
  readonly lease: ClaimedLease;
  readonly nowMs: number;
}

/** The uid of the conversation answered ('' when the object has none: no grant matches it). */
function conversationIdOf(input: AnswerInput): string {
  return input.conversation.metadata?.uid ?? '';
}

/** The dispatch that goes on with `turn` after the answer, in the answer's batch. */
function nextDispatch(input: AnswerInput & DeploymentHistory, turn: TurnView): PlannedEvent {
  const { view, conversation, deploymentHistoryTokens } = input;
  return dispatchEvent(
    turn,
    input.lease,
    attributionOf(input.caller, conversation),
    input.nowMs,
    nextHistoryFrom(view, conversation, turn.messagePosition, deploymentHistoryTokens),
  );
}

/** The pending request an answer is for, or why there is none to answer. */
function pendingFor(
  view: JournalView,
  requestId: string,
  type: PendingRequest['type'],
): Refusal | { readonly turn: TurnView; readonly pending: PendingRequest } {
  const asks = (t: TurnView): boolean =>
    (type === 'approval' ? t.approvalRequests : t.questionRequests).some(
      (r) => r.request.requestId === requestId,
    );
  // A pending request is on an open turn; every turn is read only to say why an answer
  // to anything else is refused.
  const turn = view.openTurns.find(asks) ?? view.turns.find(asks);
  if (turn === undefined) {
    return refuse(
      new AppError('not_found', `no ${type} ${requestId} in this conversation`, {
        details: { requestId },
      }),
    );
  }
  const pending = pendingRequest(turn);
  if (pending?.type !== type || pending.request.requestId !== requestId) {
    return refuse(notPending(turn, type, requestId));
  }
  return { turn, pending };
}

/** Why a request is not waiting for an answer: expired, cancelled or answered. */
function notPending(turn: TurnView, type: PendingRequest['type'], requestId: string): AppError {
  const details = { turnId: turn.turnId, requestId };
  const expired = turn.expiries.find((e) => e.response.requestId === requestId)?.response;
  if (expired !== undefined) return expiredError(expired, details);
  const cancelled = turn.cancellations.find((c) => c.response.requestId === requestId)?.response;
  if (cancelled !== undefined) {
    return new AppError(
      'conflict',
      `${type} ${requestId} was cancelled by ${cancelled.cancelledBy} at ${isoTime(cancelled.cancelledAtMs)}; it can no longer be answered`,
      { details: { ...details, reason: 'cancelled' } },
    );
  }
  return new AppError(
    'conflict',
    `${type} ${requestId} is not waiting for an answer (turn ${turn.turnId} is ${turnState(turn)}); it was answered already`,
    { details },
  );
}

function expiredError(
  expired: { readonly requestId: string; readonly expiredAtMs: number; readonly ttlMs: number },
  details: { readonly turnId: string; readonly requestId: string },
): AppError {
  return new AppError(
    'conflict',
    `approval ${expired.requestId} expired at ${isoTime(expired.expiredAtMs)}, unanswered ${durationText(expired.ttlMs)} after it was requested; it counted as denied and can no longer be answered`,
    { details: { ...details, reason: 'expired' } },
  );
}

function isoTime(ms: number): string {
  return new Date(ms).toISOString();
}

export type ApprovalPlan =
  | Refusal
  | {
      readonly kind: 'answer';
      readonly turn: TurnView;
      /** The shell signs this and builds the batch with {@link approvalAnswerBatch}. */
      readonly sign: ApprovalToSign;
      /** The requester approves their own call (allowed by the setting); recorded as such. */
      readonly selfApproval: boolean;
    }
  /**
   * The answer came too late: the shell commits the expiry first (see plan-expiry.ts),
   * runs the turn on as on a denial, then answers with `error` (a 409 saying so).
   */
  | { readonly kind: 'expire'; readonly due: ApprovalDeadline; readonly error: AppError };

/**
 * Whether and how `caller` answers approval `requestId` with `decision`. An answer that
 * arrives when the approval's time to live has run out expires it instead.
 */
export function planApprovalAnswer(
  input: AnswerInput & {
    readonly decision: 'approve' | 'deny';
    readonly approvalTtlMs: number;
    /** `POLYCHROME_ALLOW_SELF_APPROVAL`: the requester may approve (recorded as such). */
    readonly allowSelfApproval: boolean;
  },
): ApprovalPlan {
  const found = pendingFor(input.view, input.requestId, 'approval');
  if ('kind' in found) return found;
  const { turn, pending } = found;
  if (pending.type !== 'approval') throw new Error('unreachable: pendingFor checked the type');
  const asked = pending.request;
  const denied = authorizeApproval(input.caller, turn, asked, conversationIdOf(input));
  if (denied !== undefined) return denied;
  const selfApproval = input.decision === 'approve' && isRequester(input.caller, turn);
  if (selfApproval && !input.allowSelfApproval)
    return refuse(selfApprovalError(input.caller, turn, asked));
  const due = dueExpiry(input.view, input.nowMs, input.approvalTtlMs);
  if (due?.request.requestId === asked.requestId) {
    const error = expiredError(
      { requestId: asked.requestId, expiredAtMs: input.nowMs, ttlMs: input.approvalTtlMs },
      { turnId: turn.turnId, requestId: asked.requestId },
    );
    return { kind: 'expire', due, error };
  }
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
    selfApproval,
  };
}

/** The `approval_response` and the next dispatch, committed in one batch. */
export function approvalAnswerBatch(
  input: AnswerInput &
    DeploymentHistory & { readonly comment?: string; readonly selfApproval?: boolean },
  turn: TurnView,
  signed: ApprovalToSign,
  signature: ApprovalSignature,
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
      ...approvalSignatureFields(signature),
      answeredAtMs: input.nowMs,
      comment: input.comment ?? '',
      selfApproval: input.selfApproval ?? false,
    }),
    nextDispatch(input, turn),
  ];
}

export type QuestionPlan =
  | Refusal
  | { readonly kind: 'answer'; readonly turn: TurnView; readonly events: readonly PlannedEvent[] };

/**
 * Whether `caller` answers question `requestId`: anyone who may use the conversation
 * (checked before the claim); the answer and the next dispatch go in one batch.
 */
export function planQuestionAnswer(
  input: AnswerInput & DeploymentHistory & { readonly answer: string },
): QuestionPlan {
  const found = pendingFor(input.view, input.requestId, 'question');
  if ('kind' in found) return found;
  const denied = authorizeQuestionAnswer(input.caller, input.requestId, conversationIdOf(input));
  if (denied !== undefined) return denied;
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
      nextDispatch(input, turn),
    ],
  };
}

export type CancelPlan =
  | Refusal
  | { readonly kind: 'cancel'; readonly turn: TurnView; readonly events: readonly PlannedEvent[] };

/**
 * An admin cancels the pending approval or question `requestId` (docs/turns.md,
 * "Cancel"). The control plane settles the turn itself: `request_cancelled` (who, when,
 * the comment) and a `turn_complete` whose reply says so, in one batch. The harness is not
 * called again, so a gated call never runs. Only an admin may cancel, whoever the required
 * approver is: an admin can always unwedge a conversation.
 */
export function planCancel(
  input: AnswerInput & { readonly type: PendingRequest['type']; readonly comment?: string },
): CancelPlan {
  const found = pendingFor(input.view, input.requestId, input.type);
  if ('kind' in found) return found;
  const denied = authorizeCancel(
    input.caller,
    input.type,
    input.requestId,
    conversationIdOf(input),
  );
  if (denied !== undefined) return denied;
  const { turn, pending } = found;
  const who = input.caller.identity;
  const comment = input.comment ?? '';
  const what =
    pending.type === 'approval'
      ? `The approval ${pending.request.requestId} for ${pending.request.toolName} was cancelled by ${who}; the call did not run.`
      : `The question ${pending.request.requestId} was cancelled by ${who}.`;
  return {
    kind: 'cancel',
    turn,
    events: [
      planned(EventKind.RequestCancelled, {
        turnId: turn.turnId,
        requestId: input.requestId,
        cancelledBy: who,
        cancelledAtMs: input.nowMs,
        comment,
        session: input.caller.sessionId,
      }),
      planned(EventKind.TurnComplete, {
        turnId: turn.turnId,
        text: comment === '' ? what : `${what} Comment: ${comment}`,
        steps: turn.steps.filter((s) => s.kind === 'model_call').length,
        completedAtMs: input.nowMs,
        fallback: false,
      }),
    ],
  };
}
