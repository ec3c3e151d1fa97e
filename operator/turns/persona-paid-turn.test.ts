/**
 * A persona's wallet and limits end to end (docs/payments.md, "A persona's wallet and
 * limits"), every part real but the cluster: the real coordinator over the real journal
 * store, the real harness over mutual-TLS gRPC with `fetch`, an x402 seller settling on
 * anvil, and the state plane's Records service over mutual TLS holding the persona's policy
 * and totals. Only the persona has a link (no conversation does): its turn pays with the
 * persona's wallet; a second conversation of the same persona, on a control plane started
 * afresh (a new coordinator, journal and harness over the same chain and records), is
 * refused on the persona's period total before any card is shown: the totals live in the
 * records, not in the process.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import pino from 'pino';
import { decodePayload, type EventKind } from '../../common/event-kinds';
import { PAYMENT_APPROVAL_TOOL } from '../../common/payment-approval';
import { readyStatus } from '../../test/support/in-memory-conversations';
import { PAID_WALLET, startPaidTurns, type PaidTurns } from '../../test/support/paid-turns';
import { fixtureSpendLimits, type PaidFixture } from '../../test/support/payments/paid-fixture';
import { startTestRecords, type TestRecords } from '../../test/support/records-server';
import { TEST_ADMIN, textReply } from '../../test/support/real-turns';
import { PersonaPaymentPolicies } from './persona-payment-policy';
import type { Caller } from './turn-service';

const PRICE = '1250000';
const BUYER_IDENTITY = 'web:buyer';

let records: TestRecords;
let buyer: Caller;

beforeAll(async () => {
  records = await startTestRecords();
  const personaId = await records.persona(BUYER_IDENTITY);
  buyer = {
    identity: BUYER_IDENTITY,
    identities: [BUYER_IDENTITY],
    personaId,
    roles: ['member'],
    sessionId: 's-buyer',
  };
}, 60_000);

afterAll(async () => {
  await records.close();
});

/** A paying control plane whose coordinator reads the persona records; one buyer's conversation per call of `conversation()`. */
async function startPersonaTurns(
  fixture?: PaidFixture,
): Promise<PaidTurns & { conversation(): string }> {
  const paid = await startPaidTurns({
    ...(fixture === undefined ? {} : { fixture }),
    price: PRICE,
    logger: pino({ level: 'silent' }),
    coordinator: { personaPayments: records.records },
    replies: (buy) => [buy('toolu_1'), textReply('Done.')],
  });
  return {
    ...paid,
    conversation: () =>
      paid.turns.conversations.add(
        { owner: BUYER_IDENTITY },
        { status: readyStatus(paid.turns.harness.endpoint) },
      ).metadata.uid ?? '',
  };
}

async function entries(paid: PaidTurns, conversationId: string) {
  return (await paid.turns.journal.entries(`conv-${conversationId}`)).map((entry) => ({
    kind: entry.kind,
    payload: decodePayload(entry.kind as EventKind, entry.payload) as unknown as Record<
      string,
      unknown
    >,
  }));
}

const refusalOf = async (paid: PaidTurns, conversationId: string, toolCallId: string) =>
  (await entries(paid, conversationId)).find(
    (e) => e.kind === 'tool_result' && e.payload.toolCallId === toolCallId,
  )?.payload;

describe("a persona's link pays its turns, and its period total holds across conversations and restarts", () => {
  let first: PaidTurns & { conversation(): string };

  beforeAll(async () => {
    first = await startPersonaTurns();
    // One payment of PRICE an hour, set by an admin (not the buyer) through the real records.
    const policies = new PersonaPaymentPolicies(records.records);
    await policies.set(
      TEST_ADMIN,
      {
        personaId: buyer.personaId,
        actor: TEST_ADMIN.identity,
        wallet: PAID_WALLET,
        limits: fixtureSpendLimits(first.fixture, PRICE, PRICE),
        reason: 'the buyer may spend one report an hour',
      },
      AbortSignal.timeout(10_000),
    );
  }, 90_000);

  afterAll(async () => {
    await first.close();
  });

  it("pays with the persona's wallet where the conversation links none, once on chain", async () => {
    const signal = AbortSignal.timeout(60_000);
    const conversationId = first.conversation();
    const payerBefore = await first.fixture.token.balanceOf(first.fixture.payer);
    const paused = await first.turns.coordinator.postMessage(
      buyer,
      { conversationId, text: 'buy the report', idempotencyKey: 'k-1' },
      signal,
    );
    expect(paused.approval).toMatchObject({
      toolName: PAYMENT_APPROVAL_TOOL,
      toolCallId: 'toolu_1',
    });
    const done = await first.turns.coordinator.answerApproval(
      TEST_ADMIN,
      { conversationId, requestId: paused.approval?.requestId ?? '', decision: 'approve' },
      signal,
    );
    expect(done).toMatchObject({ status: 'complete', reply: 'Done.' });
    const journal = await entries(first, conversationId);
    expect(journal.some((e) => e.kind === 'payment_policy')).toBe(false);
    expect(journal.find((e) => e.kind === 'payment_sent')?.payload).toMatchObject({
      wallet: PAID_WALLET,
      amount: PRICE,
    });
    expect(await first.fixture.token.balanceOf(first.fixture.payer)).toBe(
      payerBefore - BigInt(PRICE),
    );
    // Counted against the persona in the records, for its other conversations.
    const spends = await records.records.listPersonaSpends(buyer.personaId, 0);
    expect(spends.map((s) => [s.conversationId, s.amount])).toEqual([[conversationId, PRICE]]);
  }, 90_000);

  it("refuses a second conversation's charge on the persona's period total, on a control plane started afresh", async () => {
    // A new coordinator, journal and harness over the same chain and records: nothing of
    // the first payment is in this process, only in the records.
    const second = await startPersonaTurns(first.fixture);
    try {
      const conversationId = second.conversation();
      const reply = await second.turns.coordinator.postMessage(
        buyer,
        { conversationId, text: 'buy it again', idempotencyKey: 'k-2' },
        AbortSignal.timeout(60_000),
      );
      expect(reply).toMatchObject({ status: 'complete', reply: 'Done.' });
      const result = await refusalOf(second, conversationId, 'toolu_1');
      expect(result).toMatchObject({ isError: true });
      expect(String(result?.content)).toContain(
        `persona ${buyer.personaId}'s spend limit max_per_period: ${PRICE} on top of ${PRICE}`,
      );
      const journal = await entries(second, conversationId);
      expect(journal.some((e) => e.kind === 'payment_charge')).toBe(false);
      expect(first.fixture.x402.settles()).toEqual({ total: 1, succeeded: 1 });
    } finally {
      await second.close();
    }
  }, 120_000);
});
