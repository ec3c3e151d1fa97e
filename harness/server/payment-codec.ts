import { chargeFactsOf, type ChargeFacts } from '../../common/payment-approval';
import type {
  PaymentChallenge,
  PaymentChargeAnswer,
  PaymentSettle,
} from '../../proto/gen/polychrome/harness/v1/harness';
import type { PaymentRequired, ToolCallRequest } from '../turn/ports/tool-port';
import { invalidField } from '../turn/proto-fields';

/**
 * The payment messages of the RunTurn stream (harness.proto `PaymentChallenge`,
 * `PaymentSettle`, `PaymentChargeAnswer`; docs/payments.md, "A paid call in a turn").
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
