/**
 * Exactly once, under SIGKILL (docs/payments.md, "Exactly once"): a paid call on the real
 * stack (the control-plane process paying x402 from a wallet directory, the harness process
 * with the built-in `fetch`, the state-plane process, an @x402 resource server and
 * facilitator settling an EIP-3009 token on anvil), with the control plane or the harness
 * SIGKILLed at each point between the person's approval and the receipt. The state plane
 * holds the append of the event named at each point (its fault injection), so the kill lands
 * exactly there. After recovery the chain holds exactly one transfer and the journal one
 * receipt, or the turn is quarantined naming the charge with nothing paid twice, and an
 * admin's `resolve` with the transaction hash settles it.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { createPublicKey, verify } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { receiptSigningBytes } from '../../common/payment-receipt';
import type { PaidFixture } from '../support/payments/paid-fixture';
import { expectNoPaymentSecrets } from '../support/payment-secrets';
import { toolDirective } from '../support/messages-api-server';
import { startPaidCrashStack, type PaidCrashStack } from './support/paid-crash';
import { apiCall, postMessage, postUntilSettled, type ApiAnswer } from './support/public-api';
import type { TurnStack } from './support/turn-stack';

const PRICE = '1000000';

describe('a paid call survives a SIGKILL at each point between approval and receipt', () => {
  let paid: PaidCrashStack;
  let stack: TurnStack;
  let fixture: PaidFixture;
  let owner: string;
  let admin: string;
  let paidUrl: string;
  const OWNER = 'test:payer-owner';
  const ADMIN = 'test:payer-admin';

  beforeAll(async () => {
    paid = await startPaidCrashStack('paycrash', PRICE);
    ({ stack, fixture } = paid);
    paidUrl = `${fixture.x402.resourceUrl}/paid`;
    owner = paid.ownerToken;
    admin = paid.admin.token;
  }, 180_000);

  afterAll(async () => {
    await paid?.stop();
  });

  const text = (url = paidUrl): string => `buy the report ${toolDirective('fetch', { url })}`;
  /** A crash point: where the turn is, after the kill, for the checks that follow. */
  interface Crashed {
    readonly uid: string;
    readonly requestId: string;
    /** The payee's balance before the approval. */
    readonly payeeBefore: bigint;
    /** The approval request cut by the crash: its answer, or the network error. */
    readonly approving: Promise<ApiAnswer | Error>;
  }

  /**
   * Pauses a new paid conversation `name` on its payment's card, holds every append of
   * `kind`, approves, and SIGKILLs the control plane or the conversation's harness while
   * that append is in flight.
   */
  async function crashAt(
    kind: string,
    name: string,
    key: string,
    victim: 'control plane' | 'harness',
    seller: { readonly url: string; readonly protocol: 'x402' | 'mpp' } = {
      url: paidUrl,
      protocol: 'x402',
    },
  ): Promise<Crashed> {
    await paid.holdAppendsOf(kind);
    const uid = await paid.paidConversation(name, { builtin: ['fetch'] });
    const requestId = await paid.askToPay(uid, text(seller.url), key, seller.protocol);
    const payeeBefore = await fixture.token.balanceOf(fixture.payee);
    const approving = paid.approve(uid, requestId);
    await paid.heldAppend();
    if (victim === 'harness') await stack.killHarness(name, 'SIGKILL');
    else await stack.controlPlane(0).kill('SIGKILL');
    return { uid, requestId, payeeBefore, approving };
  }

  /** The turn completed with the paid response, once: one transfer, one receipt. */
  async function expectPaidOnce(uid: string, answer: ApiAnswer, payeeBefore: bigint) {
    expect(answer.status).toBe(200);
    expect(answer.body).toMatchObject({ status: 'complete' });
    expect(String(answer.body.reply)).toMatch(/^tool fetch said: HTTP 200\n/);
    const after = await paid.ledger(uid, payeeBefore);
    expect(after).toMatchObject({ charges: 1, sent: 1, receipts: 1, transfers: 1n, remainder: 0n });
    expect(after.kinds.filter((k) => k === 'turn_complete')).toHaveLength(1);
    expect((await stack.verify(uid)).ok).toBe(true);
    await paid.expectReplays(uid);
  }

  it('control plane killed while payment_sent is in flight: the send is not recorded, the retry pays once', async () => {
    await stack.withDiagnostics(async () => {
      const { uid, payeeBefore, approving } = await crashAt(
        'payment_sent',
        'cp-before-sent',
        'k-cp-sent',
        'control plane',
      );
      expect(await approving).toBeInstanceOf(Error);
      // The approval is recorded; the send is not, and nothing moved.
      expect(await paid.ledger(uid, payeeBefore)).toMatchObject({ sent: 0, transfers: 0n });

      await paid.holdAppendsOf(undefined);
      const answer = await postUntilSettled(stack.apiUrl, owner, uid, text(), 'k-cp-sent');
      await expectPaidOnce(uid, answer, payeeBefore);
    });
  });

  it('control plane killed after the money moved, before the receipt: quarantined naming the charge, resolved with the transaction', async () => {
    await stack.withDiagnostics(async () => {
      const { uid, payeeBefore, approving } = await crashAt(
        'outbound_payment_receipt',
        'cp-before-receipt',
        'k-cp-receipt',
        'control plane',
      );
      expect(await approving).toBeInstanceOf(Error);
      expect(await paid.ledger(uid, payeeBefore)).toMatchObject({
        sent: 1,
        receipts: 0,
        transfers: 1n,
      });

      await paid.holdAppendsOf(undefined);
      const answer = await postUntilSettled(stack.apiUrl, owner, uid, text(), 'k-cp-receipt');
      expect(answer.status).toBe(200);
      const charge = await paid.firstEvent(uid, 'payment_charge');
      expect(answer.body).toMatchObject({
        status: 'ambiguous',
        ambiguous: { toolCallId: charge.toolCallId },
      });
      expect(JSON.stringify(answer.body)).toContain(charge.idempotencyKey);
      // Never paid twice: a retry answers the same and sends nothing.
      const again = await postMessage(stack.apiUrl, owner, uid, text(), 'k-cp-receipt');
      expect(again.body).toMatchObject({ status: 'ambiguous' });
      expect(await paid.ledger(uid, payeeBefore)).toMatchObject({
        sent: 1,
        receipts: 0,
        transfers: 1n,
        remainder: 0n,
      });
      expect((await stack.verify(uid)).ok).toBe(true);

      // An admin looks the payment up on the chain and resolves the turn with its transaction.
      const transaction = (await paid.lastTransfer()).toLowerCase();
      const turnId = String(answer.body.turnId);
      const resolvePath = `/v1/conversations/${uid}/turns/${turnId}/resolve`;
      const resolve = (token: string, body: Record<string, unknown>) =>
        apiCall(stack.apiUrl, 'POST', resolvePath, { token, body });
      const before = (await stack.journalKinds(uid)).length;
      expect((await resolve(owner, { actor: OWNER, decision: 'ran', transaction })).status).toBe(
        403,
      );
      const notRun = await resolve(admin, { actor: ADMIN, decision: 'did_not_run' });
      expect(notRun.status).toBe(409);
      expect(JSON.stringify(notRun.body)).toContain(charge.idempotencyKey);
      const withoutHash = await resolve(admin, {
        actor: ADMIN,
        decision: 'ran',
        resultUnknown: true,
      });
      expect(withoutHash.status).toBe(409);
      const badHash = await resolve(admin, { actor: ADMIN, decision: 'ran', transaction: '0x12' });
      expect(badHash).toMatchObject({
        status: 400,
        body: { error: { details: { field: 'transaction' } } },
      });
      expect((await stack.journalKinds(uid)).length).toBe(before);

      const resolved = await resolve(admin, { actor: ADMIN, decision: 'ran', transaction });
      expect(resolved.status).toBe(200);
      expect(String(resolved.body.message)).toContain(transaction);
      const finished = await postUntilSettled(stack.apiUrl, owner, uid, text(), 'k-cp-receipt');
      expect(finished.body).toMatchObject({ status: 'complete' });
      expect(String(finished.body.reply)).toContain(`in transaction ${transaction}`);
      const after = await paid.ledger(uid, payeeBefore);
      expect(after).toMatchObject({ sent: 1, receipts: 1, transfers: 1n, remainder: 0n });
      const receipt = await paid.firstEvent(uid, 'outbound_payment_receipt');
      expect(receipt).toMatchObject({
        transaction,
        resolvedBy: ADMIN,
        payer: fixture.payer.toLowerCase(),
        idempotencyKey: charge.idempotencyKey,
        amount: PRICE,
        upstreamReceipt: '',
      });
      const approvalKey = createPublicKey({
        key: {
          kty: 'OKP',
          crv: 'Ed25519',
          x: Buffer.from(stack.approvalKey.publicKeyHex, 'hex').toString('base64url'),
        },
        format: 'jwk',
      });
      expect(verify(null, receiptSigningBytes(receipt), approvalKey, receipt.signature)).toBe(true);
      expect(
        verify(
          null,
          receiptSigningBytes({ ...receipt, resolvedBy: 'test:someone-else' }),
          approvalKey,
          receipt.signature,
        ),
      ).toBe(false);
      expect((await stack.verify(uid)).ok).toBe(true);
      await paid.expectReplays(uid);
    });
  });

  it('harness killed while payment_sent is in flight: the control plane pays and records, the retry reads the receipt', async () => {
    await stack.withDiagnostics(async () => {
      const { uid, payeeBefore, approving } = await crashAt(
        'payment_sent',
        'harness-before-sent',
        'k-h-sent',
        'harness',
      );
      const first = await approving;
      expect(first).not.toBeInstanceOf(Error);
      await paid.holdAppendsOf(undefined);
      const answer = await postUntilSettled(stack.apiUrl, owner, uid, text(), 'k-h-sent');
      await expectPaidOnce(uid, answer, payeeBefore);
    });
  });

  it('harness killed while the receipt is in flight: the receipt is recorded, the retry answers from it', async () => {
    await stack.withDiagnostics(async () => {
      const { uid, payeeBefore, approving } = await crashAt(
        'outbound_payment_receipt',
        'harness-before-receipt',
        'k-h-receipt',
        'harness',
      );
      const first = await approving;
      expect(first).not.toBeInstanceOf(Error);
      await paid.holdAppendsOf(undefined);
      const answer = await postUntilSettled(stack.apiUrl, owner, uid, text(), 'k-h-receipt');
      await expectPaidOnce(uid, answer, payeeBefore);
      expect(fixture.x402.settles().total).toBeGreaterThan(0);
    });
  });

  it('control plane killed while the approval is in flight: nothing is approved, the approval is asked again and pays once', async () => {
    await stack.withDiagnostics(async () => {
      const { uid, requestId, payeeBefore, approving } = await crashAt(
        'approval_response',
        'cp-before-approval',
        'k-cp-approval',
        'control plane',
      );
      expect(await approving).toBeInstanceOf(Error);
      expect(await stack.journalKinds(uid)).not.toContain('approval_response');

      await paid.holdAppendsOf(undefined);
      const still = await postUntilSettled(stack.apiUrl, owner, uid, text(), 'k-cp-approval');
      expect(still.body).toMatchObject({ status: 'paused', approval: { requestId } });
      const answer = await paid.approve(uid, requestId);
      if (answer instanceof Error) throw answer;
      await expectPaidOnce(uid, answer, payeeBefore);
    });
  });
  describe('paying MPP (the mppx server, whose 402 offers MPP and x402; MPP preferred)', () => {
    const mpp = () => ({ url: `${fixture.mpp?.url ?? ''}/paid`, protocol: 'mpp' as const });

    it('control plane killed while payment_sent is in flight: nothing was sent; the retry signs again and pays once', async () => {
      await stack.withDiagnostics(async () => {
        const credentials = fixture.mpp?.credentials().length ?? 0;
        const { uid, payeeBefore, approving } = await crashAt(
          'payment_sent',
          'mpp-cp-before-sent',
          'k-mpp-sent',
          'control plane',
          mpp(),
        );
        expect(await approving).toBeInstanceOf(Error);
        expect(await paid.ledger(uid, payeeBefore)).toMatchObject({ sent: 0, transfers: 0n });
        expect(fixture.mpp?.credentials()).toHaveLength(credentials);

        await paid.holdAppendsOf(undefined);
        const answer = await postUntilSettled(
          stack.apiUrl,
          owner,
          uid,
          text(mpp().url),
          'k-mpp-sent',
        );
        await expectPaidOnce(uid, answer, payeeBefore);
        // One credential reached the seller, and the receipt is MPP's.
        expect(fixture.mpp?.credentials()).toHaveLength(credentials + 1);
        const receipt = await paid.firstEvent(uid, 'outbound_payment_receipt');
        expect(receipt).toMatchObject({ protocol: 'mpp', amount: PRICE });
      });
    });

    it('control plane killed after the money moved, before the receipt: quarantined naming the charge, resolved with the transaction', async () => {
      await stack.withDiagnostics(async () => {
        const { uid, payeeBefore, approving } = await crashAt(
          'outbound_payment_receipt',
          'mpp-cp-before-receipt',
          'k-mpp-receipt',
          'control plane',
          mpp(),
        );
        expect(await approving).toBeInstanceOf(Error);
        expect(await paid.ledger(uid, payeeBefore)).toMatchObject({
          sent: 1,
          receipts: 0,
          transfers: 1n,
        });
        const credentials = fixture.mpp?.credentials().length ?? 0;

        await paid.holdAppendsOf(undefined);
        const url = mpp().url;
        const answer = await postUntilSettled(stack.apiUrl, owner, uid, text(url), 'k-mpp-receipt');
        const charge = await paid.firstEvent(uid, 'payment_charge');
        expect(charge.protocol).toBe('mpp');
        expect(answer.body).toMatchObject({ status: 'ambiguous' });
        expect(JSON.stringify(answer.body)).toContain(charge.idempotencyKey);
        // The retry sends no credential; the chain moved the price once.
        const again = await postMessage(stack.apiUrl, owner, uid, text(url), 'k-mpp-receipt');
        expect(again.body).toMatchObject({ status: 'ambiguous' });
        expect(fixture.mpp?.credentials()).toHaveLength(credentials);

        const transaction = (await paid.lastTransfer()).toLowerCase();
        const resolved = await apiCall(
          stack.apiUrl,
          'POST',
          `/v1/conversations/${uid}/turns/${String(answer.body.turnId)}/resolve`,
          { token: admin, body: { actor: ADMIN, decision: 'ran', transaction } },
        );
        expect(resolved.status).toBe(200);
        const finished = await postUntilSettled(
          stack.apiUrl,
          owner,
          uid,
          text(url),
          'k-mpp-receipt',
        );
        expect(finished.body).toMatchObject({ status: 'complete' });
        expect(await paid.ledger(uid, payeeBefore)).toMatchObject({
          sent: 1,
          receipts: 1,
          transfers: 1n,
          remainder: 0n,
        });
        expect((await stack.verify(uid)).ok).toBe(true);
        await paid.expectReplays(uid);
      });
    });
  });

  it('leaves no key or signature material in any journal or log line of the paid turns', async () => {
    const { made } = paid;
    expect(made.size).toBe(7);
    const texts: string[] = [];
    for (const [name, uid] of made) {
      for (const entry of await stack.journal(uid)) {
        const bytes = Buffer.from(entry.payload);
        texts.push(bytes.toString('hex'), bytes.toString('latin1'), bytes.toString('base64'));
      }
      const { logPath } = await stack.harness(name);
      texts.push(await readFile(logPath, 'utf8').catch(() => ''));
    }
    const controlPlaneLines = stack.controlPlane(0).log.lines;
    texts.push(...controlPlaneLines, ...stack.state.logs, ...stack.nodeLog.lines);
    const all = texts.join('\n');
    const lower = all.toLowerCase();
    // What is public is there, so the search reads the right bytes: the payer's address.
    expect(lower).toContain(fixture.payer.slice(2).toLowerCase());
    // Every line of every run is searched: none was dropped from the rolling log.
    expect(controlPlaneLines.length).toBeGreaterThan(0);
    expect(controlPlaneLines.length).toBeLessThan(5_000);
    // Neither the key nor the signed authorizations the seller received appear anywhere.
    expectNoPaymentSecrets(all, {
      payerKey: fixture.payerKey,
      paymentSignatures: fixture.x402.paymentSignatures(),
      mppCredentials: fixture.mpp?.credentials() ?? [],
    });
  });
});
