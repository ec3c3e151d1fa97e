import type { ApprovalDecision as DomainApprovalDecision } from '../../common/approval-bytes';
import {
  ApprovalDecision,
  type ApprovalRequest,
  type ApprovalResponse,
  type Handoff,
  type QuestionRequest,
  type QuestionResponse,
} from '../../proto/gen/polychrome/events/v1/events';
import { invalidField, plainBytes, wireBytes } from './proto-fields';
import type {
  ApprovalAnswer,
  ApprovalRequestRecord,
  HandoffRecord,
  QuestionAnswer,
  QuestionRequestRecord,
} from './turn-records';

/**
 * What a turn pauses on or ends with besides its steps (approval and question requests,
 * their answers, a handoff) between their events.v1 messages and the turn loop's records:
 * one `toProto`/`fromProto` pair per message (STYLE.md §1). The harness server sends and
 * receives them with these; replay and what-if read them back from the journal.
 */

/** Domain approval decision to proto. */
export function approvalDecisionToProto(decision: DomainApprovalDecision): ApprovalDecision {
  return decision === 'approved'
    ? ApprovalDecision.APPROVAL_DECISION_APPROVED
    : ApprovalDecision.APPROVAL_DECISION_DENIED;
}

/**
 * Proto approval decision to domain.
 *
 * @throws AppError `invalid_argument` for UNSPECIFIED or an unknown value.
 */
export function approvalDecisionFromProto(
  decision: ApprovalDecision,
  field: string,
): DomainApprovalDecision {
  switch (decision) {
    case ApprovalDecision.APPROVAL_DECISION_APPROVED:
      return 'approved';
    case ApprovalDecision.APPROVAL_DECISION_DENIED:
      return 'denied';
    default:
      throw invalidField(field, 'decision must be APPROVED or DENIED');
  }
}

/** An approval request record to proto. */
export function approvalRequestToProto(record: ApprovalRequestRecord): ApprovalRequest {
  // The control plane stamps requested_at_ms with its own clock when it commits the request.
  return { ...record, argsSha256: wireBytes(record.argsSha256), requestedAtMs: 0 };
}

/** Proto `ApprovalRequest` to a record. */
export function approvalRequestFromProto(request: ApprovalRequest): ApprovalRequestRecord {
  return {
    turnId: request.turnId,
    requestId: request.requestId,
    toolCallId: request.toolCallId,
    toolName: request.toolName,
    argsJson: request.argsJson,
    argsSha256: plainBytes(request.argsSha256),
    reason: request.reason,
    requiredApprover: request.requiredApprover,
  };
}

/** A signed approval answer to proto `ApprovalResponse`. */
export function approvalAnswerToProto(answer: ApprovalAnswer): ApprovalResponse {
  const { scope, ...rest } = answer;
  return {
    ...rest,
    argsSha256: wireBytes(answer.argsSha256),
    decision: approvalDecisionToProto(answer.decision),
    signature: wireBytes(answer.signature),
    selfApproval: answer.selfApproval ?? false,
    conversation: scope?.conversation ?? '',
    expiresAtMs: scope?.expiresAtMs ?? 0,
    approvalId: scope?.approvalId ?? '',
  };
}

/**
 * Proto `ApprovalResponse` to a signed answer (not verified here: the turn machine verifies
 * it against the pending call).
 *
 * @throws AppError `invalid_argument` when the decision is unspecified.
 */
export function approvalAnswerFromProto(
  response: ApprovalResponse,
  field = 'approval_response',
): ApprovalAnswer {
  return {
    turnId: response.turnId,
    requestId: response.requestId,
    toolName: response.toolName,
    argsSha256: plainBytes(response.argsSha256),
    decision: approvalDecisionFromProto(response.decision, `${field}.decision`),
    answeredBy: response.answeredBy,
    keyId: response.keyId,
    signature: plainBytes(response.signature),
    answeredAtMs: response.answeredAtMs,
    comment: response.comment,
    ...(response.selfApproval ? { selfApproval: true } : {}),
    // An answer with an approval id is v2; without one it is v1 (docs/approvals.md).
    ...(response.approvalId === ''
      ? {}
      : {
          scope: {
            conversation: response.conversation,
            expiresAtMs: response.expiresAtMs,
            approvalId: response.approvalId,
          },
        }),
  };
}

/** A question request record to proto. */
export function questionRequestToProto(record: QuestionRequestRecord): QuestionRequest {
  // The control plane stamps requested_at_ms with its own clock when it commits the request.
  return { ...record, requestedAtMs: 0 };
}

/** Proto `QuestionRequest` to a record. */
export function questionRequestFromProto(request: QuestionRequest): QuestionRequestRecord {
  return {
    turnId: request.turnId,
    requestId: request.requestId,
    toolCallId: request.toolCallId,
    question: request.question,
  };
}

/** A question answer to proto `QuestionResponse`. */
export function questionAnswerToProto(answer: QuestionAnswer): QuestionResponse {
  return { ...answer };
}

/** Proto `QuestionResponse` to an answer. */
export function questionAnswerFromProto(response: QuestionResponse): QuestionAnswer {
  return {
    turnId: response.turnId,
    requestId: response.requestId,
    answer: response.answer,
    answeredBy: response.answeredBy,
    answeredAtMs: response.answeredAtMs,
  };
}

/** A handoff record to proto. */
export function handoffToProto(record: HandoffRecord): Handoff {
  return { ...record };
}

/** Proto `Handoff` to a record. */
export function handoffFromProto(handoff: Handoff): HandoffRecord {
  return {
    turnId: handoff.turnId,
    toolCallId: handoff.toolCallId,
    targetAgent: handoff.targetAgent,
    reason: handoff.reason,
  };
}
