/**
 * A paid call end to end, with every part real but the cluster (docs/payments.md, "A paid
 * call in a turn"): the real coordinator over the real journal store, the real harness over
 * mutual-TLS gRPC with the built-in `fetch` tool, a seller settling an EIP-3009 token on
 * anvil through a facilitator from the @x402 packages, and the wallet's key in a directory
 * SecretStore only the control plane reads. The seller is an x402 v2 resource server from
 * the @x402 packages, or an MPP server from `mppx` whose 402 offers both MPP and x402: the
 * control plane's preference order (`POLYCHROME_PAYMENT_PROTOCOLS`) picks which is paid, and
 * the other never is. What must hold, whichever protocol pays: the charge is asked for
 * exactly as parsed, the approval binds it, the payment moves the price once on chain, the
 * receipt is signed over what was paid and keeps the seller's own receipt, and asking again
 * never pays twice.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { createHash, verify as verifySignature, createPublicKey } from 'node:crypto';
import pino from 'pino';
import { decodePayload, type EventKind } from '../../common/event-kinds';
import { PAYMENT_APPROVAL_TOOL } from '../../common/payment-approval';
import { receiptSigningBytes } from '../../common/payment-receipt';
import type { PaidFixture } from '../../test/support/payments/paid-fixture';
import { ANVIL_NETWORK } from '../../test/support/chain/anvil';
import { startPaidTurns, type PaidTurns, type Seller } from '../../test/support/paid-turns';
import { TEST_ADMIN, TEST_OWNER, textReply, type RealTurns } from '../../test/support/real-turns';

const PRICE = '1250000';

/** Who sells, what the control plane pays in which order, and which protocol must pay. */
interface Case {
  readonly title: string;
  readonly seller: Seller;
  readonly protocols: string;
  readonly pays: 'x402' | 'mpp';
}

const CASES: readonly Case[] = [
  { title: 'x402 from an x402 server', seller: 'x402', protocols: 'x402', pays: 'x402' },
  {
    title: 'MPP, preferred, from a server offering MPP and x402',
    seller: 'mpp',
    protocols: 'mpp,x402',
    pays: 'mpp',
  },
  {
    title: 'x402, preferred, from a server offering MPP and x402',
    seller: 'mpp',
    protocols: 'x402,mpp',
    pays: 'x402',
  },
  {
    title: "x402 over MCP, from an MCP server's paid tool",
    seller: 'x402-mcp',
    protocols: 'mpp,x402',
    pays: 'x402',
  },
  {
    title: "MPP over MCP, from an MCP server's paid tool",
    seller: 'mpp-mcp',
    protocols: 'x402,mpp',
    pays: 'mpp',
  },
];

/** The seller is an MCP server's tool. */
const overMcp = (seller: Seller): boolean => seller === 'x402-mcp' || seller === 'mpp-mcp';

/** The settlement's transaction as the seller's own receipt states it. */
function upstreamTransaction(seller: Seller, pays: Case['pays'], header: string): unknown {
  // x402's PAYMENT-RESPONSE is base64 JSON {success, transaction, network, payer}; MPP's
  // Payment-Receipt base64url JSON {method, reference, status, timestamp}, unsigned. Over
  // MCP, each is that JSON itself (`_meta["x402/payment-response"]`,
  // `_meta["org.paymentauth/receipt"]`).
  const json = overMcp(seller)
    ? header
    : Buffer.from(header, pays === 'mpp' ? 'base64url' : 'base64').toString('utf8');
  const decoded = JSON.parse(json) as Record<string, unknown>;
  return pays === 'mpp' ? decoded.reference : decoded.transaction;
}

describe.each(CASES)('a paid call in a real turn: $title', ({ seller, protocols, pays }) => {
  let paid: PaidTurns;
  let fixture: PaidFixture;
  let turns: RealTurns;
  let conversationId: string;
  let paidUrl: string;

  beforeAll(async () => {
    paid = await startPaidTurns({
      price: PRICE,
      seller,
      protocols,
      logger: pino({ level: 'silent' }),
      replies: (buy) => [
        buy('toolu_try'),
        textReply('Could not buy it.'),
        buy('toolu_buy'),
        textReply('Bought it.'),
      ],
    });
    ({ fixture, turns, conversationId, paidUrl } = paid);
  }, 60_000);

  afterAll(async () => {
    await paid.close();
  });

  /** The conversation's journal, each payload decoded as a plain record. */
  async function entries(): Promise<{ kind: string; payload: Record<string, unknown> }[]> {
    return (await turns.journal.entries(`conv-${conversationId}`)).map((entry) => {
      const payload: unknown = decodePayload(entry.kind as EventKind, entry.payload);
      return { kind: entry.kind, payload: payload as Record<string, unknown> };
    });
  }

  it('refuses the charge, named, while no wallet is linked, and the turn goes on', async () => {
    const reply = await turns.coordinator.postMessage(
      TEST_OWNER,
      { conversationId, text: 'try to buy the report', idempotencyKey: 'k-try' },
      AbortSignal.timeout(30_000),
    );
    expect(reply).toMatchObject({ status: 'complete', reply: 'Could not buy it.' });
    const journal = await entries();
    const result = journal.find((e) => e.kind === 'tool_result')?.payload;
    expect(result).toMatchObject({ toolCallId: 'toolu_try', isError: true });
    expect(String(result?.content)).toContain(
      'payments are off for this conversation: no wallet is linked to it',
    );
    expect(journal.some((e) => e.kind === 'payment_charge')).toBe(false);
    expect(fixture.x402.settles()).toEqual({ total: 0, succeeded: 0 });
    expect(paid.paidHandlerRuns()).toBe(0);
  }, 60_000);

  it('links, asks for exactly the charge, pays once on chain and records a signed receipt', async () => {
    const signal = AbortSignal.timeout(60_000);
    await paid.link(PRICE);
    const payeeBefore = await fixture.token.balanceOf(fixture.payee);
    const payerBefore = await fixture.token.balanceOf(fixture.payer);

    const paused = await turns.coordinator.postMessage(
      TEST_OWNER,
      { conversationId, text: 'buy the report', idempotencyKey: 'k-buy' },
      signal,
    );
    expect(paused.status).toBe('paused');
    expect(paused.approval).toMatchObject({
      toolName: PAYMENT_APPROVAL_TOOL,
      toolCallId: 'toolu_buy',
    });
    // Over MCP the resource is the call `mcp://<server>/<tool>`, as the control plane
    // derived it from the committed call.
    expect(paused.approval?.args).toEqual({
      amount: PRICE,
      asset: fixture.token.address.toLowerCase(),
      challengeSha256: expect.stringMatching(/^[0-9a-f]{64}$/),
      expiresAt: expect.any(String),
      network: ANVIL_NETWORK,
      payee: fixture.payee.toLowerCase(),
      protocol: pays,
      resourceUrl: paidUrl,
    });
    // The card's digest is of the challenge committed with the charge, which is the
    // preferred protocol's header as the seller sent it.
    const charge = (await entries()).find((e) => e.kind === 'payment_charge')?.payload;
    expect(charge).toMatchObject({ protocol: pays, toolCallId: 'toolu_buy' });
    const challenge = String(charge?.challenge);
    const card = paused.approval?.args as Record<string, unknown>;
    expect(card.challengeSha256).toBe(createHash('sha256').update(challenge, 'utf8').digest('hex'));
    if (seller === 'mpp-mcp') {
      // The -32042 error's data as the tool's answer carried it: one evm charge, whose
      // stated expiry the card shows.
      const data = JSON.parse(challenge) as { challenges: Record<string, unknown>[] };
      expect(data.challenges).toEqual([
        expect.objectContaining({ realm: 'polychrome-test', method: 'evm', intent: 'charge' }),
      ]);
      expect(card.expiresAt).toBe(new Date(String(data.challenges[0]?.expires)).toISOString());
    } else if (pays === 'mpp') {
      expect(challenge).toMatch(/^Payment id="[^"]+", realm="polychrome-test", method="evm"/);
      // MPP's challenge states its own expiry: the card shows exactly it.
      const expires = /expires="([^"]+)"/.exec(challenge)?.[1];
      expect(card.expiresAt).toBe(new Date(String(expires)).toISOString());
    } else if (seller === 'x402-mcp') {
      // The PaymentRequired the tool's result carried, as JSON; the resource is the
      // server's name for its tool, while the card names the call the journal holds.
      expect(JSON.parse(challenge)).toMatchObject({
        x402Version: 2,
        resource: { url: 'mcp://tool/report' },
      });
    } else {
      const offer = JSON.parse(Buffer.from(challenge, 'base64').toString('utf8')) as {
        x402Version: number;
        resource: { url: string };
      };
      expect(offer).toMatchObject({ x402Version: 2, resource: { url: paidUrl } });
    }
    // Nothing moved before the approval.
    expect(await fixture.token.balanceOf(fixture.payee)).toBe(payeeBefore);
    expect(paid.paidHandlerRuns()).toBe(0);

    const done = await turns.coordinator.answerApproval(
      TEST_ADMIN,
      { conversationId, requestId: paused.approval?.requestId ?? '', decision: 'approve' },
      signal,
    );
    expect(done).toMatchObject({ status: 'complete', reply: 'Bought it.' });
    expect(await fixture.token.balanceOf(fixture.payee)).toBe(payeeBefore + BigInt(PRICE));
    expect(await fixture.token.balanceOf(fixture.payer)).toBe(payerBefore - BigInt(PRICE));
    // One settlement at the facilitator, one run of the seller's paid handler: the
    // protocol not preferred was never paid.
    expect(fixture.x402.settles()).toEqual({ total: 1, succeeded: 1 });
    expect(paid.paidHandlerRuns()).toBe(1);

    const journal = await entries();
    const kinds = journal.map((e) => e.kind).filter((k) => k !== 'signed_root');
    expect(kinds).toEqual(
      expect.arrayContaining([
        'payment_policy',
        'payment_charge',
        'approval_request',
        'approval_response',
        'payment_sent',
        'outbound_payment_receipt',
      ]),
    );
    const order = (kind: string) => kinds.indexOf(kind);
    expect(order('payment_charge')).toBeLessThan(order('approval_request'));
    expect(order('approval_response')).toBeLessThan(order('payment_sent'));
    expect(order('payment_sent')).toBeLessThan(order('outbound_payment_receipt'));
    expect(order('outbound_payment_receipt')).toBeLessThan(kinds.lastIndexOf('tool_result'));

    const receipt = journal.find((e) => e.kind === 'outbound_payment_receipt')?.payload;
    expect(receipt).toMatchObject({
      conversationId,
      toolCallId: 'toolu_buy',
      payer: fixture.payer.toLowerCase(),
      payee: fixture.payee.toLowerCase(),
      amount: PRICE,
      // An MCP tool's result has no HTTP status.
      responseStatus: overMcp(seller) ? 0 : 200,
      wallet: 'ops',
      keyId: turns.approvals.keyId,
    });
    expect(receipt).toMatchObject({ protocol: pays });
    expect(String(receipt?.transaction)).toMatch(/^0x[0-9a-f]{64}$/);
    // The seller's own receipt is kept as received and names the same transaction.
    expect(upstreamTransaction(seller, pays, String(receipt?.upstreamReceipt))).toBe(
      receipt?.transaction,
    );
    // The receipt's signature verifies with the approval key over its signed bytes.
    const publicKey = createPublicKey({
      key: {
        kty: 'OKP',
        crv: 'Ed25519',
        x: Buffer.from(turns.approvals.publicKey).toString('base64url'),
      },
      format: 'jwk',
    });
    const signed = decodePayload(
      'outbound_payment_receipt',
      (await turns.journal.entries(`conv-${conversationId}`)).find(
        (e) => e.kind === 'outbound_payment_receipt',
      )?.payload ?? new Uint8Array(),
    );
    expect(verifySignature(null, receiptSigningBytes(signed), publicKey, signed.signature)).toBe(
      true,
    );
    const tampered = { ...signed, amount: '1' };
    expect(verifySignature(null, receiptSigningBytes(tampered), publicKey, signed.signature)).toBe(
      false,
    );

    // The tool got the paid response (an MCP tool: its result, as the tool gave it).
    const result = journal.filter((e) => e.kind === 'tool_result').at(-1)?.payload;
    expect(String(result?.content)).toMatch(
      overMcp(seller) ? /^paid report on tides \(run 1\)$/ : /^HTTP 200\n/,
    );

    // Posting again under the same key answers the settled turn: nothing is paid twice.
    const again = await turns.coordinator.postMessage(
      TEST_OWNER,
      { conversationId, text: 'buy the report', idempotencyKey: 'k-buy' },
      signal,
    );
    expect(again).toMatchObject({ status: 'complete', reply: 'Bought it.' });
    expect(await fixture.token.balanceOf(fixture.payee)).toBe(payeeBefore + BigInt(PRICE));
    expect(fixture.x402.settles()).toEqual({ total: 1, succeeded: 1 });
    expect(paid.paidHandlerRuns()).toBe(1);
  }, 90_000);
});
