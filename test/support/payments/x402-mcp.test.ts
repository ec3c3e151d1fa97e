import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { McpToolRunner } from '../../../harness/tools/mcp-tools';
import type { McpPaidOutcome } from '../../../harness/turn/ports/payment-port';
import { startPaidFixture, type PaidFixture } from './paid-fixture';
import { startX402McpServer, type X402McpServer } from './x402-mcp-server';
import type { Charge } from '../../../operator/payments/charge';
import { paymentIdempotencyKey } from '../../../operator/payments/idempotency';
import { x402Protocol } from '../../../operator/payments/payment-protocol';
import { SettlementError, SettlementOutcome } from '../../../operator/payments/settlement';
import { walletFromPrivateKey } from '../../../operator/payments/wallet';

// The x402 MCP seller (x402-mcp-server.ts) against the two sides Polychrome splits x402's
// MCP transport between, end to end on real parts: the harness's MCP client (McpToolRunner)
// calls a paid tool of an MCP server whose x402 side is @x402/core's resource server,
// settling through the real facilitator on anvil; the control plane's x402 adapter parses
// the challenge, signs the payment and reads the settlement.

let f: PaidFixture;
let seller: X402McpServer;
let runner: McpToolRunner;
beforeAll(async () => {
  f = await startPaidFixture();
  seller = await startX402McpServer({
    facilitatorUrl: f.x402.facilitatorUrl,
    token: f.token.address,
    payTo: f.payee,
    price: f.price,
  });
  runner = new McpToolRunner([{ name: 'shop', transport: 'http', url: seller.url }]);
}, 60_000);
afterAll(async () => {
  await runner.close();
  await seller.close();
  await f.close();
});

const mcp = x402Protocol().mcp!;
const request = (toolCallId: string) => ({
  turnId: 't-1',
  toolCallId,
  name: 'shop/report',
  input: { topic: 'tides' },
  argsJson: '{"topic":"tides"}',
  step: 1,
  maxSteps: 8,
});
const options = () => ({ signal: AbortSignal.timeout(30_000), timeoutMs: 30_000 });

/** Calls the tool unpaid and parses the challenge its result carried. */
async function charged(toolCallId: string): Promise<{ charge: Charge; challenge: string }> {
  const outcome = await runner.call(request(toolCallId), options());
  const challenge = outcome.paymentRequired?.mcpPaymentRequired ?? '';
  return { challenge, charge: mcp.parse(challenge, 'mcp://shop/report', new Date()) };
}

describe('x402 over MCP: the harness carries, the control plane signs and reads', () => {
  it("pays a tool once: the challenge as the result carried it, the paid result, the chain's one transfer", async () => {
    const first = await runner.call(request('c-1'), options());
    expect(first.paymentRequired).toMatchObject({ url: 'mcp://shop/report', headers: [] });
    expect(seller.runs()).toBe(0);
    const { charge, challenge } = await charged('c-1');
    expect(charge).toMatchObject({
      protocol: 'x402',
      amount: f.price,
      asset: f.token.address.toLowerCase(),
      payee: f.payee.toLowerCase(),
      network: 'eip155:31337',
      resourceUrl: 'mcp://shop/report',
    });
    const before = await f.token.balanceOf(f.payee);
    const wallet = walletFromPrivateKey('payer', f.payerKey);
    const idempotencyKey = paymentIdempotencyKey(charge, {
      conversationId: 'conv',
      turnId: 't-1',
      toolCallId: 'c-1',
    });
    const payment = await mcp.authorize({ charge, challenge, wallet, idempotencyKey });
    expect(JSON.parse(payment)).toMatchObject({
      x402Version: 2,
      payload: { authorization: { nonce: `0x${idempotencyKey}`, value: f.price } },
    });
    const paid = await runner.callPaid(request('c-1'), { payment, protocol: 'x402' }, options());
    expect(paid).toMatchObject({
      content: 'paid report on tides (run 1)',
      isError: false,
      paymentNotTaken: false,
    });
    const settlement = mcp.settlement(paid, charge, wallet.address, idempotencyKey, challenge);
    expect(settlement).toMatchObject({ payer: f.payer.toLowerCase(), network: 'eip155:31337' });
    expect(settlement.transaction).toMatch(/^0x[0-9a-f]{64}$/u);
    expect(await f.token.balanceOf(f.payee)).toBe(before + BigInt(f.price));

    // The same payment sent again (a harness replaying it) moves nothing: the token took
    // its nonce; the server asks for payment again, which reads as not taken.
    const again = await runner.callPaid(request('c-1'), { payment, protocol: 'x402' }, options());
    expect(again.paymentNotTaken).toBe(true);
    expect(() => mcp.settlement(again, charge, wallet.address, idempotencyKey, challenge)).toThrow(
      expect.objectContaining({ outcome: SettlementOutcome.Rejected }),
    );
    expect(await f.token.balanceOf(f.payee)).toBe(before + BigInt(f.price));
    expect(seller.runs()).toBe(1);
  }, 60_000);

  it('refuses to sign for a charge that is not its challenge, before anything leaves', async () => {
    const { charge, challenge } = await charged('c-2');
    const wallet = walletFromPrivateKey('payer', f.payerKey);
    const sent = seller.payments().length;
    await expect(
      mcp.authorize({
        charge: { ...charge, amount: '1' },
        challenge,
        wallet,
        idempotencyKey: 'ab'.repeat(32),
      }),
    ).rejects.toMatchObject({ outcome: SettlementOutcome.Refused });
    await expect(
      mcp.authorize({
        charge,
        challenge: challenge.replace(f.price, '1'),
        wallet,
        idempotencyKey: 'ab'.repeat(32),
      }),
    ).rejects.toBeInstanceOf(SettlementError);
    expect(seller.payments()).toHaveLength(sent);
  });
});

describe('reading what a paid MCP call settled', () => {
  const charge: Charge = {
    protocol: 'x402',
    challengeDigest: 'ab'.repeat(32),
    amount: '5',
    asset: `0x${'11'.repeat(20)}`,
    network: 'eip155:31337',
    payee: `0x${'22'.repeat(20)}`,
    resourceUrl: 'mcp://shop/report',
    expiresAt: '2026-12-07T12:00:00.000Z',
  };
  const payer = `0x${'33'.repeat(20)}`;
  const tx = `0x${'cd'.repeat(32)}`;
  const response = (over: Record<string, unknown>) =>
    JSON.stringify({ success: true, transaction: tx, network: 'eip155:31337', payer, ...over });
  const outcome = (over: Partial<McpPaidOutcome>): McpPaidOutcome => ({
    content: 'r',
    isError: false,
    paymentResponse: response({}),
    paymentNotTaken: false,
    outcomeUnknownReason: '',
    ...over,
  });

  it.each<[string, SettlementOutcome, Partial<McpPaidOutcome>]>([
    ['a call whose outcome is unknown', 'unknown', { outcomeUnknownReason: 'the server closed' }],
    ['a failed settlement', 'rejected', { paymentResponse: response({ success: false }) }],
    ['payment asked for again', 'rejected', { paymentResponse: '', paymentNotTaken: true }],
    ['no settlement at all', 'unknown', { paymentResponse: '' }],
    ['a settlement that is not JSON', 'unknown', { paymentResponse: '{' }],
    ['no transaction', 'unknown', { paymentResponse: response({ transaction: '' }) }],
    ['another network', 'unknown', { paymentResponse: response({ network: 'eip155:1' }) }],
    ['another payer', 'unknown', { paymentResponse: response({ payer: `0x${'44'.repeat(20)}` }) }],
  ])('%s is %s', (_name, expected, over) => {
    expect(() => x402Protocol().mcp!.settlement(outcome(over), charge, payer, 'k', '')).toThrow(
      expect.objectContaining({ outcome: expected }),
    );
  });

  it('reads a settlement by this wallet on the charge network, keeping it as the upstream receipt', () => {
    expect(
      x402Protocol().mcp!.settlement(outcome({}), charge, payer.toUpperCase(), 'k', ''),
    ).toEqual({
      protocol: 'x402',
      transaction: tx,
      payer,
      network: 'eip155:31337',
      idempotencyKey: 'k',
      upstreamReceipt: response({}),
    });
  });
});
