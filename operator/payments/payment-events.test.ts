import { describe, expect, it } from '@jest/globals';
import { payloadCodecs } from '../../common/event-kinds';
import type { Charge } from './charge';
import { chargeFromProto, chargeToProto, receiptToProto } from './payment-events';

const charge: Charge = {
  protocol: 'x402',
  challengeDigest: 'ab'.repeat(32),
  // An 18-decimal token amount no uint64 holds.
  amount: '123456789012345678901234567890',
  asset: '0x'.padEnd(42, '1'),
  network: 'eip155:8453',
  payee: '0x'.padEnd(42, '2'),
  resourceUrl: 'https://api.example.com/paid',
  expiresAt: '2026-12-06T12:01:00.000Z',
};
const call = { conversationId: 'c', turnId: 't', toolCallId: 'k' };
const recording = (approvalRequestId: string, idempotencyKey: string) => ({
  approvalRequestId,
  idempotencyKey,
  challenge: 'eyJ4NDAyVmVyc2lvbiI6Mn0=',
  thread: 'toolu_7',
});

describe('payment events', () => {
  it('a charge survives the journal bytes exactly, amount included', () => {
    const codec = payloadCodecs.payment_charge;
    const bytes = codec
      .encode(chargeToProto(charge, call, recording('req-1', 'cd'.repeat(32))))
      .finish();
    const decoded = codec.decode(bytes);
    expect(chargeFromProto(decoded)).toEqual(charge);
    expect(decoded).toMatchObject({
      approvalRequestId: 'req-1',
      idempotencyKey: 'cd'.repeat(32),
      toolCallId: 'k',
      challenge: 'eyJ4NDAyVmVyc2lvbiI6Mn0=',
      thread: 'toolu_7',
    });
  });

  it('a receipt carries the settlement and the approved charge', () => {
    const codec = payloadCodecs.outbound_payment_receipt;
    const settlement = {
      protocol: 'x402' as const,
      transaction: `0x${'ef'.repeat(32)}`,
      payer: '0x'.padEnd(42, '3'),
      network: 'eip155:8453',
      idempotencyKey: 'cd'.repeat(32),
      upstreamReceipt: 'eyJzdWNjZXNzIjp0cnVlfQ==',
    };
    const decoded = codec.decode(
      codec
        .encode(
          receiptToProto(charge, settlement, call, {
            approvalRequestId: 'req-1',
            response: { status: 200, contentType: 'application/json', body: '{"joke":"42"}' },
            settledAtMs: 1_765_000_000_000,
            wallet: 'ops',
          }),
        )
        .finish(),
    );
    expect(decoded).toMatchObject({
      transaction: settlement.transaction,
      payer: settlement.payer,
      amount: charge.amount,
      upstreamReceipt: settlement.upstreamReceipt,
      approvalRequestId: 'req-1',
      responseStatus: 200,
      responseBody: '{"joke":"42"}',
      conversationId: 'c',
      wallet: 'ops',
    });
    expect(Buffer.from(decoded.challengeSha256).toString('hex')).toBe(charge.challengeDigest);
  });

  it('refuses a recorded charge of a protocol it does not pay', () => {
    expect(() =>
      chargeFromProto({
        ...chargeToProto(charge, call, recording('r', 'k')),
        protocol: 'lightning',
      }),
    ).toThrow(
      'payment_charge of tool call k names protocol "lightning", which is not one Polychrome pays',
    );
  });
});
