import { describe, expect, it } from '@jest/globals';
import type { Charge } from './charge';
import { paymentIdempotencyKey } from './idempotency';

const charge: Charge = {
  protocol: 'x402',
  challengeDigest: 'ab'.repeat(32),
  amount: '1',
  asset: '0x'.padEnd(42, '1'),
  network: 'eip155:1',
  payee: '0x'.padEnd(42, '2'),
  resourceUrl: 'https://api.example.com/paid',
  expiresAt: '2026-12-06T12:00:00.000Z',
};
const call = { conversationId: 'conv-1', turnId: 'turn-1', toolCallId: 'call-1' };

describe('paymentIdempotencyKey', () => {
  it('matches the documented derivation', () => {
    // SHA-256 over u32be(len) ‖ utf8 for: "polychrome/payment-idempotency/v1", "conv-1",
    // "turn-1", "call-1", "x402", "ab" x 32 (docs/payments.md, "Idempotency").
    expect(paymentIdempotencyKey(charge, call)).toBe(
      'd2b4be4e1dfac5a4f12aa9da2cce6bdebf99ad125921ba12dddf6c60308a3a07',
    );
  });

  it('is the same for a retry of the same call and challenge', () => {
    expect(paymentIdempotencyKey({ ...charge }, { ...call })).toBe(
      paymentIdempotencyKey(charge, call),
    );
  });

  it.each([
    ['another tool call', charge, { ...call, toolCallId: 'call-2' }],
    ['another turn', charge, { ...call, turnId: 'turn-2' }],
    ['another conversation', charge, { ...call, conversationId: 'conv-2' }],
    ['another challenge', { ...charge, challengeDigest: 'cd'.repeat(32) }, call],
    ['another protocol', { ...charge, protocol: 'mpp' as const }, call],
    [
      'fields that run together the same way',
      charge,
      { ...call, turnId: 'turn-1c', toolCallId: 'all-1' },
    ],
  ])('differs for %s', (_case, c, k) => {
    expect(paymentIdempotencyKey(c, k)).not.toBe(paymentIdempotencyKey(charge, call));
  });
});
