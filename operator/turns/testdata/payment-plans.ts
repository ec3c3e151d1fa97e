import { chargeProtoOf } from '../../../common/payment-approval';
import { requestIds } from '../../../common/request-ids';
import { x402Protocol } from '../../payments/payment-protocol';
import type { RecordedPayment, RecordedStep, TurnView } from '../journal-view-types';
import type { PaymentPolicyRef } from '../journal-view-types';
import type { ChargeFacts } from '../plan-payments';
import { openedTurn } from '../view-state';

/**
 * The journal views the payment plans' table tests read (plan-payments.test.ts,
 * plan-mcp-payment.test.ts): turn t1 with the built-in `fetch` call `g`, its charge, and
 * a wallet linked with limits.
 */

export function turn(steps: RecordedStep[], payments: RecordedPayment[] = []): TurnView {
  return {
    ...openedTurn({
      turnId: 't1',
      idempotencyKey: 'k',
      text: 'buy',
      attribution: { caller: 'web:owner', participants: [], persona: 'p', session: 's' },
      receivedAtMs: 0,
      messagePosition: 0,
    }),
    steps,
    payments,
  };
}

export const fetchCall: RecordedStep = {
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
export const fetchResult: RecordedStep = {
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
export const charged: RecordedPayment = {
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
    approvalRequestId: requestIds.paymentApprovalRequestId('t1', 'g'),
  }),
};

export const URL_ = 'http://127.0.0.1:4021/report';
export const ASSET = `0x${'11'.repeat(20)}`;
export const PAY_TO = `0x${'22'.repeat(20)}`;
export const NOW = Date.parse('2026-12-07T12:00:00.000Z');

export const limits = {
  networks: ['eip155:31337'],
  assets: [
    { network: 'eip155:31337', asset: ASSET, maxPerPayment: '20000', maxPerPeriod: '25000' },
  ],
  payees: [PAY_TO],
  periodSeconds: 3600,
};
export const linked: PaymentPolicyRef = {
  position: 1,
  wallet: 'ops',
  limitsJson: JSON.stringify(limits),
  actor: 'admin:ada',
  setAtMs: 0,
};
export const facts = (over: Partial<ChargeFacts> = {}): ChargeFacts => ({
  conversationId: 'c',
  policy: undefined,
  spent: [],
  protocols: [x402Protocol()],
  nowMs: NOW,
  ...over,
});
