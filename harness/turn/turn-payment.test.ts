import { describe, expect, it } from '@jest/globals';
import { approvalArgsSha256 } from '../../common/approval-bytes';
import {
  PAYMENT_APPROVAL_TOOL,
  paymentApprovalArgsJson,
  type ChargeFacts,
} from '../../common/payment-approval';
import { requestIds } from '../../common/request-ids';
import { nodeEd25519Signer } from '../crypto/node-ed25519';
import { signApproval } from './approval-token';
import type { PaymentRequired } from './ports/tool-port';
import { approvalKey, committedSteps, modelReply, runTurn, testTool } from './testdata/machine-run';
import type { StepResult, TurnEffect, TurnEvent, TurnInput } from './turn-machine';
import type { ApprovalAnswer } from './turn-records';

// A paid call in the pure turn machine (docs/payments.md, "A paid call in a turn"): a tool
// meets a 402, its challenge goes to the control plane, the charge waits for a signed
// approval bound to exactly its fields, and only then does the control plane pay. Every
// way out is here: refused, denied, forged, answered for another charge, paid, paid with
// its answer lost, resumed after a crash at each point.

const input: TurnInput = {
  turnId: 't1',
  history: [],
  userMessage: 'buy the report',
  tools: [testTool('http_get', 'pure'), testTool('add', 'pure')],
  budget: { directive: 3 },
  recordedSteps: [],
  approvalAnswers: [],
  questionAnswers: [],
};

const challenge: PaymentRequired = {
  url: 'http://127.0.0.1:4021/report',
  headers: [
    ['content-type', 'application/json'],
    ['payment-required', 'eyJ4NDAyVmVyc2lvbiI6Mn0='],
  ],
};

const charge: ChargeFacts = {
  turnId: 't1',
  toolCallId: 'g',
  thread: '',
  protocol: 'x402',
  challengeSha256: 'ab'.repeat(32),
  amount: '10000',
  asset: `0x${'11'.repeat(20)}`,
  network: 'eip155:31337',
  payee: `0x${'22'.repeat(20)}`,
  resourceUrl: challenge.url,
  expiresAt: '2026-12-07T12:05:00.000Z',
  idempotencyKey: 'cd'.repeat(32),
  approvalRequestId: requestIds.paymentApprovalRequestId('t1', 'g'),
};

const getReport = modelReply(20, {
  type: 'tool_use',
  id: 'g',
  name: 'http_get',
  input: { url: challenge.url },
});
const met402: TurnEvent = {
  type: 'tool_finished',
  toolCallId: 'g',
  outcome: { content: '', isError: false, paymentRequired: challenge },
};
const charged: TurnEvent = { type: 'charge_answered', toolCallId: 'g', answer: { charge } };
const paid: TurnEvent = {
  type: 'trusted_tool_answered',
  toolCallId: 'g',
  outcome: { content: '{"report":"q4"}', isError: false },
};

function paymentAnswer(
  decision: 'approved' | 'denied',
  overrides: Partial<ChargeFacts> = {},
  signer = approvalKey,
): ApprovalAnswer {
  const binding = {
    turnId: 't1',
    requestId: charge.approvalRequestId,
    toolName: PAYMENT_APPROVAL_TOOL,
    argsSha256: approvalArgsSha256(paymentApprovalArgsJson({ ...charge, ...overrides })),
    decision,
  };
  return {
    ...binding,
    ...signApproval(binding, signer),
    answeredBy: 'alice',
    answeredAtMs: 30,
    comment: '',
  };
}

function brief(effect: TurnEffect): string {
  switch (effect.type) {
    case 'commit_step':
      return `commit ${effect.step.kind}`;
    case 'call_model':
      return `call_model ${effect.step}`;
    case 'call_tool':
    case 'call_trusted_tool':
    case 'request_charge':
    case 'settle_payment':
      return `${effect.type} ${effect.call.toolCallId}`;
    case 'pause_for_approval':
      return `pause_for_approval ${effect.request.toolName}${effect.rejection === undefined ? '' : ` (${effect.rejection})`}`;
    case 'ambiguous':
      return `ambiguous: ${effect.reason}`;
    case 'finish':
      return `finish ${effect.text}`;
    default:
      return effect.type;
  }
}

const briefs = (results: readonly StepResult[]): string[][] =>
  results.map((r) => r.effects.map(brief));

const toolResultOf = (results: readonly StepResult[]) =>
  committedSteps(results).find((s) => s.kind === 'tool_result')?.record;

describe('a paid call in the turn machine', () => {
  it('402 → charge → approval of exactly the charge → the control plane pays → the reply', () => {
    const results = runTurn(
      input,
      getReport,
      met402,
      charged,
      { type: 'approval_answered', answer: paymentAnswer('approved') },
      paid,
      modelReply(40, { type: 'text', text: 'Q4 is up.' }),
    );
    expect(briefs(results)).toEqual([
      ['call_model 1'],
      ['commit model_call', 'commit tool_call', 'call_tool g'],
      ['request_charge g'],
      ['pause_for_approval __payment'],
      ['settle_payment g'],
      ['commit tool_result', 'call_model 2'],
      ['commit model_call', 'finish Q4 is up.'],
    ]);
    const request = results[3]?.effects[0];
    expect(request).toMatchObject({
      type: 'pause_for_approval',
      request: {
        requestId: charge.approvalRequestId,
        toolCallId: 'g',
        toolName: PAYMENT_APPROVAL_TOOL,
        argsJson: paymentApprovalArgsJson(charge),
      },
    });
    // The card's reason names every field a person approves.
    const reason = request?.type === 'pause_for_approval' ? request.request.reason : '';
    for (const field of [
      charge.amount,
      charge.asset,
      charge.network,
      charge.payee,
      charge.resourceUrl,
    ]) {
      expect(reason).toContain(field);
    }
    expect(results[2]?.effects[0]).toMatchObject({ type: 'request_charge', challenge });
    expect(results[4]?.effects[0]).toMatchObject({
      type: 'settle_payment',
      approvalRequestId: charge.approvalRequestId,
    });
    expect(toolResultOf(results)).toMatchObject({ content: '{"report":"q4"}', denied: false });
  });

  it('a refused charge is the tool result, named; nothing waits and nothing is paid', () => {
    const results = runTurn(input, getReport, met402, {
      type: 'charge_answered',
      toolCallId: 'g',
      answer: { refusal: 'spend limit max_per_payment: 10000 is over 5000' },
    });
    expect(briefs(results)[3]).toEqual(['commit tool_result', 'call_model 2']);
    expect(toolResultOf(results)).toMatchObject({
      content:
        'http_get needs a payment that was not asked for: spend limit max_per_payment: 10000 is over 5000. Nothing was paid.',
      isError: true,
    });
  });

  it('a denied payment is a denied result and the turn goes on', () => {
    const results = runTurn(input, getReport, met402, charged, {
      type: 'approval_answered',
      answer: paymentAnswer('denied'),
    });
    expect(briefs(results)[4]).toEqual(['commit tool_result', 'call_model 2']);
    expect(toolResultOf(results)).toMatchObject({ denied: true, isError: false });
    expect(toolResultOf(results)?.content).toContain('denied by alice; nothing was paid');
  });

  it.each<[string, ApprovalAnswer, string]>([
    [
      'an approval of another amount',
      paymentAnswer('approved', { amount: '1' }),
      'answer binds different arguments; new arguments need a new approval',
    ],
    [
      'an approval of another payee',
      paymentAnswer('approved', { payee: `0x${'33'.repeat(20)}` }),
      'answer binds different arguments; new arguments need a new approval',
    ],
    [
      'an approval of another challenge',
      paymentAnswer('approved', { challengeSha256: 'ef'.repeat(32) }),
      'answer binds different arguments; new arguments need a new approval',
    ],
    [
      'an approval signed by another key',
      paymentAnswer('approved', {}, nodeEd25519Signer(new Uint8Array(32).fill(9))),
      'not the approval key',
    ],
    [
      "the call's own approval, not its payment's",
      {
        ...paymentAnswer('approved'),
        requestId: requestIds.approvalRequestId('t1', 'g'),
      },
      `answer is for request ${requestIds.approvalRequestId('t1', 'g')}, not ${charge.approvalRequestId}`,
    ],
  ])('%s pays nothing: the turn pauses again, saying why', (_name, answer, why) => {
    const results = runTurn(input, getReport, met402, charged, {
      type: 'approval_answered',
      answer,
    });
    const last = briefs(results)[4] ?? [];
    expect(last).toHaveLength(1);
    expect(last[0]).toMatch(/^pause_for_approval __payment \(/);
    expect(last[0]).toContain(why);
  });

  it('money that may have moved unanswered quarantines the turn; a lost charge answer does not', () => {
    const lostPayment = runTurn(
      input,
      getReport,
      met402,
      charged,
      { type: 'approval_answered', answer: paymentAnswer('approved') },
      { type: 'tool_outcome_unknown', toolCallId: 'g', reason: 'the call was cut' },
    );
    expect(briefs(lostPayment)[5]).toEqual([
      'ambiguous: the payment http_get asked for may or may not have been made: the call was cut',
    ]);
    const lostCharge = runTurn(input, getReport, met402, {
      type: 'tool_outcome_unknown',
      toolCallId: 'g',
      reason: 'no answer within 60000 ms',
    });
    expect(briefs(lostCharge)[3]).toEqual(['commit tool_result', 'call_model 2']);
    expect(toolResultOf(lostCharge)?.content).toContain('Nothing was paid');
  });

  it('a cancel while the control plane pays is ambiguous; while it reads the challenge it is not', () => {
    const cancelWhilePaying = runTurn(
      input,
      getReport,
      met402,
      charged,
      { type: 'approval_answered', answer: paymentAnswer('approved') },
      { type: 'cancelled', reason: 'stop' },
    );
    expect(briefs(cancelWhilePaying)[5]?.[0]).toMatch(/^ambiguous: turn cancelled while/);
    const cancelWhileCharging = runTurn(input, getReport, met402, {
      type: 'cancelled',
      reason: 'stop',
    });
    expect(briefs(cancelWhileCharging)[3]).toEqual(['cancelled']);
  });

  it.each<[string, TurnEvent, string]>([
    [
      'a charge for another tool call',
      {
        type: 'charge_answered',
        toolCallId: 'g',
        answer: { charge: { ...charge, toolCallId: 'x' } },
      },
      'the charge is for tool call x of turn t1',
    ],
    [
      'a charge waiting for another approval',
      {
        type: 'charge_answered',
        toolCallId: 'g',
        answer: { charge: { ...charge, approvalRequestId: 'apr_other' } },
      },
      'the charge waits for approval apr_other',
    ],
  ])('%s is a misfit: the shell sent what the call did not ask', (_name, event, why) => {
    expect(() => runTurn(input, getReport, met402, event)).toThrow(why);
  });

  it('a charge answer for a call that asked for none is a misfit', () => {
    expect(() => runTurn(input, getReport, charged)).toThrow(
      'cannot apply charge_answered in phase awaiting_tools: tool call g asked for no charge',
    );
  });

  describe('resumed from the journal', () => {
    const first = runTurn(input, getReport, met402, charged);
    const recordedSteps = committedSteps(first);
    const resumed = (answers: ApprovalAnswer[], charges: ChargeFacts[] = [charge]): StepResult[] =>
      runTurn({ ...input, recordedSteps, approvalAnswers: answers, paymentCharges: charges });

    it('a call whose charge is committed is never run again: it pays once approved', () => {
      expect(recordedSteps.map((s) => s.kind)).toEqual(['model_call', 'tool_call']);
      const results = resumed([paymentAnswer('approved')]);
      // The model call is recorded: the machine answers it from the journal, and the call
      // goes straight to its payment.
      expect(briefs(results).flat()).toEqual(['settle_payment g']);
    });

    it('without an answer it pauses for the same approval again', () => {
      expect(briefs(resumed([])).flat()).toEqual(['pause_for_approval __payment']);
    });

    it('a side-effecting call that met a 402 is not ambiguous once its charge is committed', () => {
      const sideEffect = { ...input, tools: [testTool('http_get', 'side_effect')] };
      const steps = committedSteps(runTurn(sideEffect, getReport, met402, charged));
      const results = runTurn({
        ...sideEffect,
        recordedSteps: steps,
        approvalAnswers: [],
        paymentCharges: [charge],
      });
      expect(briefs(results).flat()).toEqual(['pause_for_approval __payment']);
      const noCharge = runTurn({ ...sideEffect, recordedSteps: steps });
      expect(briefs(noCharge).flat()[0]).toMatch(/^ambiguous: side-effecting tool http_get/);
    });

    it('a pure call whose charge was never committed runs again (and meets its 402 again)', () => {
      expect(briefs(resumed([], [])).flat()).toEqual(['call_tool g']);
    });
  });
});
