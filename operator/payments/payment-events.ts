import type {
  OutboundPaymentReceipt,
  PaymentCharge,
} from '../../proto/gen/polychrome/events/v1/events';
import { AppError, ErrorCode } from '../../common/errors';
import { PaymentProtocolName, type Charge } from './charge';
import type { PaymentCall } from './idempotency';
import type { Settlement } from './settlement';

/**
 * The edge between the neutral payment types and the journal's messages: one pair per
 * message (`payment_charge`, `outbound_payment_receipt`). The receipt's `receipt_id`,
 * `key_id` and `signature` are the signer's to fill.
 */

/** What a `payment_charge` records besides the charge. */
export interface ChargeRecording {
  /** The approval the charge waits for (common/request-ids.ts `paymentApprovalRequestId`). */
  readonly approvalRequestId: string;
  readonly idempotencyKey: string;
  /** The challenge exactly as received. */
  readonly challenge: string;
  /** The delegation thread whose tool asked ('' at the top). */
  readonly thread: string;
}

/** The `payment_charge` payload of a charge. */
export function chargeToProto(
  charge: Charge,
  call: PaymentCall,
  { approvalRequestId, idempotencyKey, challenge, thread }: ChargeRecording,
): PaymentCharge {
  return {
    turnId: call.turnId,
    toolCallId: call.toolCallId,
    currency: '',
    amountMinor: 0,
    payee: charge.payee,
    approvalRequestId,
    protocol: charge.protocol,
    challengeSha256: Buffer.from(charge.challengeDigest, 'hex'),
    amount: charge.amount,
    asset: charge.asset,
    network: charge.network,
    resourceUrl: charge.resourceUrl,
    expiresAt: charge.expiresAt,
    idempotencyKey,
    challenge,
    thread,
  };
}

/** The charge a `payment_charge` payload records; an unknown protocol is refused. */
export function chargeFromProto(event: PaymentCharge): Charge {
  const protocols: readonly string[] = Object.values(PaymentProtocolName);
  if (!protocols.includes(event.protocol)) {
    throw new AppError(
      ErrorCode.DataLoss,
      `payment_charge of tool call ${event.toolCallId} names protocol "${event.protocol}", which is not one Polychrome pays`,
    );
  }
  return {
    protocol: event.protocol as PaymentProtocolName,
    challengeDigest: Buffer.from(event.challengeSha256).toString('hex'),
    amount: event.amount,
    asset: event.asset,
    network: event.network,
    payee: event.payee,
    resourceUrl: event.resourceUrl,
    expiresAt: event.expiresAt,
  };
}

/** What a receipt records besides the charge and its settlement. */
export interface ReceiptRecording {
  readonly approvalRequestId: string;
  /** The paid response, as the tool is given it. */
  readonly response: {
    readonly status: number;
    readonly contentType: string;
    readonly body: string;
  };
  readonly settledAtMs: number;
  /** The wallet that paid (its name). */
  readonly wallet: string;
  /** The admin whose resolve recorded a payment whose receipt was lost (docs/payments.md). */
  readonly resolvedBy?: string;
}

/** The receipt id of the charge whose idempotency key is `key`: one receipt per charge. */
export function receiptIdOf(key: string): string {
  return `rcpt_${key.slice(0, 32)}`;
}

/** The `outbound_payment_receipt` payload of a settled charge, before it is signed. */
export function receiptToProto(
  charge: Charge,
  settlement: Settlement,
  call: PaymentCall,
  { approvalRequestId, response, settledAtMs, wallet, resolvedBy = '' }: ReceiptRecording,
): OutboundPaymentReceipt {
  return {
    turnId: call.turnId,
    toolCallId: call.toolCallId,
    receiptId: '',
    currency: '',
    amountMinor: 0,
    keyId: '',
    signature: Buffer.alloc(0),
    protocol: settlement.protocol,
    transaction: settlement.transaction,
    payer: settlement.payer,
    network: settlement.network,
    amount: charge.amount,
    asset: charge.asset,
    payee: charge.payee,
    challengeSha256: Buffer.from(charge.challengeDigest, 'hex'),
    approvalRequestId,
    idempotencyKey: settlement.idempotencyKey,
    upstreamReceipt: settlement.upstreamReceipt,
    responseStatus: response.status,
    responseContentType: response.contentType,
    responseBody: response.body,
    conversationId: call.conversationId,
    settledAtMs,
    wallet,
    resolvedBy,
  };
}
