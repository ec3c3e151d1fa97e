import { chargeFactsOf, type ChargeFacts } from '../../common/payment-approval';
import type {
  McpPaidResult,
  PaymentChallenge,
  PaymentChargeAnswer,
  PaymentSettle,
} from '../../proto/gen/polychrome/harness/v1/harness';
import {
  paymentNotTaken,
  type McpPaidOutcome,
  type McpPaymentToSend,
} from '../turn/ports/payment-port';
import type { PaymentRequired, ToolCallRequest } from '../turn/ports/tool-port';
import { invalidField } from '../turn/proto-fields';

/**
 * The payment messages of the RunTurn stream (harness.proto `PaymentChallenge`,
 * `PaymentSettle`, `PaymentChargeAnswer`, `McpPayment`, `McpPaidResult`; docs/payments.md,
 * "A paid call in a turn", "A paid MCP tool").
 */

/** The challenge a call met, as the harness sends it. */
export function paymentChallengeToProto(
  call: ToolCallRequest,
  challenge: PaymentRequired,
): PaymentChallenge {
  return {
    turnId: call.turnId,
    toolCallId: call.toolCallId,
    thread: call.thread ?? '',
    url: challenge.url,
    headers: challenge.headers.map(([name, value]) => ({ name, value })),
    mcpPaymentRequired: challenge.mcpPaymentRequired ?? '',
  };
}

/** The request to pay a call's approved charge. */
export function paymentSettleToProto(
  call: ToolCallRequest,
  approvalRequestId: string,
): PaymentSettle {
  return {
    turnId: call.turnId,
    toolCallId: call.toolCallId,
    approvalRequestId,
    thread: call.thread ?? '',
  };
}

/** The control plane's answer to a challenge, keyed by its tool call. */
export interface ChargeAnswer {
  readonly toolCallId: string;
  readonly answer: { readonly charge: ChargeFacts } | { readonly refusal: string };
}

/**
 * Reads a `payment_charge_answer`.
 *
 * @throws AppError `invalid_argument` naming the field when it holds no answer.
 */
export function chargeAnswerFromProto(message: PaymentChargeAnswer): ChargeAnswer {
  const field = 'payment_charge_answer';
  if (message.toolCallId === '') throw invalidField(`${field}.tool_call_id`, 'is empty');
  const { answer } = message;
  switch (answer?.$case) {
    case 'charge':
      return { toolCallId: message.toolCallId, answer: { charge: chargeFactsOf(answer.value) } };
    case 'refusal':
      if (answer.value === '') throw invalidField(`${field}.refusal`, 'is empty');
      return { toolCallId: message.toolCallId, answer: { refusal: answer.value } };
    default:
      throw invalidField(field, 'has neither a charge nor a refusal');
  }
}

/** The control plane's answer to a request to pay an MCP tool's charge: the signed payment. */
export type McpPaymentAnswer = McpPaymentToSend;

/** What the paid MCP call answered, as the harness relays it. */
export function mcpPaidResultToProto(
  call: ToolCallRequest,
  outcome: McpPaidOutcome,
): McpPaidResult {
  return {
    turnId: call.turnId,
    toolCallId: call.toolCallId,
    thread: call.thread ?? '',
    ...outcome,
  };
}

/** A paid MCP call this harness cannot make (no MCP server runs the tool): not sent. */
export function notSent(call: ToolCallRequest): McpPaidOutcome {
  return paymentNotTaken(
    `${call.name} is not an MCP tool this harness runs; the paid call was not sent.`,
  );
}
