import { createHash } from 'node:crypto';
import type { Charge } from './charge';

/**
 * The identity of the tool call that met a 402: one per call in the journal. A charge is
 * paid at most once per call; a new call to the same resource is a new payment.
 */
export interface PaymentCall {
  readonly conversationId: string;
  readonly turnId: string;
  readonly toolCallId: string;
}

const DOMAIN = 'polychrome/payment-idempotency/v1';

/**
 * The idempotency key of a payment (docs/payments.md, "Idempotency"): SHA-256 over the
 * domain string, then the conversation id, turn id, tool call id and the charge's protocol
 * and challenge digest, each as a 4-byte big-endian length and its UTF-8 bytes. 64 hex
 * digits.
 *
 * A retry of the same call for the same challenge (after a crash, a lost answer) derives
 * the same key; anything else derives another. For x402 the key is the EIP-3009 nonce, so
 * the token contract itself refuses a second transfer for it; for MPP it is sent as
 * `Idempotency-Key`.
 */
export function paymentIdempotencyKey(charge: Charge, call: PaymentCall): string {
  const hash = createHash('sha256');
  for (const field of [
    DOMAIN,
    call.conversationId,
    call.turnId,
    call.toolCallId,
    charge.protocol,
    charge.challengeDigest,
  ]) {
    const bytes = Buffer.from(field, 'utf8');
    const length = Buffer.alloc(4);
    length.writeUInt32BE(bytes.length);
    hash.update(length).update(bytes);
  }
  return hash.digest('hex');
}
