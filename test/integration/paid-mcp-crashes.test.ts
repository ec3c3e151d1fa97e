/**
 * Exactly once for a paid MCP tool, under SIGKILL (docs/payments.md, "A paid MCP tool" and
 * "Exactly once"): the control plane signs the payment and hands it to the harness, which
 * calls the tool with it; the MCP server settles. Killed here, on the real stack (the
 * control-plane, harness and state-plane processes; an MCP server selling its tool over
 * x402's MCP transport, settling through the real facilitator on anvil), is the harness:
 *
 * - while it holds the handed payment (the server has it, verified, and has not answered):
 *   the server settles, nobody relays its answer, and the turn is quarantined naming the
 *   charge; a retry never calls the tool again; an admin resolves it with the transaction;
 * - while the relayed result's receipt is in flight: the receipt is recorded, and the retried
 *   turn is answered from it without calling the tool again.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { mcpResourceUrl } from '../../common/payment-approval';
import { pollUntil } from '../../hack/lib/processes';
import { toolDirective } from '../support/messages-api-server';
import { startX402McpServer, type X402McpServer } from '../support/payments/x402-mcp-server';
import { startPaidCrashStack, type PaidCrashStack } from './support/paid-crash';
import { apiCall, postMessage, postUntilSettled } from './support/public-api';

const PRICE = '1000000';
const TOOL = 'shop/report';

describe('a paid MCP tool survives a SIGKILL of the harness that carries its payment', () => {
  let paid: PaidCrashStack;
  let seller: X402McpServer;

  beforeAll(async () => {
    paid = await startPaidCrashStack('mcpcrash', PRICE);
    seller = await startX402McpServer({
      facilitatorUrl: paid.fixture.x402.facilitatorUrl,
      token: paid.fixture.token.address,
      payTo: paid.fixture.payee,
      price: PRICE,
    });
  }, 180_000);

  afterAll(async () => {
    await seller?.close();
    await paid?.stop();
  });

  const text = (): string => `buy the report ${toolDirective(TOOL, { topic: 'tides' })}`;

  /** A conversation offered the seller's MCP server as `shop`, the wallet linked. */
  function shopConversation(name: string): Promise<string> {
    return paid.paidConversation(name, {
      mcpServers: [{ name: 'shop', transport: 'http', url: seller.url }],
    });
  }

  /** Pauses a new conversation on its payment's card: the charge names the MCP tool. */
  async function pausedOnCard(name: string, key: string) {
    const uid = await shopConversation(name);
    const requestId = await paid.askToPay(uid, text(), key);
    const payeeBefore = await paid.fixture.token.balanceOf(paid.fixture.payee);
    const payments = seller.payments().length;
    return { uid, requestId, payeeBefore, payments };
  }

  it('harness killed while it holds the handed payment: the server settles, the turn is quarantined naming the charge, and resolved with the transaction', async () => {
    await paid.stack.withDiagnostics(async () => {
      await paid.holdAppendsOf(undefined);
      const { uid, requestId, payeeBefore, payments } = await pausedOnCard('mcp-held', 'k-held');
      const charge = await paid.firstEvent(uid, 'payment_charge');
      expect(charge.resourceUrl).toBe(mcpResourceUrl(TOOL));

      const held = seller.holdNextPaidCall();
      const approving = paid.approve(uid, requestId);
      await held.reached;
      // The server holds the verified payment; the harness waits for its answer.
      await paid.stack.killHarness('mcp-held', 'SIGKILL');
      held.release();
      const first = await approving;
      expect(first).not.toBeInstanceOf(Error);
      // The server settles for a caller that is gone: the money moved, and no receipt.
      await pollUntil(
        'the held call to settle',
        async () => ((await paid.ledger(uid, payeeBefore)).transfers === 1n ? true : undefined),
        { timeoutMs: 60_000, intervalMs: 200 },
      );
      expect(await paid.ledger(uid, payeeBefore)).toMatchObject({ sent: 1, receipts: 0 });

      const answer = await postUntilSettled(
        paid.stack.apiUrl,
        paid.ownerToken,
        uid,
        text(),
        'k-held',
      );
      expect(answer.status).toBe(200);
      expect(answer.body).toMatchObject({
        status: 'ambiguous',
        ambiguous: { toolCallId: charge.toolCallId },
      });
      expect(JSON.stringify(answer.body)).toContain(charge.idempotencyKey);
      // Never paid twice: a retry answers the same and the tool is not called again.
      const again = await postMessage(paid.stack.apiUrl, paid.ownerToken, uid, text(), 'k-held');
      expect(again.body).toMatchObject({ status: 'ambiguous' });
      expect(seller.payments().length).toBe(payments + 1);
      expect(await paid.ledger(uid, payeeBefore)).toMatchObject({
        sent: 1,
        receipts: 0,
        transfers: 1n,
        remainder: 0n,
      });

      // An admin finds the transfer on the chain and resolves the turn with it.
      const transaction = (await paid.lastTransfer()).toLowerCase();
      const resolvePath = `/v1/conversations/${uid}/turns/${String(answer.body.turnId)}/resolve`;
      const resolved = await apiCall(paid.stack.apiUrl, 'POST', resolvePath, {
        token: paid.admin.token,
        body: { actor: paid.admin.identity, decision: 'ran', transaction },
      });
      expect(resolved.status).toBe(200);
      const finished = await postUntilSettled(
        paid.stack.apiUrl,
        paid.ownerToken,
        uid,
        text(),
        'k-held',
      );
      expect(finished.body).toMatchObject({ status: 'complete' });
      expect(String(finished.body.reply)).toContain(`in transaction ${transaction}`);
      expect(await paid.ledger(uid, payeeBefore)).toMatchObject({
        sent: 1,
        receipts: 1,
        transfers: 1n,
        remainder: 0n,
      });
      expect(seller.payments().length).toBe(payments + 1);
      expect((await paid.stack.verify(uid)).ok).toBe(true);
      await paid.expectReplays(uid);
    });
  });

  it('harness killed while the receipt is in flight: the receipt is recorded, and the retried turn is answered from it', async () => {
    await paid.stack.withDiagnostics(async () => {
      await paid.holdAppendsOf('outbound_payment_receipt');
      const { uid, requestId, payeeBefore, payments } = await pausedOnCard(
        'mcp-receipt',
        'k-receipt',
      );
      const runs = seller.runs();
      const approving = paid.approve(uid, requestId);
      await paid.heldAppend();
      await paid.stack.killHarness('mcp-receipt', 'SIGKILL');
      expect(await approving).not.toBeInstanceOf(Error);
      await paid.holdAppendsOf(undefined);

      const answer = await postUntilSettled(
        paid.stack.apiUrl,
        paid.ownerToken,
        uid,
        text(),
        'k-receipt',
      );
      expect(answer.status).toBe(200);
      expect(answer.body).toMatchObject({ status: 'complete' });
      expect(String(answer.body.reply)).toContain(`paid report on tides (run ${runs + 1})`);
      const after = await paid.ledger(uid, payeeBefore);
      expect(after).toMatchObject({
        charges: 1,
        sent: 1,
        receipts: 1,
        transfers: 1n,
        remainder: 0n,
      });
      expect(after.kinds.filter((k) => k === 'turn_complete')).toHaveLength(1);
      // Answered from the receipt: the tool ran and was paid once.
      expect(seller.runs()).toBe(runs + 1);
      expect(seller.payments().length).toBe(payments + 1);
      expect((await paid.stack.verify(uid)).ok).toBe(true);
      await paid.expectReplays(uid);
    });
  });
});
