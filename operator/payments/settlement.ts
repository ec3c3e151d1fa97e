import { AppError, ErrorCode } from '../../common/errors';
import type { Charge, PaymentProtocolName } from './charge';
import type { Wallet } from './wallet';

/** The request a tool made, which the control plane sends again with the payment. */
export interface PaymentRequest {
  readonly url: string;
  readonly method: string;
  /** The tool's headers; payment headers are added, never taken from here. */
  readonly headers: Readonly<Record<string, string>>;
  readonly body?: string;
}

/** How a settlement sends the paid request: `fetch`, a timeout and the clock. */
export interface SendOptions {
  readonly fetch?: typeof globalThis.fetch;
  /** How long to wait for the paid answer before its outcome is unknown. @default 60 s */
  readonly timeoutMs?: number;
  readonly now?: () => Date;
}

/** What a settlement needs: the approved charge and its challenge, the wallet, the call. */
export interface SettleInput {
  readonly charge: Charge;
  /** The challenge header value the charge was parsed from, exactly as received. */
  readonly challenge: string;
  readonly wallet: Wallet;
  readonly request: PaymentRequest;
  /** `paymentIdempotencyKey(charge, call)`. */
  readonly idempotencyKey: string;
  readonly options?: SendOptions;
}

/** What a paid request settled, in neutral terms (the receipt's on-chain part). */
export interface Settlement {
  readonly protocol: PaymentProtocolName;
  /** The on-chain reference: a transaction hash. */
  readonly transaction: string;
  /** Who paid (an address, lower-case hex). */
  readonly payer: string;
  readonly network: string;
  /** The idempotency key the payment was made under. */
  readonly idempotencyKey: string;
  /** The upstream receipt header exactly as received (`PAYMENT-RESPONSE`, `Payment-Receipt`). */
  readonly upstreamReceipt: string;
}

/**
 * What a paid MCP call answered, as the harness relayed it (harness.proto `McpPaidResult`):
 * the control plane reads its settlement from here (operator/payments/x402-mcp.ts).
 */
export interface McpPaidOutcome {
  readonly content: string;
  readonly isError: boolean;
  /** The settlement response as JSON, as the result carried it; '' when it had none. */
  readonly paymentResponse: string;
  /** The server did not take the payment (asked for payment again, or never got the call). */
  readonly paymentNotTaken: boolean;
  /** Non-empty when the call's outcome is unknown (sent, no answer). */
  readonly outcomeUnknownReason: string;
}

/** The upstream answer to the paid request, with what it settled. */
export interface PaidResponse {
  readonly status: number;
  readonly contentType: string | undefined;
  readonly body: Uint8Array;
  readonly settlement: Settlement;
}

/**
 * Whether money may have moved when a settlement failed (the turn layer decides from it):
 *
 * - `refused`: stopped before the paid request was sent; nothing was signed or sent, or a
 *   signed payment never left the process. No money moved.
 * - `rejected`: sent, and the server answered that it took no payment (x402: a 402
 *   without a successful `PAYMENT-RESPONSE`; MPP: a 402 or an RFC 9457 problem).
 * - `unknown`: sent, and no answer says what happened (a broken connection, a timeout, a
 *   5xx, a 2xx without a receipt). The payment may have settled: do not pay again under
 *   another key; a retry under the same key cannot move money twice.
 */
export const SettlementOutcome = {
  Refused: 'refused',
  Rejected: 'rejected',
  Unknown: 'unknown',
} as const;
export type SettlementOutcome = (typeof SettlementOutcome)[keyof typeof SettlementOutcome];

/** A failed settlement, with whether money may have moved (`outcome`). */
export class SettlementError extends AppError {
  override readonly name = 'SettlementError';
  readonly outcome: SettlementOutcome;

  constructor(outcome: SettlementOutcome, message: string, details: Record<string, string> = {}) {
    super(
      outcome === SettlementOutcome.Unknown ? ErrorCode.Unavailable : ErrorCode.FailedPrecondition,
      message,
      {
        details: { ...details, outcome },
      },
    );
    this.outcome = outcome;
  }
}

/**
 * A relayed paid result that does not show what happened (a paid MCP call): the payment
 * may have settled, so it is never sent again and the turn is quarantined naming it.
 */
export function settlementUnknown(why: string): SettlementError {
  return new SettlementError(
    SettlementOutcome.Unknown,
    `${why}; the payment may have settled: it is not sent again`,
  );
}
