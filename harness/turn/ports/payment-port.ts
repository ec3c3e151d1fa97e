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

/**
 * What a paid MCP tool call answered (harness.proto `McpPaidResult`), relayed to the
 * control plane, which reads the settlement and records the receipt.
 */
export interface McpPaidOutcome {
  /** The tool's result as the model would see it. */
  readonly content: string;
  readonly isError: boolean;
  /** The settlement the result carried, as JSON; '' when it had none. */
  readonly paymentResponse: string;
  /** The server did not take the payment (asked for payment again, or never got the call). */
  readonly paymentNotTaken: boolean;
  /** Non-empty when the call was sent and no answer came: the payment may have settled. */
  readonly outcomeUnknownReason: string;
}

/** A paid call the server did not take (never sent, or payment asked for again): nothing paid. */
export function paymentNotTaken(content: string): McpPaidOutcome {
  return {
    content,
    isError: true,
    paymentResponse: '',
    paymentNotTaken: true,
    outcomeUnknownReason: '',
  };
}

/** The payment the control plane signed for an MCP tool's approved charge (harness.proto `McpPayment`). */
export interface McpPaymentToSend {
  /** As JSON. */
  readonly payment: string;
  /** Whose MCP transport carries it ("x402", "mpp"; '' is x402). */
  readonly protocol: string;
}

/**
 * Calls an MCP server's tool again with the payment the control plane signed for its
 * approved charge, under its protocol's `_meta` key (harness/tools/mcp-payment.ts). Never
 * rejects: a call whose outcome is unknown says so in `outcomeUnknownReason`.
 */
export interface PaidToolRunner {
  callPaid(
    request: ToolCallRequest,
    payment: McpPaymentToSend,
    options: ToolCallOptions,
  ): Promise<McpPaidOutcome>;
}
