/**
 * What the harness waits for the control plane to answer in the middle of a turn, besides
 * relayed model calls: a step to commit (plan-harness-checks.ts `checkStep`), a trusted tool
 * call (the `memory` tool, plan-memory.ts) and a paid call's messages (answer-payments.ts,
 * docs/payments.md). The plan decides; this commits what it planned, in order, and answers
 * the call, or gives the `forged` end that quarantines the turn. The runner
 * (turn-runner.ts) reads the call and hands each such message here.
 */
import type { AnswerContext, ForgedEnd } from './answer-context';
import {
  answerMcpPaidResult,
  answerPaymentChallenge,
  answerPaymentSettle,
} from './answer-payments';
import type { HarnessCall, HarnessMessage } from './harness-call';
import { forgedEnd, trustedToolPlan } from './harness-run';
import { checkStep } from './plan-harness-checks';
import { stepEventOf } from './plan-settle';

/** A message the harness waits on before it goes on. */
export type AnsweredMessage = Extract<
  HarnessMessage,
  { kind: 'step' | 'trusted_tool' | 'payment_challenge' | 'payment_settle' | 'mcp_paid_result' }
>;

/**
 * Plans `message`, commits what the plan made, and answers it on `call`; returns the
 * `forged` end instead when the plan refused it (the call is cancelled).
 */
export async function answerHarness(
  message: AnsweredMessage,
  call: HarnessCall,
  context: AnswerContext,
): Promise<ForgedEnd | undefined> {
  switch (message.kind) {
    case 'step': {
      const refused = checkStep(context.dispatched(), message.step);
      if (refused !== undefined) return forgedEnd(refused, message.step, call);
      const { outcome } = await context.commit([stepEventOf(message.step)]);
      call.committed(message.step.sequence, outcome.firstPosition);
      return undefined;
    }
    case 'trusted_tool': {
      const { memory, ...rest } = context.facts();
      const plan = trustedToolPlan(rest, memory, message.call);
      if (plan.kind === 'forged') return forgedEnd(plan.reason, message.call.toolCallId, call);
      if (plan.events.length > 0) await context.commit(plan.events);
      call.toolResult(plan.result);
      return undefined;
    }
    case 'payment_challenge':
      return answerPaymentChallenge(message.challenge, call, context);
    case 'payment_settle':
      return answerPaymentSettle(message.settle, call, context);
    case 'mcp_paid_result':
      return answerMcpPaidResult(message.result, message.handed, call, context);
  }
}
