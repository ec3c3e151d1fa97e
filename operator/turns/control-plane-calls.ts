/**
 * What the harness waits for the control plane to answer in the middle of a turn, besides
 * relayed model calls: a step to commit (plan-harness-checks.ts `checkStep`), a trusted tool
 * call (the `memory` tool, plan-memory.ts) and a paid call's messages (plan-payments.ts,
 * docs/payments.md). The plan decides; this commits what it planned, in order, and answers
 * the call, or gives the `forged` end that quarantines the turn. The runner
 * (turn-runner.ts) reads the call and hands each such message here.
 */
import type { HarnessCall, HarnessMessage } from './harness-call';
import type {
  PaymentChallenge,
  PaymentSettle,
} from '../../proto/gen/polychrome/harness/v1/harness';
import { forgedEnd, trustedToolPlan } from './harness-run';
import type { MemoryCallFacts } from './plan-memory';
import type { PlannedEvent } from './plan-common';
import { paymentChallengePlan, paymentSettlePlan } from './plan-payments';
import { stepEventOf, type HarnessEnd } from './plan-settle';
import { notPaid, payCharge, type PayParts } from './pay-charge';
import type { JournalView, PaymentPolicyRef, SpentPayment, TurnView } from './journal-view-types';
import { pendingCharges } from './effective-payment';
import {
  countPersonaSpend,
  personaPaymentOf,
  type PersonaPaymentStore,
} from './persona-payment-facts';
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
  /** The conversation's open turns: their charges waiting for a card count too. */
  readonly openTurns: readonly TurnView[];
  /** The state plane's persona payment records; absent: no persona policy applies. */
  readonly personas: PersonaPaymentStore | undefined;
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
      return answerChallenge(message.challenge, call, context);
    case 'payment_settle':
      return answerSettle(message.settle, call, context);
  }
}

/** What both payment messages read: the context, the turn, the time, the turn persona's policy. */
async function paymentFacts(context: AnswerContext) {
  const payments = context.payments();
  const { turn } = context.facts();
  const nowMs = payments.nowMs();
  const persona = await personaPaymentOf(payments.personas, turn.attribution.persona, nowMs);
  return { payments, turn, nowMs, persona };
}

/** A tool met a 402: refuse it, named, or commit its charge and answer with it. */
async function answerChallenge(
  challenge: PaymentChallenge,
  call: HarnessCall,
  context: AnswerContext,
): Promise<ForgedEnd | undefined> {
  const { payments, turn, nowMs, persona } = await paymentFacts(context);
  const plan = paymentChallengePlan(turn, challenge, {
    ...payments,
    protocols: payments.settings?.protocols ?? [],
    pending: pendingCharges(payments.openTurns, nowMs),
    ...(persona === undefined ? {} : { persona }),
    nowMs,
  });
  if (plan.kind === 'forged') return forgedEnd(plan.reason, challenge.toolCallId, call);
  if (plan.kind === 'charge') await context.commit(plan.events);
  call.chargeAnswer(plan.answer);
  return undefined;
}

/** An approved charge asks to be paid: answer it, or count it, record the send and pay. */
async function answerSettle(
  settle: PaymentSettle,
  call: HarnessCall,
  context: AnswerContext,
): Promise<ForgedEnd | undefined> {
  const { payments, turn, nowMs, persona } = await paymentFacts(context);
  const plan = paymentSettlePlan(turn, settle, {
    policy: payments.policy,
    spent: payments.spent,
    ...(persona === undefined ? {} : { persona }),
    nowMs,
  });
  if (plan.kind === 'forged') return forgedEnd(plan.reason, settle.toolCallId, call);
  if (plan.kind === 'answer') {
    call.toolResult(plan.result);
    return undefined;
  }
  // Counted against the persona before the send is recorded: a crash between the two
  // over-counts, never under-counts.
  const id = payments.conversationId;
  const { charge } = plan;
  const who = plan.persona ?? '';
  const refused = await countPersonaSpend(payments.personas, who, charge, id, nowMs, persona);
  if (refused !== undefined) {
    call.toolResult(notPaid(charge.toolCallId, refused));
    return undefined;
  }
  await context.commit(plan.events);
  const commit = (events: readonly PlannedEvent[]) => context.commit(events);
  call.toolResult(await payCharge(plan.charge, plan.wallet, { ...payments, commit }));
  return undefined;
}

/** A paid call's context from the conversation's cached view and the coordinator's options. */
export function paymentContextOf(
  view: JournalView | undefined,
  options: Pick<TurnCoordinatorOptions, 'payments' | 'approvals' | 'personaPayments'>,
  conversationId: string,
  nowMs: () => number,
): PaymentContext {
  return {
    policy: view?.paymentPolicy,
    spent: view?.spentPayments ?? [],
    openTurns: view?.openTurns ?? [],
    personas: options.personaPayments,
    settings: options.payments,
    approvals: options.approvals,
    conversationId,
    nowMs,
  };
}
