import { sha256 } from '@noble/hashes/sha2.js';
import type { OutboundPaymentReceipt } from '../proto/gen/polychrome/events/v1/events';
import { canonicalJson } from './canonical-json';

/**
 * The bytes the control plane's approval key signs for an `outbound_payment_receipt`
 * (docs/payments.md, "The receipt"): the domain line `polychrome/payment-receipt/v1`, a
 * newline, then canonical JSON of every field of the receipt but `key_id` and `signature`,
 * byte fields as lower-case hex, the paid response as its SHA-256, and `resolved_by` only
 * when it is set (an admin's resolve recorded the payment). The domain keeps a
 * receipt's signature from ever standing for an approval's (common/approval-bytes.ts), and
 * an approval's for a receipt's.
 */
export const RECEIPT_DOMAIN = 'polychrome/payment-receipt/v1';

const encoder = new TextEncoder();
const hex = (bytes: Uint8Array): string => Buffer.from(bytes).toString('hex');

/** What the receipt's signature covers. */
export function receiptSigningBytes(receipt: OutboundPaymentReceipt): Uint8Array {
  const signed = {
    conversationId: receipt.conversationId,
    turnId: receipt.turnId,
    toolCallId: receipt.toolCallId,
    receiptId: receipt.receiptId,
    protocol: receipt.protocol,
    transaction: receipt.transaction,
    payer: receipt.payer,
    network: receipt.network,
    amount: receipt.amount,
    asset: receipt.asset,
    payee: receipt.payee,
    challengeSha256: hex(receipt.challengeSha256),
    approvalRequestId: receipt.approvalRequestId,
    idempotencyKey: receipt.idempotencyKey,
    upstreamReceipt: receipt.upstreamReceipt,
    responseStatus: receipt.responseStatus,
    responseContentType: receipt.responseContentType,
    responseSha256: hex(sha256(encoder.encode(receipt.responseBody))),
    settledAtMs: receipt.settledAtMs,
    wallet: receipt.wallet,
    ...(receipt.resolvedBy === '' ? {} : { resolvedBy: receipt.resolvedBy }),
  };
  return encoder.encode(`${RECEIPT_DOMAIN}\n${canonicalJson(signed)}`);
}
