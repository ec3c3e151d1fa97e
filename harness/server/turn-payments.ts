import { AppError, isAppError } from '../../common/errors';
import type {
  McpPayment,
  PaymentChargeAnswer,
  TurnOutput,
} from '../../proto/gen/polychrome/harness/v1/harness';
import type { PaidToolRunner, PaymentPort } from '../turn/ports/payment-port';
import type { ToolCallRequest } from '../turn/ports/tool-port';
import { waitForAnswer, type Waiter } from './answer-waiters';
import {
  chargeAnswerFromProto,
  mcpPaidResultToProto,
  notSent,
  paymentChallengeToProto,
  paymentSettleToProto,
  type ChargeAnswer,
  type McpPaymentAnswer,
} from './payment-codec';
import type { TrustedAnswer } from './turn-output-codec';

/** What the payments of a turn use of its call (turn-call.ts `TurnCall`). */
export interface PaymentStream {
  readonly turnId: string;
  write(output: NonNullable<TurnOutput['output']>): void;
  /** Ends the turn for a protocol mistake of the control plane. */
  violate(what: string): void;
}

/**
 * A turn's paid calls on its stream (docs/payments.md, "A paid call in a turn", "A paid
 * MCP tool"): a 402's challenge up, the charge or a refusal down; then, once approved, the
 * request to pay up and the paid response down as a trusted result. For an MCP tool's
 * charge the control plane answers the request to pay with the signed payment instead:
 * the paid runner calls the tool with it, and what the tool answered goes up
 * (`mcp_paid_result`) for the receipt, the result then coming down as for any charge.
 */
export class TurnPayments {
  /** Challenges sent, by tool call id. */
  private readonly charges = new Map<string, Waiter<ChargeAnswer['answer']>>();
  /** Requests to pay, by tool call id: the paid result, or first an MCP tool's payment. */
  private readonly settles = new Map<string, Waiter<TrustedAnswer | McpPaymentAnswer>>();
  private closed: AppError | undefined;

  constructor(private readonly stream: PaymentStream) {}

  /** The port the turn pays through; `paid` calls MCP tools with their payments. */
  port(paid: PaidToolRunner | undefined): PaymentPort {
    return {
      charge: (call, challenge, options) => {
        const answered = this.wait(this.charges, call, options);
        this.stream.write({
          $case: 'paymentChallenge',
          value: paymentChallengeToProto(call, challenge),
        });
        return answered;
      },
      settle: async (call, approvalRequestId, options) => {
        const settled = this.wait(this.settles, call, options);
        this.stream.write({
          $case: 'paymentSettle',
          value: paymentSettleToProto(call, approvalRequestId),
        });
        let answer = await settled;
        if ('payment' in answer) {
          const outcome =
            paid === undefined ? notSent(call) : await paid.callPaid(call, answer, options);
          const recorded = this.wait(this.settles, call, options);
          this.stream.write({ $case: 'mcpPaidResult', value: mcpPaidResultToProto(call, outcome) });
          answer = await recorded;
          if ('payment' in answer) {
            throw new AppError('internal', `a second payment for ${call.toolCallId}`);
          }
        }
        // Money may have moved without an answer: the machine quarantines the turn.
        if (!answer.known) throw new AppError('unavailable', answer.reason);
        return answer.outcome;
      },
    };
  }

  /** Takes a trusted result that answers a request to pay; false when none waits for it. */
  settled(answer: TrustedAnswer): boolean {
    const waiter = this.settles.get(answer.toolCallId);
    if (waiter === undefined) return false;
    this.settles.delete(answer.toolCallId);
    waiter.resolve(answer);
    return true;
  }

  /** A `payment_charge_answer`. */
  chargeAnswered(message: PaymentChargeAnswer): void {
    let answer: ChargeAnswer;
    try {
      answer = chargeAnswerFromProto(message);
    } catch (error) {
      this.stream.violate(isAppError(error) ? error.message : 'malformed payment_charge_answer');
      return;
    }
    const waiter = this.charges.get(answer.toolCallId);
    if (waiter === undefined) {
      this.stream.violate(
        `payment_charge_answer for ${answer.toolCallId}, which sent no challenge`,
      );
      return;
    }
    this.charges.delete(answer.toolCallId);
    waiter.resolve(answer.answer);
  }

  /** An `mcp_payment`: the signed payment of a request to pay. */
  mcpPayment({ toolCallId, payment, protocol }: McpPayment): void {
    const waiter = this.settles.get(toolCallId);
    if (waiter === undefined || payment === '') {
      this.stream.violate(
        `mcp_payment for ${toolCallId}, which did not ask to pay or got no payment`,
      );
      return;
    }
    this.settles.delete(toolCallId);
    waiter.resolve({ payment, protocol });
  }

  /** No more input will arrive: every wait, now or later, fails with `reason`. */
  closeInput(reason: AppError): void {
    this.closed ??= reason;
    for (const waiter of this.charges.values()) waiter.reject(reason);
    for (const waiter of this.settles.values()) waiter.reject(reason);
    this.charges.clear();
    this.settles.clear();
  }

  private wait<T>(
    waiters: Map<string, Waiter<T>>,
    call: ToolCallRequest,
    options: { readonly signal: AbortSignal; readonly timeoutMs: number },
  ): Promise<T> {
    if (this.closed !== undefined) return Promise.reject(this.closed);
    const onTimeout = () => trustedTimeout(call, options.timeoutMs);
    return waitForAnswer(waiters, call.toolCallId, options.signal, onTimeout, this.stream.turnId);
  }
}

/** A trusted call's (or a paid call's) answer did not come in time. */
export function trustedTimeout(request: ToolCallRequest, timeoutMs: number): AppError {
  return new AppError(
    'deadline_exceeded',
    `trusted tool ${request.name} (${request.toolCallId}) got no answer from the control plane within ${timeoutMs} ms`,
    { details: { turn: request.turnId, toolCallId: request.toolCallId } },
  );
}
