import { sha256 } from '@noble/hashes/sha2.js';

/**
 * Ids the turn loop derives. They are functions of the turn and the tool call only, so a
 * resumed or retried turn asks for the same approval and finds the same answer, and an
 * answer for one call can never name another. The control plane derives them too, to check
 * the requests a harness sends before it commits them.
 */
export interface RequestIds {
  approvalRequestId(turnId: string, toolCallId: string): string;
  questionRequestId(turnId: string, toolCallId: string): string;
  /** The approval of the payment a tool call met (docs/payments.md, "A paid call in a turn"). */
  paymentApprovalRequestId(turnId: string, toolCallId: string): string;
}

const encoder = new TextEncoder();

function derive(prefix: string, domain: string, turnId: string, toolCallId: string): string {
  // NUL separators: ids are printable, so `ab`+`c` and `a`+`bc` cannot collide.
  const digest = sha256(encoder.encode(`${domain}\u0000${turnId}\u0000${toolCallId}`));
  return prefix + Buffer.from(digest.subarray(0, 16)).toString('hex');
}

/** The derivation docs/approvals.md specifies ("Request id"). */
export const requestIds: RequestIds = {
  approvalRequestId: (turnId, toolCallId) =>
    derive('apr_', 'polychrome/approval-request/v1', turnId, toolCallId),
  questionRequestId: (turnId, toolCallId) =>
    derive('q_', 'polychrome/question-request/v1', turnId, toolCallId),
  // Another domain than the call's own approval: a call that needed approval to run and
  // then met a 402 waits for two answers, and neither can stand for the other.
  paymentApprovalRequestId: (turnId, toolCallId) =>
    derive('apr_', 'polychrome/payment-approval-request/v1', turnId, toolCallId),
};
