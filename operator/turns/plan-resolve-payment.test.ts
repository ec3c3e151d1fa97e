import { describe, expect, it } from '@jest/globals';
import { generateKeyPairSync, verify } from 'node:crypto';
import { payloadCodecs, type EventKind, type EventPayloads } from '../../common/event-kinds';
import { chargeProtoOf } from '../../common/payment-approval';
import { receiptSigningBytes } from '../../common/payment-receipt';
import type { JournalEntry } from '../../common/state-journal';
import {
  ResolveDecision,
  ToolEffect,
  type OutboundPaymentReceipt,
} from '../../proto/gen/polychrome/events/v1/events';
import { conversation as conversationFixture, UID } from '../controller/snapshot-fixtures';
import { ApprovalSigner } from './approval-signer';
import { foldJournal } from './journal-view';
import { planResolve, type ResolveInput } from './plan-resolve';
import { AUTHORIZATION_MARGIN_MS } from './plan-resolve-payment';
import { MPP_CREDENTIAL_SLACK_MS } from '../payments/charge';
import {
  gatherPayments,
  paymentEventsOf,
  paymentStateOf,
  PaymentState,
} from '../../common/journal-payments';
import type { Caller, ResolveTurn } from './turn-service';

// An admin settles a turn quarantined on a payment sent without a receipt
// (docs/payments.md, "Exactly once"), by table, on journals folded as the coordinator
// folds them: "ran" with the transaction settles it, and the batch records the admin's
// transaction in a receipt signed with the approval key, naming them; "did_not_run" only
// once the payment's authorization can no longer move money.

const ADMIN = 'web:admin';
const PAYER = '0x00000000000000000000000000000000000000AA';
const TX = `0x${'Ab'.repeat(32)}`;
const KEY = 'f'.repeat(64);

type E = { kind: string; payload: Uint8Array };
function ev<K extends EventKind>(kind: K, payload: Partial<EventPayloads[K]>): E {
  const codec = payloadCodecs[kind];
  return { kind, payload: codec.encode(codec.fromPartial(payload)).finish() };
}

const attribution = { caller: 'web:owner', participants: [], persona: 'p', session: '' };
const charge = chargeProtoOf({
  turnId: 't1',
  toolCallId: 'g',
  thread: '',
  protocol: 'x402',
  challengeSha256: 'ab'.repeat(32),
  amount: '1000',
  asset: '0x00000000000000000000000000000000000000bb',
  network: 'eip155:31337',
  payee: '0x00000000000000000000000000000000000000cc',
  resourceUrl: 'http://127.0.0.1:4021/paid',
  expiresAt: '2026-12-07T10:00:00.000Z',
  idempotencyKey: KEY,
  approvalRequestId: 'apr_1',
});
/** A turn whose paid `fetch` was sent and never got a receipt, quarantined on it. */
const paidButLost: E[] = [
  ev('message_received', { turnId: 't1', idempotencyKey: 'k', text: 'buy', attribution }),
  ev('turn_dispatched', { turnId: 't1', attempt: 1, attribution }),
  ev('tool_call', {
    turnId: 't1',
    toolCallId: 'g',
    toolName: 'fetch',
    argsJson: '{"url":"http://127.0.0.1:4021/paid"}',
    effect: ToolEffect.TOOL_EFFECT_PURE,
  }),
  ev('payment_charge', charge),
  ev('payment_sent', {
    turnId: 't1',
    toolCallId: 'g',
    idempotencyKey: KEY,
    approvalRequestId: 'apr_1',
    wallet: 'ops',
    network: charge.network,
    asset: charge.asset,
    amount: charge.amount,
  }),
  ev('turn_ambiguous', { turnId: 't1', toolCallId: 'g', reason: `charge ${KEY}: unknown` }),
];

const { privateKey, publicKey } = generateKeyPairSync('ed25519');
const signer = ApprovalSigner.fromPem(
  privateKey.export({ format: 'pem', type: 'pkcs8' }).toString(),
);
const admin: Caller = {
  identity: ADMIN,
  identities: [ADMIN],
  personaId: 'p-admin',
  roles: ['admin'],
  sessionId: 's',
};

function input(decision: ResolveTurn['decision'], events: E[] = paidButLost): ResolveInput {
  return {
    view: foldJournal(events.map((e, position): JournalEntry => ({ position, ...e }))),
    conversation: conversationFixture(),
    caller: admin,
    request: { conversationId: UID, turnId: 't1', actor: ADMIN, decision },
    nowMs: 9_000,
    payment: { payer: PAYER, signReceipt: (r) => signer.signReceipt(r) },
  };
}

function refusal(plan: ReturnType<typeof planResolve>): { code: string; message: string } {
  if (plan.kind !== 'refuse') throw new Error('expected a refusal');
  return { code: plan.error.code, message: plan.error.message };
}

describe('resolving a turn quarantined on a payment', () => {
  it('records the transaction: turn_resolved (ran), a receipt signed with the approval key naming the admin, the call’s result', () => {
    const plan = planResolve(input({ kind: 'ran', result: undefined, transaction: TX }));
    if (plan.kind !== 'resolve') throw new Error(refusal(plan).message);
    expect(plan.events.map((e) => e.kind)).toEqual([
      'turn_resolved',
      'outbound_payment_receipt',
      'tool_result',
    ]);
    const [resolved, receiptEvent, result] = plan.events;
    const receipt = receiptEvent?.payload as OutboundPaymentReceipt;
    expect(receipt).toMatchObject({
      transaction: TX.toLowerCase(),
      payer: PAYER.toLowerCase(),
      resolvedBy: ADMIN,
      idempotencyKey: KEY,
      approvalRequestId: 'apr_1',
      amount: '1000',
      wallet: 'ops',
      upstreamReceipt: '',
      responseStatus: 0,
      conversationId: UID,
      settledAtMs: 9_000,
    });
    expect(verify(null, receiptSigningBytes(receipt), publicKey, receipt.signature)).toBe(true);
    // The admin's name is bound: the same receipt naming anyone else does not verify.
    const other = { ...receipt, resolvedBy: 'web:other' };
    expect(verify(null, receiptSigningBytes(other), publicKey, receipt.signature)).toBe(false);
    expect(resolved?.payload).toMatchObject({
      decision: ResolveDecision.RESOLVE_DECISION_RAN,
      toolCallId: 'g',
      actor: ADMIN,
      quarantinePosition: 5,
    });
    expect(result?.payload).toMatchObject({ toolCallId: 'g', isError: true });
    const text = String((result?.payload as { content: string }).content);
    expect(text).toContain(`in transaction ${TX.toLowerCase()}`);
    expect(text).toContain('Do not pay for this resource again');
  });

  it.each([
    ['ran with the result unknown', { kind: 'ran', result: undefined } as const],
    ['ran with a result', { kind: 'ran', result: 'it ran' } as const],
  ])('refuses %s with 409 naming the charge and what to give', (_name, decision) => {
    const refused = refusal(planResolve(input(decision)));
    expect(refused.code).toBe('conflict');
    expect(refused.message).toContain(`charge ${KEY}`);
    expect(refused.message).toContain('with the transaction that paid it');
  });

  it.each([
    ['too short', '0x12'],
    ['not hex', `0x${'zz'.repeat(32)}`],
    ['no 0x', 'ab'.repeat(32)],
  ])('refuses a transaction that is %s (400, field transaction)', (_name, transaction) => {
    const plan = planResolve(input({ kind: 'ran', result: undefined, transaction }));
    expect(refusal(plan).code).toBe('invalid_argument');
    if (plan.kind === 'refuse') expect(plan.error.details).toEqual({ field: 'transaction' });
  });

  it('refuses a transaction for a quarantine that is not a payment’s (409)', () => {
    const sideEffect: E[] = [
      ...paidButLost.slice(0, 2),
      ev('tool_call', { turnId: 't1', toolCallId: 's', toolName: 'ops/refund', effect: 2 }),
      ev('turn_ambiguous', { turnId: 't1', toolCallId: 's', reason: 'no result' }),
    ];
    const refused = refusal(
      planResolve(input({ kind: 'ran', result: undefined, transaction: TX }, sideEffect)),
    );
    expect(refused.code).toBe('conflict');
    expect(refused.message).toContain('not quarantined on a payment sent without a receipt');
  });
});

describe('resolving a payment that moved no money', () => {
  const expired = Date.parse(charge.expiresAt) + AUTHORIZATION_MARGIN_MS;
  const at = (nowMs: number, events: E[] = paidButLost): ResolveInput => ({
    ...input({ kind: 'did_not_run' }, events),
    nowMs,
  });

  it('refuses it (409) while the signed authorization may still move money, saying until when', () => {
    const refused = refusal(planResolve(at(expired - 1)));
    expect(refused.code).toBe('conflict');
    expect(refused.message).toContain(`charge ${KEY}`);
    expect(refused.message).toContain(`until ${new Date(expired).toISOString()}`);
  });

  const withProtocol = (protocol: string): E[] =>
    paidButLost.map((e) =>
      e.kind === 'payment_charge' ? ev('payment_charge', { ...charge, protocol }) : e,
    );

  it("waits for an MPP payment's credential five minutes longer: mppx may sign it valid that long past the charge", () => {
    const mppExpired = expired + MPP_CREDENTIAL_SLACK_MS;
    const refused = refusal(planResolve(at(mppExpired - 1, withProtocol('mpp'))));
    expect(refused.code).toBe('conflict');
    expect(refused.message).toContain(`until ${new Date(mppExpired).toISOString()}`);
    const plan = planResolve(at(mppExpired, withProtocol('mpp')));
    expect(plan.kind).toBe('resolve');
  });

  it("refuses a payment of a protocol whose authorization's lifetime is not known here (409)", () => {
    const refused = refusal(planResolve(at(expired + 3_600_000, withProtocol('lightning'))));
    expect(refused.code).toBe('conflict');
    expect(refused.message).toContain('resolve it "ran" with the transaction if it paid');
  });

  it('records it not made once expired: no receipt, the call told nothing was paid, the audit says not_made', () => {
    const plan = planResolve(at(expired));
    if (plan.kind !== 'resolve') throw new Error(`expected a resolve, got ${plan.kind}`);
    expect(plan.events.map((e) => e.kind)).toEqual(['turn_resolved', 'tool_result']);
    expect(plan.events[0]?.payload).toMatchObject({
      decision: ResolveDecision.RESOLVE_DECISION_DID_NOT_RUN,
      toolCallId: 'g',
      actor: ADMIN,
      quarantinePosition: 5,
    });
    const result = plan.events[1]?.payload as { content: string; isError: boolean };
    expect(result.isError).toBe(true);
    expect(result.content).toContain('was not made');
    expect(result.content).toContain('Nothing was paid');
    const journal = [...paidButLost, ...plan.events.map((e) => ev(e.kind, e.payload as never))];
    const { events } = paymentEventsOf(journal.map((e, position) => ({ position, ...e })));
    const [recorded] = gatherPayments(events).charges;
    expect(recorded === undefined ? undefined : paymentStateOf(recorded)).toBe(
      PaymentState.NotMade,
    );
    const unresolved = gatherPayments(
      paymentEventsOf(paidButLost.map((e, position) => ({ position, ...e }))).events,
    ).charges[0];
    expect(unresolved === undefined ? undefined : paymentStateOf(unresolved)).toBe(
      PaymentState.Unknown,
    );
  });
});
