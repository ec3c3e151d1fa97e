import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import pino from 'pino';
import { requestIds } from '../../common/request-ids';
import type { JournalEntry } from '../../common/state-journal';
import { decodePayload, encodePayload } from '../../common/event-kinds';
import { startPaidTurns, type PaidTurns } from '../../test/support/paid-turns';
import { TEST_ADMIN, TEST_OWNER, textReply } from '../../test/support/real-turns';
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
  await paid.link('1000000');
  const paused = await turns.coordinator.postMessage(
    TEST_OWNER,
    { conversationId, text: 'buy the report', idempotencyKey: 'k1' },
    signal,
  );
  await turns.coordinator.answerApproval(
    TEST_ADMIN,
    { conversationId, requestId: paused.approval?.requestId ?? '', decision: 'approve' },
    signal,
  );
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
