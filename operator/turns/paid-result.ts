import type { OutboundPaymentReceipt } from '../../proto/gen/polychrome/events/v1/events';
import type { TrustedToolResult } from '../../proto/gen/polychrome/harness/v1/harness';

/**
 * What a paid call's tool is given from its receipt (docs/payments.md): a call asked again
 * after a crash is answered from here and never paid twice. One rule for the payment just
 * made (pay-charge.ts), the receipt found on a retry (plan-payments.ts) and the payment an
 * admin's resolve recorded (plan-resolve-payment.ts).
 */

/**
 * The paid response, as the tool is given it (the same text as the `fetch` tool's, or a
 * paid MCP tool's result as it gave it, `response_status` 0); for a
 * payment an admin's resolve recorded (its receipt was lost, so its response was never
 * received), an error result saying it was paid and must not be paid again.
 */
export function paidResult(toolCallId: string, receipt: OutboundPaymentReceipt): TrustedToolResult {
  if (receipt.resolvedBy !== '') {
    return {
      toolCallId,
      content: `The payment of ${receipt.amount} of ${receipt.asset} (${receipt.network}) to ${receipt.payee} was made, in transaction ${receipt.transaction}, but its response was lost; an admin (${receipt.resolvedBy}) recorded the payment. Do not pay for this resource again without asking the user.`,
      isError: true,
      outcomeUnknownReason: '',
    };
  }
  if (receipt.responseStatus === 0) {
    // A paid MCP tool's result (no HTTP status): as the tool gave it.
    return { toolCallId, content: receipt.responseBody, isError: false, outcomeUnknownReason: '' };
  }
  return {
    toolCallId,
    content: `HTTP ${receipt.responseStatus}\n${receipt.responseBody}`,
    isError: receipt.responseStatus >= 400,
    outcomeUnknownReason: '',
  };
}
