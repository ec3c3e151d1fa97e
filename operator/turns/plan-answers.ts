/**
 * Answers to a paused turn (docs/turns.md "Approvals and questions"): approval answers,
 * question answers and an admin's cancel. Pure.
 */
import { approvalArgsSha256 } from '../../common/approval-bytes';
import { AppError } from '../../common/errors';
import { EventKind } from '../../common/event-kinds';
import { ApprovalDecision as ProtoDecision } from '../../proto/gen/polychrome/events/v1/events';
import type { Conversation } from '../api/v1alpha1';
import {
  pendingRequest,
  turnState,
  type JournalView,
  type PendingRequest,
  type TurnView,
} from './journal-view';
import { authorizeApproval } from './plan-access';
import {
  attributionOf,
  dispatchEvent,
  planned,
  refuse,
  type ClaimedLease,
  type PlannedEvent,
  type Refusal,
} from './plan-common';
import type { Caller } from './turn-service';

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
