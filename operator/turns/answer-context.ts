/**
 * What answering a harness's message needs of the turn runner (control-plane-calls.ts,
 * answer-payments.ts): the dispatched turn under its lease, its journal facts, a way to
 * commit, and what a paid call reads.
 */
import type { AppendOutcome } from '../../common/state-journal';
import type { TurnCoordinatorOptions } from './coordinator-options';
import type { JournalView, PaymentPolicyRef, SpentPayment } from './journal-view-types';
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
