/**
 * What the harness waits for the control plane to answer in the middle of a turn, besides
 * relayed model calls: a step to commit (plan-harness-checks.ts `checkStep`), a trusted tool
 * call (the `memory` tool, plan-memory.ts) and a paid call's messages (plan-payments.ts,
 * docs/payments.md). The plan decides; this commits what it planned, in order, and answers
 * the call, or gives the `forged` end that quarantines the turn. The runner
 * (turn-runner.ts) reads the call and hands each such message here.
 */
import type { HarnessCall, HarnessMessage } from './harness-call';
import { forgedEnd, trustedToolPlan } from './harness-run';
import type { MemoryCallFacts } from './plan-memory';
import type { PlannedEvent } from './plan-common';
import { chargeOfCall, paymentChallengePlan, paymentSettlePlan } from './plan-payments';
import {
  inPaymentSpan,
  PaymentSpanOutcome,
  type PaymentSpanCall,
  type PaymentSpanNotes,
} from './payment-spans';
import type {
  PaymentChallenge,
  PaymentSettle,
  TrustedToolResult,
} from '../../proto/gen/polychrome/harness/v1/harness';
import { stepEventOf, type HarnessEnd } from './plan-settle';
import { payCharge, type PayParts } from './pay-charge';
import type { JournalView, PaymentPolicyRef, SpentPayment } from './journal-view-types';
import type { TurnCoordinatorOptions } from './coordinator-options';
import { checkStep, type DispatchedTurn } from './plan-harness-checks';
import type { AppendOutcome } from '../../common/state-journal';

/** A message the harness waits on before it goes on. */
export type AnsweredMessage = Extract<
  HarnessMessage,
  { kind: 'step' | 'trusted_tool' | 'payment_challenge' | 'payment_settle' }
>;

/** The end of a call whose message the plan refused. */
export type ForgedEnd = Extract<HarnessEnd, { kind: 'forged' }>;

/** What answering needs of the runner, for the dispatched turn under its lease. */
export interface AnswerContext {
  /** The turn as the journal holds it now, with what a trusted tool reads. */
  facts(): MemoryCallFacts;
  /** What a step is checked against. */
  dispatched(): DispatchedTurn;
  /** Appends one batch under the turn's lease. */
  commit(events: readonly PlannedEvent[]): Promise<{ readonly outcome: AppendOutcome }>;
  /** What a paid call reads: the journal's policy and totals, the deployment's settings. */
  payments(): PaymentContext;
}

/** A paid call's facts and parts, from the journal view and the deployment. */
export interface PaymentContext extends Omit<PayParts, 'commit'> {
  readonly policy: PaymentPolicyRef | undefined;
  readonly spent: readonly SpentPayment[];
}

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
      return inPaymentSpan('charge', paymentSpanCall(context, message.challenge), (notes) =>
        answerChallenge(message.challenge, call, context, notes),
      );
    case 'payment_settle':
      return inPaymentSpan('settle', paymentSpanCall(context, message.settle), (notes) =>
        answerSettle(message.settle, call, context, notes),
      );
  }
}

/** Whose paid call a harness's payment message is about, for its span. */
function paymentSpanCall(
  context: AnswerContext,
  message: { readonly toolCallId: string },
): PaymentSpanCall {
  const { turnId } = context.facts().turn;
  const { conversationId } = context.payments();
  return { conversationId, turnId, toolCallId: message.toolCallId };
}

/** A tool met a 402: the plan reads the charge; a charge is committed before it is answered. */
async function answerChallenge(
  challenge: PaymentChallenge,
  call: HarnessCall,
  context: AnswerContext,
  notes: PaymentSpanNotes,
): Promise<ForgedEnd | undefined> {
  const payments = context.payments();
  const plan = paymentChallengePlan(context.facts().turn, challenge, {
    ...payments,
    protocols: payments.settings?.protocols ?? [],
    nowMs: payments.nowMs(),
  });
  if (plan.kind === 'forged') {
    notes.outcome(PaymentSpanOutcome.Forged);
    return forgedEnd(plan.reason, challenge.toolCallId, call);
  }
  const answer = plan.answer.answer;
  if (answer?.$case === 'charge') notes.charge(answer.value);
  if (plan.kind === 'charge') await context.commit(plan.events);
  notes.outcome(plan.kind === 'charge' ? PaymentSpanOutcome.Charged : PaymentSpanOutcome.Refused);
  call.chargeAnswer(plan.answer);
  return undefined;
}

/** An approved charge's call asks to be paid: the plan decides, `payCharge` pays. */
async function answerSettle(
  settle: PaymentSettle,
  call: HarnessCall,
  context: AnswerContext,
  notes: PaymentSpanNotes,
): Promise<ForgedEnd | undefined> {
  const payments = context.payments();
  const turn = context.facts().turn;
  const plan = paymentSettlePlan(turn, settle, {
    policy: payments.policy,
    spent: payments.spent,
    nowMs: payments.nowMs(),
  });
  if (plan.kind === 'forged') {
    notes.outcome(PaymentSpanOutcome.Forged);
    return forgedEnd(plan.reason, settle.toolCallId, call);
  }
  const recorded = chargeOfCall(turn, settle.toolCallId);
  if (recorded !== undefined) notes.charge(recorded.charge);
  if (plan.kind === 'answer') {
    notes.outcome(
      recorded?.receipt !== undefined ? PaymentSpanOutcome.Answered : settledOutcome(plan.result),
    );
    call.toolResult(plan.result);
    return undefined;
  }
  await context.commit(plan.events);
  const commit = (events: readonly PlannedEvent[]) => context.commit(events);
  const result = await payCharge(plan.charge, plan.wallet, { ...payments, commit });
  notes.outcome(settledOutcome(result));
  call.toolResult(result);
  return undefined;
}

/** What a settle's answer says of the money: unknown, not paid, or paid. */
function settledOutcome(result: TrustedToolResult): PaymentSpanOutcome {
  if (result.outcomeUnknownReason !== '') return PaymentSpanOutcome.Unknown;
  return result.isError ? PaymentSpanOutcome.NotPaid : PaymentSpanOutcome.Paid;
}

/** A paid call's context from the conversation's cached view and the coordinator's options. */
export function paymentContextOf(
  view: JournalView | undefined,
  options: Pick<TurnCoordinatorOptions, 'payments' | 'approvals'>,
  conversationId: string,
  nowMs: () => number,
): PaymentContext {
  return {
    policy: view?.paymentPolicy,
    spent: view?.spentPayments ?? [],
    settings: options.payments,
    approvals: options.approvals,
    conversationId,
    nowMs,
  };
}
