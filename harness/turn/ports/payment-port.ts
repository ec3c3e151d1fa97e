import type { ChargeFacts } from '../../../common/payment-approval';
import type { PaymentRequired, ToolCallOptions, ToolCallRequest, ToolOutcome } from './tool-port';

/**
 * The payment port (docs/payments.md, "A paid call in a turn"): the turn loop's way to the
 * control plane for a tool that met a 402. The harness holds no wallet and never signs;
 * the control plane reads the challenge, keeps the spend limits, commits the charge, and
 * pays once a person approved it. The harness server implements it over the turn's call
 * (harness/server/turn-call.ts).
 */
export interface PaymentPort {
  /**
   * Sends the challenge the call met. Resolves with the charge the control plane committed
   * (the turn then waits for its approval) or its refusal (a spend limit, a challenge it
   * cannot pay); rejects when no answer came.
   */
  charge(
    call: ToolCallRequest,
    challenge: PaymentRequired,
    options: ToolCallOptions,
  ): Promise<{ readonly charge: ChargeFacts } | { readonly refusal: string }>;
  /**
   * Asks the control plane to pay the call's approved charge. Resolves with the paid
   * response as the call's outcome; rejects when money may have moved unanswered.
   */
  settle(
    call: ToolCallRequest,
    approvalRequestId: string,
    options: ToolCallOptions,
  ): Promise<ToolOutcome>;
}
