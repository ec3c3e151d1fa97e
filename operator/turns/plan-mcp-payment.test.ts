import { describe, expect, it } from '@jest/globals';
import { createHash } from 'node:crypto';
import { requestIds } from '../../common/request-ids';
import type { PaymentCharge, PaymentSent } from '../../proto/gen/polychrome/events/v1/events';
import type {
  McpPaidResult,
  PaymentChallenge,
} from '../../proto/gen/polychrome/harness/v1/harness';
import { mppProtocol } from '../payments/payment-protocol';
import type { RecordedPayment, RecordedStep } from './journal-view-types';
import { mcpPaidResultPlan } from './plan-mcp-payment';
import { paymentChallengePlan } from './plan-payments';
import { ASSET, charged, facts, fetchCall, linked, PAY_TO, turn } from './testdata/payment-plans';

// An MCP server's paid tool, by table (docs/payments.md, "A paid MCP tool"): the challenge
// its result carried is charged for exactly the committed call; what a harness holding the
// sandbox would try instead (another call's resource, a built-in tool's, headers smuggled
// in, a result it was handed no payment for, for a charge never sent or already received)
// is forged and quarantines the turn.

const mcpCall: RecordedStep = {
  ...fetchCall,
  payload: { ...fetchCall.payload, toolCallId: 'm', toolName: 'shop/report', argsJson: '{}' },
} as RecordedStep;

const paymentRequired = JSON.stringify({
  x402Version: 2,
  resource: { url: 'mcp://tool/report' },
  accepts: [
    {
      scheme: 'exact',
      network: 'eip155:31337',
      amount: '10000',
      asset: ASSET,
      payTo: PAY_TO,
      maxTimeoutSeconds: 60,
      extra: { name: 'USD Coin', version: '2' },
    },
  ],
});

const challenge = (over: Partial<PaymentChallenge> = {}): PaymentChallenge => ({
  turnId: 't1',
  toolCallId: 'm',
  thread: '',
  url: 'mcp://shop/report',
  headers: [],
  mcpPaymentRequired: paymentRequired,
  ...over,
});

describe("an MCP tool's challenge", () => {
  it('is charged for exactly the committed call, bound by the digest of the JSON as relayed', () => {
    const plan = paymentChallengePlan(turn([mcpCall]), challenge(), facts({ policy: linked }));
    expect(plan.kind).toBe('charge');
    const answer = plan.kind === 'charge' ? plan.answer.answer : undefined;
    expect(answer?.$case === 'charge' ? answer.value : undefined).toMatchObject({
      toolCallId: 'm',
      protocol: 'x402',
      amount: '10000',
      payee: PAY_TO,
      resourceUrl: 'mcp://shop/report',
      challenge: paymentRequired,
      challengeSha256: createHash('sha256').update(paymentRequired).digest(),
      approvalRequestId: requestIds.paymentApprovalRequestId('t1', 'm'),
    });
  });

  it.each<[string, RecordedStep, Partial<PaymentChallenge>, string]>([
    [
      "another call's resource",
      mcpCall,
      { url: 'mcp://shop/other' },
      'payment_challenge: tool call m is mcp://shop/report, not mcp://shop/other',
    ],
    [
      'headers beside the MCP challenge',
      mcpCall,
      { headers: [{ name: 'payment-required', value: 'e30=' }] },
      "payment_challenge: tool call m's MCP challenge came with HTTP headers",
    ],
    [
      'the built-in fetch call',
      { ...fetchCall, payload: { ...fetchCall.payload, toolCallId: 'm' } } as RecordedStep,
      {},
      "payment_challenge: tool call m (fetch) is not an MCP server's tool, yet its challenge came as one's result",
    ],
  ])('for %s is forged', (_name, step, over, reason) => {
    expect(paymentChallengePlan(turn([step]), challenge(over), facts({ policy: linked }))).toEqual({
      kind: 'forged',
      reason,
    });
  });

  it("is refused, named, by a control plane whose MCP transports do not read it (x402's to one paying MPP alone)", () => {
    const plan = paymentChallengePlan(
      turn([mcpCall]),
      challenge(),
      facts({ policy: linked, protocols: [mppProtocol(() => undefined)] }),
    );
    expect(plan).toMatchObject({
      kind: 'answer',
      answer: {
        answer: {
          $case: 'refusal',
          value: expect.stringContaining(
            'no MCP payment transport of this control plane reads (it pays over MCP: mpp)',
          ),
        },
      },
    });
  });
});

describe("a paid MCP tool's relayed result", () => {
  const mcpCharge: PaymentCharge = {
    ...charged.charge,
    toolCallId: 'm',
    resourceUrl: 'mcp://shop/report',
  };
  const sent = { position: 6, payload: { wallet: 'ops' } as PaymentSent };
  const receipt = { position: 7, payload: {} } as RecordedPayment['receipt'];
  const result: McpPaidResult = {
    turnId: 't1',
    toolCallId: 'm',
    thread: '',
    content: 'paid',
    isError: false,
    paymentResponse: '{}',
    paymentNotTaken: false,
    outcomeUnknownReason: '',
  };

  it('is recorded for the charge it was handed the payment of, under the wallet that signed', () => {
    const view = turn([mcpCall], [{ position: 4, charge: mcpCharge, sent }]);
    expect(mcpPaidResultPlan(view, result, true)).toEqual({
      kind: 'record',
      charge: mcpCharge,
      wallet: 'ops',
    });
  });

  it.each<[string, RecordedPayment[], boolean, string]>([
    [
      'handed no payment in this call',
      [{ position: 4, charge: mcpCharge, sent }],
      false,
      'tool call m was handed no payment in this call',
    ],
    ['with no charge', [], true, 'tool call m has no committed charge of an MCP tool'],
    [
      "for a fetch call's charge",
      [{ ...charged, charge: { ...charged.charge, toolCallId: 'm' }, sent }],
      true,
      'tool call m has no committed charge of an MCP tool',
    ],
    [
      'for a charge never sent',
      [{ position: 4, charge: mcpCharge }],
      true,
      'the charge of tool call m was never sent',
    ],
    [
      'for a charge with its receipt',
      [{ position: 4, charge: mcpCharge, sent, receipt }],
      true,
      'the charge of tool call m already has its receipt',
    ],
  ])('%s is forged', (_name, payments, handed, why) => {
    expect(mcpPaidResultPlan(turn([mcpCall], payments), result, handed)).toEqual({
      kind: 'forged',
      reason: `mcp_paid_result: ${why}`,
    });
  });
});
