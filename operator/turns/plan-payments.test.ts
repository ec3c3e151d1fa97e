import { describe, expect, it } from '@jest/globals';
import type { PaymentChallenge } from '../../proto/gen/polychrome/harness/v1/harness';
import type { RecordedPayment, RecordedStep, TurnView } from './journal-view-types';
import { requestIds } from '../../common/request-ids';
import { approvalArgsSha256 } from '../../common/approval-bytes';
import {
  chargeFactsOf,
  PAYMENT_APPROVAL_TOOL,
  paymentApprovalArgsJson,
} from '../../common/payment-approval';
import {
  ApprovalDecision,
  type ApprovalRequest,
} from '../../proto/gen/polychrome/events/v1/events';
import { checkApprovalRequest } from './plan-harness-checks';
import { pendingCharges } from './effective-payment';
import {
  paymentChallengePlan,
  paymentSettlePlan,
  type ChargeFacts,
  type SettleFacts,
} from './plan-payments';
import {
  ASSET,
  charged,
  facts,
  fetchCall,
  fetchResult,
  limits,
  linked,
  NOW,
  PAY_TO,
  turn,
  URL_,
} from './testdata/payment-plans';

// The control plane's answer to a harness's payment messages, by table: what an attacker
// holding the harness would try (another turn, a call never committed, a call already
// answered, a second challenge for a charged call, a settle with no charge) is forged and
// quarantines the turn; an honest 402 is refused, named, while no wallet is linked, and
// charged within the linked wallet's limits; a settle pays only an approved, unsent charge.

/** A real x402 v2 challenge header for `amount` (the shape @x402/express sends). */
function x402Header(amount = '10000'): string {
  const offer = {
    scheme: 'exact',
    network: 'eip155:31337',
    amount,
    asset: ASSET,
    payTo: PAY_TO,
    maxTimeoutSeconds: 60,
    extra: { name: 'USD Coin', version: '2' },
  };
  const body = { x402Version: 2, resource: { url: URL_ }, accepts: [offer] };
  return Buffer.from(JSON.stringify(body)).toString('base64');
}

const challenge = (over: Partial<PaymentChallenge> = {}): PaymentChallenge => ({
  turnId: 't1',
  toolCallId: 'g',
  thread: '',
  url: URL_,
  headers: [{ name: 'payment-required', value: x402Header() }],
  mcpPaymentRequired: '',
  ...over,
});

describe('payment messages from the harness', () => {
  it('refuses an honest 402, naming why, while no wallet is linked', () => {
    expect(paymentChallengePlan(turn([fetchCall]), challenge(), facts())).toEqual({
      kind: 'answer',
      answer: {
        toolCallId: 'g',
        answer: {
          $case: 'refusal',
          value: expect.stringContaining(
            'payments are off for this conversation: no wallet is linked',
          ),
        },
      },
    });
  });

  it.each<[string, TurnView, Partial<PaymentChallenge>, string]>([
    [
      'another turn',
      turn([fetchCall]),
      { turnId: 't2' },
      'payment_challenge: the harness named turn t2, not the dispatched turn t1',
    ],
    [
      'a call never committed',
      turn([]),
      {},
      'payment_challenge: no tool_call g is committed in turn t1',
    ],
    [
      'a call that has its result',
      turn([fetchCall, fetchResult]),
      {},
      'payment_challenge: tool call g already has its result',
    ],
    [
      'a second challenge for a charged call',
      turn([fetchCall], [charged]),
      {},
      'payment_challenge: tool call g already has a committed charge',
    ],
    [
      'another URL than the call fetched',
      turn([fetchCall]),
      { url: 'http://127.0.0.1:4021/other' },
      'payment_challenge: tool call g fetched http://127.0.0.1:4021/report, not http://127.0.0.1:4021/other',
    ],
  ])('a challenge for %s is forged', (_name, view, over, reason) => {
    expect(paymentChallengePlan(view, challenge(over), facts({ policy: linked }))).toEqual({
      kind: 'forged',
      reason,
    });
  });

  it('commits the charge of a 402 within the linked limits, and answers with it', () => {
    const plan = paymentChallengePlan(turn([fetchCall]), challenge(), facts({ policy: linked }));
    expect(plan.kind).toBe('charge');
    if (plan.kind !== 'charge') return;
    expect(plan.events.map((e) => e.kind)).toEqual(['payment_charge']);
    const charge = plan.answer.answer?.$case === 'charge' ? plan.answer.answer.value : undefined;
    expect(charge).toMatchObject({
      turnId: 't1',
      toolCallId: 'g',
      protocol: 'x402',
      amount: '10000',
      asset: ASSET,
      payee: PAY_TO,
      network: 'eip155:31337',
      resourceUrl: URL_,
      expiresAt: '2026-12-07T12:01:00.000Z',
      challenge: x402Header(),
      approvalRequestId: requestIds.paymentApprovalRequestId('t1', 'g'),
    });
    expect(charge?.idempotencyKey).toMatch(/^[0-9a-f]{64}$/);
    expect(plan.events[0]?.payload).toEqual(charge);
  });

  it.each<[string, Partial<ChargeFacts>, string, string]>([
    [
      'over the per-payment cap',
      {},
      '30000',
      'spend limit max_per_payment: 30000 is over the limit of 20000',
    ],
    [
      'over the period with what was spent (from the journal)',
      {
        spent: [
          {
            network: 'eip155:31337',
            asset: ASSET,
            amount: '20000',
            at: new Date(NOW - 60_000).toISOString(),
          },
        ],
      },
      '10000',
      'spend limit max_per_period: 10000 on top of 20000 already spent',
    ],
    [
      'a control plane that pays no protocol',
      { protocols: [] },
      '10000',
      'the 402 carries no payment challenge Polychrome reads',
    ],
    [
      'an unlinked wallet',
      { policy: { ...linked, wallet: '', limitsJson: '' } },
      '10000',
      'payments are off for this conversation: no wallet is linked',
    ],
  ])('refuses a charge %s, naming it, before anyone is asked', (_name, over, amount, why) => {
    const plan = paymentChallengePlan(
      turn([fetchCall]),
      challenge({ headers: [{ name: 'payment-required', value: x402Header(amount) }] }),
      facts({ policy: linked, ...over }),
    );
    expect(plan.kind).toBe('answer');
    const answer = plan.kind === 'answer' ? plan.answer.answer : undefined;
    expect(answer?.$case === 'refusal' ? answer.value : '').toContain(why);
  });

  it('refuses a 402 of another tool than fetch: the journal holds no URL it asked for', () => {
    const other = {
      ...fetchCall,
      payload: { ...fetchCall.payload, toolName: 'mcp/buy' },
    } as RecordedStep;
    const plan = paymentChallengePlan(turn([other]), challenge(), facts({ policy: linked }));
    expect(plan).toMatchObject({
      kind: 'answer',
      answer: {
        answer: {
          $case: 'refusal',
          value:
            "only the built-in fetch tool's HTTP 402s are paid (an MCP server's tool is paid over x402's MCP transport), not mcp/buy's",
        },
      },
    });
  });
});

// A turn's second charge is counted with the first while the first waits for its card, so
// the two cannot both be shown when together they would cross a period total; a persona's
// link pays for the turns attributed to it, and only for them.
describe('charges counted while they wait, and the persona of the turn', () => {
  const secondCall = {
    ...fetchCall,
    position: 6,
    payload: { ...fetchCall.payload, toolCallId: 'h' },
  } as RecordedStep;
  const waiting = (amount: string, over: Partial<RecordedPayment> = {}): RecordedPayment => ({
    ...charged,
    charge: { ...charged.charge, amount, expiresAt: '2026-12-07T12:05:00.000Z' },
    ...over,
  });
  const denial = {
    position: 7,
    response: {
      requestId: charged.charge.approvalRequestId,
      decision: ApprovalDecision.APPROVAL_DECISION_DENIED,
    },
  };
  const secondChallenge = challenge({ toolCallId: 'h' });
  const planWith = (view: TurnView, over: Partial<ChargeFacts>) =>
    paymentChallengePlan(view, secondChallenge, facts({ policy: linked, ...over }));
  const refusalOf = (plan: ReturnType<typeof paymentChallengePlan>): string =>
    plan.kind === 'answer' && plan.answer.answer?.$case === 'refusal'
      ? plan.answer.answer.value
      : '';

  it.each<[string, () => TurnView, string | undefined]>([
    [
      'a waiting charge of 20000: 10000 more crosses the period total of 25000',
      () => turn([fetchCall, secondCall], [waiting('20000')]),
      "the conversation's spend limit max_per_period: 10000 on top of 20000",
    ],
    [
      'a waiting charge of 10000: 10000 more fits',
      () => turn([fetchCall, secondCall], [waiting('10000')]),
      undefined,
    ],
    [
      'a denied charge: it counts no more',
      () =>
        ({
          ...turn([fetchCall, secondCall], [waiting('20000')]),
          approvalResponses: [denial],
        }) as unknown as TurnView,
      undefined,
    ],
    [
      'an expired charge: it counts no more',
      () =>
        turn(
          [fetchCall, secondCall],
          [{ ...charged, charge: { ...charged.charge, amount: '20000' } }],
        ),
      undefined,
    ],
  ])('%s', (_name, view, refusal) => {
    const seen = view();
    const plan = planWith(seen, { pending: pendingCharges([seen], NOW + 1) });
    if (refusal === undefined) expect(plan.kind).toBe('charge');
    else expect(refusalOf(plan)).toContain(refusal);
  });

  const personaLink = {
    personaId: 'p',
    wallet: 'persona-wallet',
    limitsJson: JSON.stringify(limits),
    spent: [],
  };

  it('charges with only a persona link, for a turn of that persona', () => {
    const plan = paymentChallengePlan(
      turn([fetchCall]),
      challenge(),
      facts({ persona: personaLink }),
    );
    expect(plan.kind).toBe('charge');
  });

  it("never pays with another persona's link: the turn is p's, the link q's", () => {
    const plan = paymentChallengePlan(
      turn([fetchCall]),
      challenge(),
      facts({ persona: { ...personaLink, personaId: 'q' } }),
    );
    expect(refusalOf(plan)).toContain('no wallet is linked to it or to the persona of the turn');
  });

  it("counts the persona's waiting charges against its total, with its other conversations'", () => {
    const seen = turn([fetchCall, secondCall], [waiting('5000')]);
    const plan = planWith(seen, {
      policy: undefined,
      pending: pendingCharges([seen], NOW + 1),
      persona: {
        ...personaLink,
        spent: [
          {
            network: 'eip155:31337',
            asset: ASSET,
            amount: '15000',
            at: '2026-12-07T11:30:00.000Z',
          },
        ],
      },
    });
    expect(refusalOf(plan)).toContain(
      "persona p's spend limit max_per_period: 10000 on top of 20000",
    );
  });
});

describe('a request to pay', () => {
  const settle = {
    turnId: 't1',
    toolCallId: 'g',
    approvalRequestId: charged.charge.approvalRequestId,
    thread: '',
  };
  const argsSha256 = approvalArgsSha256(paymentApprovalArgsJson(chargeFactsOf(charged.charge)));
  const answered = (decision: ApprovalDecision, digest = argsSha256) => ({
    position: 5,
    response: {
      turnId: 't1',
      requestId: charged.charge.approvalRequestId,
      toolName: PAYMENT_APPROVAL_TOOL,
      argsSha256: Buffer.from(digest),
      decision,
      answeredBy: 'admin:ada',
      keyId: 'k',
      signature: Buffer.alloc(64),
      answeredAtMs: 1,
      comment: '',
      selfApproval: false,
      conversation: '',
      expiresAtMs: 0,
      approvalId: '',
    },
  });
  const approved = (
    payments: RecordedPayment[],
    response = answered(ApprovalDecision.APPROVAL_DECISION_APPROVED),
  ) =>
    ({
      ...turn([fetchCall], payments),
      approvalResponses: [response],
    }) as TurnView;
  const settleFacts: SettleFacts = { policy: linked, spent: [], nowMs: NOW - 30_000 };

  it('pays an approved, unsent charge: payment_sent first, counting its amount', () => {
    const plan = paymentSettlePlan(approved([charged]), settle, settleFacts);
    expect(plan).toMatchObject({ kind: 'pay', wallet: 'ops', charge: charged.charge });
    if (plan.kind !== 'pay') return;
    expect(plan.events).toEqual([
      {
        kind: 'payment_sent',
        payload: expect.objectContaining({
          toolCallId: 'g',
          idempotencyKey: charged.charge.idempotencyKey,
          wallet: 'ops',
          amount: '1',
          sentAtMs: settleFacts.nowMs,
        }),
      },
    ]);
  });

  it('answers a charge with a receipt from the receipt: never paid twice', () => {
    const receipt = {
      position: 7,
      payload: { responseStatus: 200, responseBody: 'q4', resolvedBy: '' },
    };
    const plan = paymentSettlePlan(
      approved([{ ...charged, sent: { position: 6, payload: {} }, receipt }] as RecordedPayment[]),
      settle,
      settleFacts,
    );
    expect(plan).toEqual({
      kind: 'answer',
      result: {
        toolCallId: 'g',
        content: 'HTTP 200\nq4',
        isError: false,
        outcomeUnknownReason: '',
      },
    });
  });

  it('a charge sent without a receipt is of unknown outcome: never sent again', () => {
    const plan = paymentSettlePlan(
      approved([{ ...charged, sent: { position: 6, payload: {} } }] as RecordedPayment[]),
      settle,
      settleFacts,
    );
    expect(plan.kind).toBe('answer');
    const result = plan.kind === 'answer' ? plan.result : undefined;
    expect(result?.outcomeUnknownReason).toContain(
      'was sent at position 6 and no receipt is recorded',
    );
  });

  it('an unlink after the approval stops the payment, saying so', () => {
    const plan = paymentSettlePlan(approved([charged]), settle, {
      ...settleFacts,
      policy: undefined,
    });
    expect(plan).toMatchObject({ kind: 'answer', result: { isError: true } });
  });

  // The limits are asked again before the send: they may have changed or expired, or
  // another payment been sent, while the person decided. Fail closed, naming the limit.
  it.each<[string, Partial<SettleFacts>, string]>([
    [
      'limits that expired while the card waited',
      {
        policy: {
          ...linked,
          limitsJson: JSON.stringify({ ...limits, expiresAt: '2026-12-07T11:59:00.000Z' }),
        },
      },
      'spend limit limits_expired',
    ],
    [
      'a charge that expired before the approval came',
      { nowMs: NOW + 1_000 },
      'spend limit charge_expired',
    ],
    [
      'a payee the limits no longer allow',
      {
        policy: {
          ...linked,
          limitsJson: JSON.stringify({ ...limits, payees: [`0x${'33'.repeat(20)}`] }),
        },
      },
      "the approved payment was not made: the conversation's spend limit payee",
    ],
    [
      'a period total another payment used up meanwhile',
      {
        spent: [
          {
            network: 'eip155:31337',
            asset: ASSET,
            amount: '25000',
            at: '2026-12-07T11:50:00.000Z',
          },
        ],
      },
      'spend limit max_per_period',
    ],
  ])('does not pay %s, and says which limit', (_name, over, says) => {
    const plan = paymentSettlePlan(approved([charged]), settle, { ...settleFacts, ...over });
    expect(plan.kind).toBe('answer');
    const result = plan.kind === 'answer' ? plan.result : undefined;
    expect(result).toMatchObject({ isError: true, outcomeUnknownReason: '' });
    expect(result?.content).toContain(says);
    expect(result?.content).toContain('Nothing was paid.');
  });

  it.each<[string, TurnView, string]>([
    ['no charge', turn([fetchCall]), 'payment_settle: tool call g has no committed charge to pay'],
    [
      'a charge with no approval',
      turn([fetchCall], [charged]),
      'has no recorded approval of exactly its fields',
    ],
    [
      'a charge whose answer is a denial',
      approved([charged], answered(ApprovalDecision.APPROVAL_DECISION_DENIED)),
      'has no recorded approval of exactly its fields',
    ],
    [
      'a charge approved for other fields',
      approved(
        [charged],
        answered(ApprovalDecision.APPROVAL_DECISION_APPROVED, approvalArgsSha256('{}')),
      ),
      'has no recorded approval of exactly its fields',
    ],
    ['a call never committed', turn([]), 'payment_settle: no tool_call g is committed in turn t1'],
  ])('a settle for %s is forged', (_name, view, reason) => {
    const plan = paymentSettlePlan(view, settle, settleFacts);
    expect(plan.kind).toBe('forged');
    expect(plan.kind === 'forged' ? plan.reason : '').toContain(reason);
  });
});

describe('the approval request a harness pauses with for a payment', () => {
  const conversation = {
    apiVersion: 'polychrome.dev/v1alpha1',
    kind: 'Conversation',
    metadata: { name: 'c', namespace: 'n', uid: 'c' },
    spec: { owner: 'web:owner' },
  } as const;
  const argsJson = paymentApprovalArgsJson(chargeFactsOf(charged.charge));
  const request = (over: Partial<ApprovalRequest> = {}): ApprovalRequest => ({
    turnId: 't1',
    requestId: charged.charge.approvalRequestId,
    toolCallId: 'g',
    toolName: PAYMENT_APPROVAL_TOOL,
    argsJson,
    argsSha256: Buffer.from(approvalArgsSha256(argsJson)),
    reason: 'pay',
    requiredApprover: '',
    requestedAtMs: 0,
    ...over,
  });
  const check = (view: TurnView, asked: ApprovalRequest) =>
    checkApprovalRequest({ turn: view, conversation }, asked);

  it('is committed when it shows exactly the committed charge, under its payment id', () => {
    expect(check(turn([fetchCall], [charged]), request())).toBeUndefined();
  });

  it.each<[string, TurnView, Partial<ApprovalRequest>, string]>([
    ['no committed charge', turn([fetchCall]), {}, 'which has no committed charge'],
    [
      'other fields than the charge (a smaller amount shown)',
      turn([fetchCall], [charged]),
      (() => {
        const shown = paymentApprovalArgsJson({ ...chargeFactsOf(charged.charge), amount: '0' });
        return { argsJson: shown, argsSha256: Buffer.from(approvalArgsSha256(shown)) };
      })(),
      'shows other fields than the committed charge of tool call g',
    ],
    [
      "the call's own approval id",
      turn([fetchCall], [charged]),
      { requestId: requestIds.approvalRequestId('t1', 'g') },
      `should have id ${charged.charge.approvalRequestId}`,
    ],
  ])('is forged with %s', (_name, view, over, why) => {
    expect(check(view, request(over))).toContain(why);
  });
});
