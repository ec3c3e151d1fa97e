import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { formatUnits } from 'viem';
import { McpToolRunner } from '../../../harness/tools/mcp-tools';
import type { McpPaidOutcome } from '../../../harness/turn/ports/payment-port';
import type { Charge } from '../../../operator/payments/charge';
import { paymentIdempotencyKey } from '../../../operator/payments/idempotency';
import { mppMcpSettlement } from '../../../operator/payments/mpp-mcp';
import { mppTokenDomains, parseMppTokens } from '../../../operator/payments/mpp-tokens';
import {
  mppProtocol,
  readMcpChallenge,
  x402Protocol,
} from '../../../operator/payments/payment-protocol';
import { SettlementOutcome } from '../../../operator/payments/settlement';
import { walletFromPrivateKey } from '../../../operator/payments/wallet';
import { TOKEN_DECIMALS } from '../chain/token';
import { fixtureMppTokens, startPaidFixture, type PaidFixture } from './paid-fixture';
import { startMppMcpServer, type MppMcpServer } from './mpp-mcp-server';

// The MPP MCP seller (mpp-mcp-server.ts: mppx's server and its MCP SDK transport) against
// the two sides Polychrome splits MPP's MCP transport between, end to end on real parts:
// the harness's MCP client (McpToolRunner) calls a paid tool, the control plane's MPP
// adapter parses the challenge the JSON-RPC error (or the result) carried, signs the
// credential and reads the receipt; mppx settles through the real facilitator on anvil.

let f: PaidFixture;
let seller: MppMcpServer;
let runner: McpToolRunner;
beforeAll(async () => {
  f = await startPaidFixture();
  seller = await startMppMcpServer({
    facilitatorUrl: f.x402.facilitatorUrl,
    token: f.token.address,
    payTo: f.payee,
    amount: formatUnits(BigInt(f.price), TOKEN_DECIMALS),
  });
  runner = new McpToolRunner([{ name: 'shop', transport: 'http', url: seller.url }]);
}, 60_000);
afterAll(async () => {
  await runner.close();
  await seller.close();
  await f.close();
});

const protocol = () =>
  mppProtocol(mppTokenDomains(parseMppTokens(JSON.parse(fixtureMppTokens(f)))));
const request = (toolCallId: string, tool = 'report') => ({
  turnId: 't-1',
  toolCallId,
  name: `shop/${tool}`,
  input: { topic: 'tides' },
  argsJson: '{"topic":"tides"}',
  step: 1,
  maxSteps: 8,
});
const options = () => ({ signal: AbortSignal.timeout(30_000), timeoutMs: 30_000 });

/** Calls `tool` unpaid and reads the challenge its answer carried, as the control plane does. */
async function charged(
  toolCallId: string,
  tool = 'report',
): Promise<{ charge: Charge; challenge: string }> {
  const outcome = await runner.call(request(toolCallId, tool), options());
  expect(outcome.paymentRequired).toMatchObject({ url: `mcp://shop/${tool}`, headers: [] });
  const read = readMcpChallenge(
    [x402Protocol(), protocol()],
    outcome.paymentRequired?.mcpPaymentRequired ?? '',
    `mcp://shop/${tool}`,
    new Date(),
  );
  expect(read.protocol.name).toBe('mpp');
  return { challenge: read.challenge, charge: read.charge };
}

/** Signs the charge's credential with the payer's wallet, as the control plane does. */
async function authorize(toolCallId: string, tool = 'report') {
  const { charge, challenge } = await charged(toolCallId, tool);
  const idempotencyKey = paymentIdempotencyKey(charge, {
    conversationId: 'conv',
    turnId: 't-1',
    toolCallId,
  });
  const wallet = walletFromPrivateKey('payer', f.payerKey);
  const payment = await protocol().mcp!.authorize({ charge, challenge, wallet, idempotencyKey });
  return { charge, challenge, idempotencyKey, wallet, payment };
}

describe('MPP over MCP: the harness carries, the control plane signs and reads', () => {
  it('pays a tool once: the challenge of the -32042 error, the paid result and its receipt, one transfer', async () => {
    const { charge, challenge, idempotencyKey, wallet, payment } = await authorize('c-1');
    expect(charge).toMatchObject({
      protocol: 'mpp',
      amount: f.price,
      asset: f.token.address.toLowerCase(),
      payee: f.payee.toLowerCase(),
      network: 'eip155:31337',
      resourceUrl: 'mcp://shop/report',
    });
    // The challenge is the error's data as relayed: one evm charge challenge.
    expect(JSON.parse(challenge)).toMatchObject({
      httpStatus: 402,
      challenges: [{ method: 'evm', intent: 'charge', realm: 'polychrome-test' }],
    });
    expect(seller.runs()).toBe(0);
    // mppx's credential object, its challenge the one approved, its authorization valid
    // no longer than the charge allows.
    const credential = JSON.parse(payment) as {
      challenge: { id: string };
      payload: { validBefore: string };
    };
    expect(credential.challenge.id).toBe(
      (JSON.parse(challenge) as { challenges: { id: string }[] }).challenges[0]?.id,
    );
    expect(Number(credential.payload.validBefore) * 1000).toBeLessThanOrEqual(
      Date.parse(charge.expiresAt) + 5 * 60_000,
    );
    const before = await f.token.balanceOf(f.payee);
    const paid = await runner.callPaid(request('c-1'), { payment, protocol: 'mpp' }, options());
    expect(paid).toMatchObject({
      content: 'paid report on tides (run 1)',
      isError: false,
      paymentNotTaken: false,
      outcomeUnknownReason: '',
    });
    const settlement = protocol().mcp!.settlement(
      paid,
      charge,
      wallet.address,
      idempotencyKey,
      challenge,
    );
    expect(settlement).toMatchObject({
      protocol: 'mpp',
      payer: f.payer.toLowerCase(),
      network: 'eip155:31337',
      upstreamReceipt: paid.paymentResponse,
    });
    expect(settlement.transaction).toMatch(/^0x[0-9a-f]{64}$/u);
    expect(JSON.parse(paid.paymentResponse)).toMatchObject({
      status: 'success',
      reference: settlement.transaction,
    });
    expect(await f.token.balanceOf(f.payee)).toBe(before + BigInt(f.price));
    expect(seller.runs()).toBe(1);

    // The same credential sent again (a harness replaying it) moves nothing: the server
    // refuses it, which reads as not taken.
    const again = await runner.callPaid(request('c-1'), { payment, protocol: 'mpp' }, options());
    expect(again).toMatchObject({ paymentNotTaken: true, outcomeUnknownReason: '' });
    expect(() =>
      protocol().mcp!.settlement(again, charge, wallet.address, idempotencyKey, challenge),
    ).toThrow(expect.objectContaining({ outcome: SettlementOutcome.Rejected }));
    expect(await f.token.balanceOf(f.payee)).toBe(before + BigInt(f.price));
    expect(seller.runs()).toBe(1);
  }, 60_000);

  it("pays a tool whose result carries the challenge in _meta['org.paymentauth/payment-required']", async () => {
    const { charge, challenge, idempotencyKey, wallet, payment } = await authorize('c-2', 'brief');
    const before = await f.token.balanceOf(f.payee);
    const paid = await runner.callPaid(
      request('c-2', 'brief'),
      { payment, protocol: 'mpp' },
      options(),
    );
    expect(paid).toMatchObject({ content: 'paid brief on tides (run 2)', paymentNotTaken: false });
    expect(
      protocol().mcp!.settlement(paid, charge, wallet.address, idempotencyKey, challenge),
    ).toMatchObject({ protocol: 'mpp' });
    expect(await f.token.balanceOf(f.payee)).toBe(before + BigInt(f.price));
  }, 60_000);

  it('sends nothing for a protocol the harness does not carry; an answer the payment\'s transport cannot read is unknown, never "not taken"', async () => {
    const { payment } = await authorize('c-3');
    const runs = seller.runs();
    const before = await f.token.balanceOf(f.payee);
    const unsent = await runner.callPaid(request('c-3'), { payment, protocol: 'tempo' }, options());
    expect(unsent).toMatchObject({ paymentNotTaken: true, outcomeUnknownReason: '' });
    expect(unsent.content).toContain('"tempo", which has no MCP transport in this harness');
    // Under x402's key mppx finds no credential and answers -32042, which x402's transport
    // does not read: the harness cannot tell that nothing settled, so it says unknown.
    const misread = await runner.callPaid(request('c-3'), { payment, protocol: 'x402' }, options());
    expect(misread).toMatchObject({ paymentNotTaken: false });
    expect(misread.outcomeUnknownReason).toContain('JSON-RPC error -32042');
    expect(seller.runs()).toBe(runs);
    expect(await f.token.balanceOf(f.payee)).toBe(before);
  }, 60_000);

  it('refuses to sign a charge that is not its challenge, or another challenge under its digest', async () => {
    const { charge, challenge } = await charged('c-4');
    const wallet = walletFromPrivateKey('payer', f.payerKey);
    const credentials = seller.credentials().length;
    const idempotencyKey = 'ab'.repeat(32);
    const mcp = protocol().mcp!;
    await expect(
      mcp.authorize({ charge: { ...charge, amount: '1' }, challenge, wallet, idempotencyKey }),
    ).rejects.toMatchObject({ outcome: SettlementOutcome.Refused });
    await expect(
      mcp.authorize({
        charge,
        challenge: challenge.replace('polychrome-test', 'elsewhere'),
        wallet,
        idempotencyKey,
      }),
    ).rejects.toMatchObject({ outcome: SettlementOutcome.Refused });
    expect(seller.credentials()).toHaveLength(credentials);
  });
});

describe('reading what a paid MPP MCP call settled', () => {
  const id = 'challenge-one';
  const challenge = JSON.stringify({
    challenges: [
      {
        id,
        realm: 'r',
        method: 'evm',
        intent: 'charge',
        request: {
          amount: '5',
          currency: `0x${'11'.repeat(20)}`,
          recipient: `0x${'22'.repeat(20)}`,
          methodDetails: { chainId: 31337 },
        },
        expires: '2030-01-01T00:00:00.000Z',
      },
    ],
  });
  const charge: Charge = {
    protocol: 'mpp',
    challengeDigest: 'ab'.repeat(32),
    amount: '5',
    asset: `0x${'11'.repeat(20)}`,
    network: 'eip155:31337',
    payee: `0x${'22'.repeat(20)}`,
    resourceUrl: 'mcp://shop/report',
    expiresAt: '2030-01-01T00:00:00.000Z',
  };
  const payer = `0x${'33'.repeat(20)}`;
  const tx = `0x${'cd'.repeat(32)}`;
  const receipt = (over: Record<string, unknown>) =>
    JSON.stringify({ method: 'evm', status: 'success', reference: tx, challengeId: id, ...over });
  const outcome = (over: Partial<McpPaidOutcome>): McpPaidOutcome => ({
    content: 'r',
    isError: false,
    paymentResponse: receipt({}),
    paymentNotTaken: false,
    outcomeUnknownReason: '',
    ...over,
  });

  it.each<[string, SettlementOutcome, Partial<McpPaidOutcome>]>([
    ['a call whose outcome is unknown', 'unknown', { outcomeUnknownReason: 'the server closed' }],
    ['payment asked for again', 'rejected', { paymentResponse: '', paymentNotTaken: true }],
    ['no receipt at all', 'unknown', { paymentResponse: '' }],
    ['a receipt that is not JSON', 'unknown', { paymentResponse: '{' }],
    ['a receipt that is not a success', 'unknown', { paymentResponse: receipt({ status: 'x' }) }],
    ['no transaction', 'unknown', { paymentResponse: receipt({ reference: 'abc' }) }],
    ['another challenge', 'unknown', { paymentResponse: receipt({ challengeId: 'other' }) }],
  ])('%s is %s', (_name, expected, over) => {
    expect(() => mppMcpSettlement(outcome(over), charge, payer, 'k', challenge)).toThrow(
      expect.objectContaining({ outcome: expected }),
    );
  });

  it('is unknown when the recorded challenge cannot be read to check the receipt', () => {
    expect(() => mppMcpSettlement(outcome({}), charge, payer, 'k', '{')).toThrow(
      expect.objectContaining({ outcome: SettlementOutcome.Unknown }),
    );
  });

  it("names the server's problem when it did not take the payment", () => {
    const refused = outcome({
      paymentNotTaken: true,
      paymentResponse: JSON.stringify({ title: 'Verification Failed', detail: 'nonce used' }),
    });
    expect(() => mppMcpSettlement(refused, charge, payer, 'k', challenge)).toThrow(
      'the MCP server did not take the MPP payment (reason: nonce used)',
    );
  });

  it('reads a receipt of the approved challenge, the payer being the wallet that signed', () => {
    expect(mppMcpSettlement(outcome({}), charge, payer.toUpperCase(), 'k', challenge)).toEqual({
      protocol: 'mpp',
      transaction: tx,
      payer,
      network: 'eip155:31337',
      idempotencyKey: 'k',
      upstreamReceipt: receipt({}),
    });
  });
});
