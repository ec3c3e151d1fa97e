/**
 * What answering a harness's message needs of the turn runner (control-plane-calls.ts,
 * answer-payments.ts): the dispatched turn under its lease, its journal facts, a way to
 * commit, and what a paid call reads.
 */
import type { AppendOutcome } from '../../common/state-journal';
import type { TurnCoordinatorOptions } from './coordinator-options';
import type { JournalView, PaymentPolicyRef, SpentPayment, TurnView } from './journal-view-types';
import type { PersonaPaymentStore } from './persona-payment-facts';
import type { PayParts } from './pay-charge';
import type { PlannedEvent } from './plan-common';
import type { DispatchedTurn } from './plan-harness-checks';
import type { MemoryCallFacts } from './plan-memory';
import type { HarnessEnd } from './plan-settle';

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
