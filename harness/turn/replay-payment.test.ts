import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { generateKeyPairSync, sign } from 'node:crypto';
import pino from 'pino';
import { requestIds } from '../../common/request-ids';
import type { JournalEntry } from '../../common/state-journal';
import { decodePayload, encodePayload } from '../../common/event-kinds';
import { receiptSigningBytes } from '../../common/payment-receipt';
import { buyApproved, startPaidTurns, type PaidTurns } from '../../test/support/paid-turns';
import { TEST_OWNER, textReply } from '../../test/support/real-turns';
import { nodeEd25519Verifier } from '../crypto/node-ed25519';
import { replayJournal } from './replay';

// Replay of a journal with a paid call (docs/replay.md, docs/payments.md): the real stack
// pays on anvil, and the journal it wrote replays without a model, a tool or a chain. The
// paused attempt ends with the payment's approval request; the resumed one is given the
// charge and the approval, and the paid result comes from the journal.

let paid: PaidTurns;
let entries: JournalEntry[];

beforeAll(async () => {
  paid = await startPaidTurns({
    price: '1000000',
    logger: pino({ level: 'silent' }),
    replies: (buy) => [buy('toolu_buy'), textReply('Bought it.'), textReply('You are welcome.')],
  });
  const { turns, conversationId } = paid;
  const signal = AbortSignal.timeout(60_000);
  await buyApproved(paid, '1000000');
  await turns.coordinator.postMessage(
    TEST_OWNER,
    { conversationId, text: 'thanks', idempotencyKey: 'k2' },
    signal,
  );
  entries = await turns.journal.entries(`conv-${conversationId}`);
}, 90_000);

afterAll(async () => {
  await paid.close();
});

describe('replay of a paid turn', () => {
  it('replays both turns in full, the paid one across its pause', () => {
    expect(entries.some((e) => e.kind === 'outbound_payment_receipt')).toBe(true);
    const result = replayJournal(entries, {
      ids: requestIds,
      verifier: nodeEd25519Verifier,
      approvalPublicKey: paid.turns.approvals.publicKey,
    });
    expect(result.divergence).toBeUndefined();
    expect(result.turns.map((t) => [t.status, t.mode, t.ok])).toEqual([
      ['complete', 'full', true],
      ['complete', 'full', true],
    ]);
  });

  it('catches a charge changed after the fact: the approval shown was for another amount', () => {
    const tampered = entries.map((entry) =>
      entry.kind === 'payment_charge'
        ? {
            ...entry,
            payload: encodePayload('payment_charge', {
              ...decodePayload('payment_charge', entry.payload),
              amount: '1',
            }),
          }
        : entry,
    );
    const result = replayJournal(tampered, {
      ids: requestIds,
      verifier: nodeEd25519Verifier,
      approvalPublicKey: paid.turns.approvals.publicKey,
    });
    expect(result.divergence?.found).toMatch(/^approval_request /);
    expect(result.divergence?.expected).toContain('\\"amount\\":\\"1\\"');
  });
});

/*
 * The payment audit over the real journal (common/payment-audit.ts, docs/payments.md
 * "Auditing payments"). The attacker rewrites the journal (and could re-sign its roots with
 * a stolen journal key) but holds no approval key: whatever they change of a payment, the
 * receipt or the approval it rests on no longer verifies, and replay fails naming it.
 */
describe('replay audits the payments of a real journal', () => {
  const options = () => ({
    ids: requestIds,
    verifier: nodeEd25519Verifier,
    approvalPublicKey: paid.turns.approvals.publicKey,
  });
  const rewrite = <
    K extends 'payment_charge' | 'payment_sent' | 'outbound_payment_receipt' | 'payment_policy',
  >(
    journal: readonly JournalEntry[],
    kind: K,
    change: (payload: ReturnType<typeof decodePayload<K>>) => ReturnType<typeof decodePayload<K>>,
  ): JournalEntry[] =>
    journal.map((entry) =>
      entry.kind === kind
        ? { ...entry, payload: encodePayload(kind, change(decodePayload(kind, entry.payload))) }
        : entry,
    );
  const receiptAt = () => entries.find((e) => e.kind === 'outbound_payment_receipt')?.position;

  it('passes the journal as written: one payment, paid, its receipt verified', () => {
    const result = replayJournal(entries, options());
    expect(result.payments.findings).toEqual([]);
    expect(result.ok).toBe(true);
    expect(result.payments.payments).toEqual([
      expect.objectContaining({
        toolCallId: 'toolu_buy',
        amount: '1000000',
        state: 'paid',
        receiptVerified: true,
        transaction: expect.stringMatching(/^0x[0-9a-f]{64}$/),
      }),
    ]);
  });

  it('fails a receipt whose amount was lowered after the fact', () => {
    const result = replayJournal(
      rewrite(entries, 'outbound_payment_receipt', (r) => ({ ...r, amount: '1' })),
      options(),
    );
    expect(result.ok).toBe(false);
    expect(result.payments.findings).toEqual([
      expect.objectContaining({
        position: receiptAt(),
        problem: expect.stringMatching(/differs from its charge .* in amount/),
      }),
    ]);
  });

  it('fails a payment rewritten whole to another amount: charge, send and receipt', () => {
    let tampered = rewrite(entries, 'payment_charge', (c) => ({ ...c, amount: '1' }));
    tampered = rewrite(tampered, 'payment_sent', (s) => ({ ...s, amount: '1' }));
    tampered = rewrite(tampered, 'outbound_payment_receipt', (r) => ({ ...r, amount: '1' }));
    const problems = replayJournal(tampered, options()).payments.findings.map((f) => f.problem);
    expect(problems).toEqual([
      expect.stringMatching(/^sent without approval: the answer at \d+ approved other fields/),
      expect.stringMatching(
        /^the receipt has a signature that does not verify with the approval key/,
      ),
    ]);
  });

  it('fails a receipt the attacker signed with their own key under the approval key id', () => {
    const forger = foreignSigner();
    const tampered = rewrite(entries, 'outbound_payment_receipt', (r) => {
      const changed = { ...r, transaction: `0x${'0'.repeat(64)}` };
      return { ...changed, signature: Buffer.from(forger(receiptSigningBytes(changed))) };
    });
    const [finding] = replayJournal(tampered, options()).payments.findings;
    expect(finding).toMatchObject({
      position: receiptAt(),
      problem: expect.stringMatching(/does not verify/),
    });
  });

  it('fails a receipt recorded twice for one charge', () => {
    const receipt = entries.find((e) => e.kind === 'outbound_payment_receipt');
    const at = entries.length;
    const doubled = [...entries, { ...(receipt as JournalEntry), position: at }];
    const result = replayJournal(doubled, options());
    expect(result.payments.findings).toEqual([
      expect.objectContaining({
        position: at,
        problem: expect.stringMatching(/a second receipt of the charge/),
      }),
    ]);
  });

  it('fails a payment over the limits in force when it was charged', () => {
    const tampered = rewrite(entries, 'payment_policy', (p) => ({
      ...p,
      limitsJson: p.limitsJson.replace('"maxPerPayment":"1000000"', '"maxPerPayment":"999999"'),
    }));
    const [finding] = replayJournal(tampered, options()).payments.findings;
    expect(finding?.problem).toMatch(
      /spend limit max_per_payment: 1000000 is over the limit of 999999/,
    );
  });
});

/** A signer with a fresh ed25519 key that is not the approval key. */
function foreignSigner(): (message: Uint8Array) => Uint8Array {
  const { privateKey } = generateKeyPairSync('ed25519');
  return (message) => sign(null, message, privateKey);
}

describe('replay audits an MPP payment as it audits x402', () => {
  it('passes the journal of a turn paid with MPP: the receipt verified', async () => {
    const mpp = await startPaidTurns({
      price: '1000000',
      logger: pino({ level: 'silent' }),
      replies: (buy) => [buy('toolu_mpp'), textReply('Bought it.')],
      protocols: 'mpp',
      seller: 'mpp',
    });
    try {
      const journal = await buyApproved(mpp, '1000000');
      const result = replayJournal(journal, {
        ids: requestIds,
        verifier: nodeEd25519Verifier,
        approvalPublicKey: mpp.turns.approvals.publicKey,
      });
      expect(result.payments.findings).toEqual([]);
      expect(result.payments.payments).toEqual([
        expect.objectContaining({ protocol: 'mpp', state: 'paid', receiptVerified: true }),
      ]);
      expect(result.ok).toBe(true);
    } finally {
      await mpp.close();
    }
  }, 90_000);
});

describe("replay of an MCP server's paid tool", () => {
  it('replays it in full from the journal alone, and audits its receipt', async () => {
    const mcp = await startPaidTurns({
      price: '1000000',
      logger: pino({ level: 'silent' }),
      replies: (buy) => [buy('toolu_mcp'), textReply('Bought it.')],
      seller: 'x402-mcp',
    });
    try {
      const journal = await buyApproved(mcp, '1000000');
      const result = replayJournal(journal, {
        ids: requestIds,
        verifier: nodeEd25519Verifier,
        approvalPublicKey: mcp.turns.approvals.publicKey,
      });
      expect(result.divergence).toBeUndefined();
      expect(result.turns.map((t) => [t.status, t.mode, t.ok])).toEqual([
        ['complete', 'full', true],
      ]);
      expect(result.payments.findings).toEqual([]);
      expect(result.payments.payments).toEqual([
        expect.objectContaining({ protocol: 'x402', state: 'paid', receiptVerified: true }),
      ]);
    } finally {
      await mcp.close();
    }
  }, 90_000);
});
