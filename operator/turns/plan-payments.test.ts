import { describe, expect, it } from '@jest/globals';
import { NEW_TURN } from '../../common/turn-standing';
import { chargeProtoOf } from '../../common/payment-approval';
import type { PaymentChallenge } from '../../proto/gen/polychrome/harness/v1/harness';
import type { RecordedPayment, RecordedStep, TurnView } from './journal-view-types';
import { paymentChallengePlan, paymentSettlePlan } from './plan-payments';

// The control plane's answer to a harness's payment messages, by table: what an attacker
// holding the harness would try (another turn, a call never committed, a call already
// answered, a second challenge for a charged call, a settle with no charge) is forged and
// quarantines the turn; an honest 402 is refused, named, while no wallet is linked.

function turn(steps: RecordedStep[], payments: RecordedPayment[] = []): TurnView {
  return {
    turnId: 't1',
    idempotencyKey: 'k',
    text: 'buy',
    attribution: { caller: 'web:owner', participants: [], persona: 'p', session: 's' },
    receivedAtMs: 0,
    messagePosition: 0,
    directive: undefined,
    dispatches: [],
    steps,
    approvalRequests: [],
    payments,
    approvalResponses: [],
    questionRequests: [],
    questionResponses: [],
    cancellations: [],
    expiries: [],
    terminal: undefined,
    resolutions: [],
    standingFold: NEW_TURN,
  };
}

const fetchCall: RecordedStep = {
  kind: 'tool_call',
  position: 3,
  payload: {
    turnId: 't1',
    step: 1,
    toolCallId: 'g',
    toolName: 'fetch',
    argsJson: '{"url":"http://127.0.0.1:4021/report"}',
    effect: 1,
    approvalRequestId: '',
    agent: '',
    thread: '',
    depth: 0,
  },
};
const fetchResult: RecordedStep = {
  kind: 'tool_result',
  position: 4,
  payload: {
    turnId: 't1',
    toolCallId: 'g',
    content: 'x',
    isError: false,
    denied: false,
    thread: '',
    delegate: '',
  },
};
const charged: RecordedPayment = {
  position: 4,
  charge: chargeProtoOf({
    turnId: 't1',
    toolCallId: 'g',
    thread: '',
    protocol: 'x402',
    challengeSha256: 'ab'.repeat(32),
    amount: '1',
    asset: `0x${'11'.repeat(20)}`,
    network: 'eip155:31337',
    payee: `0x${'22'.repeat(20)}`,
    resourceUrl: 'http://127.0.0.1:4021/report',
    expiresAt: '2026-12-07T12:00:00.000Z',
    idempotencyKey: 'cd'.repeat(32),
    approvalRequestId: 'apr_x',
  }),
};

const challenge = (over: Partial<PaymentChallenge> = {}): PaymentChallenge => ({
  turnId: 't1',
  toolCallId: 'g',
  thread: '',
  url: 'http://127.0.0.1:4021/report',
  headers: [{ name: 'payment-required', value: 'eyJ4NDAyVmVyc2lvbiI6Mn0=' }],
  ...over,
});

describe('payment messages from the harness', () => {
  it('refuses an honest 402, naming why, while no wallet is linked', () => {
    expect(paymentChallengePlan(turn([fetchCall]), challenge())).toEqual({
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
  ])('a challenge for %s is forged', (_name, view, over, reason) => {
    expect(paymentChallengePlan(view, challenge(over))).toEqual({ kind: 'forged', reason });
  });

  it.each<[string, TurnView, string]>([
    ['no charge', turn([fetchCall]), 'payment_settle: tool call g has no committed charge to pay'],
    [
      'a charge this control plane cannot pay',
      turn([fetchCall], [charged]),
      'payment_settle: tool call g names a charge this control plane cannot pay',
    ],
    ['a call never committed', turn([]), 'payment_settle: no tool_call g is committed in turn t1'],
  ])('a settle for %s is forged', (_name, view, reason) => {
    const settle = { turnId: 't1', toolCallId: 'g', approvalRequestId: 'apr_x', thread: '' };
    expect(paymentSettlePlan(view, settle)).toEqual({ kind: 'forged', reason });
  });
});
