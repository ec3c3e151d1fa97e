import { isMcpResource } from '../../common/payment-approval';
import type { PaymentCharge } from '../../proto/gen/polychrome/events/v1/events';
import type { McpPaidResult } from '../../proto/gen/polychrome/harness/v1/harness';
import type { TurnView } from './journal-view-types';
import { chargeOfCall, waitingCallProblem } from './plan-payments';

/**
 * A paid MCP tool's result (docs/payments.md, "A paid MCP tool"). The control plane handed
 * the harness a signed payment for the call's approved charge after committing its
 * `payment_sent`; the harness called the tool with it and relays what the tool answered.
 * Only that call may answer: waiting, its charge an MCP tool's, sent and without a
 * receipt. Anything else is forged and quarantines the turn. The shell (pay-charge.ts
 * `recordMcpPaid`) reads the settlement and commits the receipt.
 */

/** What the control plane does with an `mcp_paid_result`. */
export type McpPaidPlan =
  | { readonly kind: 'forged'; readonly reason: string }
  | { readonly kind: 'record'; readonly charge: PaymentCharge; readonly wallet: string };

/**
 * Plans a relayed paid MCP result against the turn's journal view; `handed` says whether
 * this harness call was handed the call's payment.
 */
export function mcpPaidResultPlan(
  turn: TurnView,
  result: McpPaidResult,
  handed: boolean,
): McpPaidPlan {
  const { toolCallId } = result;
  const forged = (why: string): McpPaidPlan => ({
    kind: 'forged',
    reason: `mcp_paid_result: ${why}`,
  });
  const problem = waitingCallProblem(turn, result.turnId, toolCallId);
  if (problem !== undefined) return forged(problem);
  if (!handed) return forged(`tool call ${toolCallId} was handed no payment in this call`);
  const payment = chargeOfCall(turn, toolCallId);
  if (payment === undefined || !isMcpResource(payment.charge.resourceUrl)) {
    return forged(`tool call ${toolCallId} has no committed charge of an MCP tool`);
  }
  if (payment.sent === undefined) {
    return forged(`the charge of tool call ${toolCallId} was never sent`);
  }
  if (payment.receipt !== undefined) {
    return forged(`the charge of tool call ${toolCallId} already has its receipt`);
  }
  return { kind: 'record', charge: payment.charge, wallet: payment.sent.payload.wallet };
}
