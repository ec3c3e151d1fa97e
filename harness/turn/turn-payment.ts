import { approvalArgsSha256 } from '../../common/approval-bytes';
import {
  PAYMENT_APPROVAL_TOOL,
  paymentApprovalArgsJson,
  paymentApprovalReason,
  type ChargeFacts,
} from '../../common/payment-approval';
import type { ApprovalAnswer, ApprovalRequestRecord } from './turn-records';

/**
 * A paid call in a turn (docs/payments.md, "A paid call in a turn"), the parts of the rule
 * that need no machine state. The machine (turn-machine.ts) moves a call from `running`
 * through `charging` (its 402 sent to the control plane), `awaiting_approval` with the
 * charge, and `settling` (the control plane pays) to `done`; a charge the control plane
 * refuses, or a person denies, ends the call with a result that says so and nothing is paid.
 */

/** The approval request a charge waits for; the control plane commits only exactly this. */
export function paymentApprovalRequest(
  charge: ChargeFacts,
  toolName: string,
  requiredApprover: string,
): ApprovalRequestRecord {
  const argsJson = paymentApprovalArgsJson(charge);
  return {
    turnId: charge.turnId,
    requestId: charge.approvalRequestId,
    toolCallId: charge.toolCallId,
    toolName: PAYMENT_APPROVAL_TOOL,
    argsJson,
    argsSha256: approvalArgsSha256(argsJson),
    reason: paymentApprovalReason(charge, toolName),
    requiredApprover,
  };
}

/** Why a charge the control plane sent cannot be the one of this call, or undefined. */
export function chargeMismatch(
  charge: ChargeFacts,
  expected: { readonly turnId: string; readonly toolCallId: string; readonly requestId: string },
): string | undefined {
  if (charge.turnId !== expected.turnId || charge.toolCallId !== expected.toolCallId) {
    return `the charge is for tool call ${charge.toolCallId} of turn ${charge.turnId}`;
  }
  if (charge.approvalRequestId !== expected.requestId) {
    return `the charge waits for approval ${charge.approvalRequestId}, not ${expected.requestId}`;
  }
  return undefined;
}

/** The tool's result when a person denied its payment. */
export function paymentDeniedResult(toolName: string, answer: ApprovalAnswer): string {
  const note = answer.comment === '' ? '' : ` Their note: ${answer.comment}`;
  return `The payment ${toolName} asked for was denied by ${answer.answeredBy || 'an approver'}; nothing was paid and the call has no result.${note} Do not retry it for the same resource; continue without it or tell the user.`;
}

/** The tool's result when the control plane would not ask for the charge. */
export function chargeRefusedResult(toolName: string, refusal: string): string {
  return `${toolName} needs a payment that was not asked for: ${refusal}. Nothing was paid.`;
}

/** The tool's result when the control plane did not answer whether it took the charge. */
export function chargeUnansweredResult(toolName: string, reason: string): string {
  return `${toolName} needs a payment, and the control plane did not answer: ${reason}. Nothing was paid.`;
}
