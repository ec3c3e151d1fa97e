/**
 * Which wallet pays a charge and which limits hold it (docs/payments.md, "A persona's
 * wallet and limits"). Pure, and the one place the rule is written: the charge plan (before
 * the card is shown) and the settle plan (before the payment is sent) both ask it.
 *
 * - Both the conversation's limits (an admin's link, in its journal) and the limits of the
 *   persona the turn is attributed to (an admin's persona policy, in the state plane's
 *   records) apply: a charge must pass both, so neither can widen the other. A refusal names
 *   the limit and whose it is.
 * - The wallet is the conversation's when one is linked, else the persona's. With neither,
 *   payments are off and the charge is refused.
 */
import { isAppError } from '../../common/errors';
import {
  checkSpendLimits,
  type PriorPayment,
  type SpendCharge,
  type SpendLimits,
} from '../../common/spend-limits';
import { ApprovalDecision } from '../../proto/gen/polychrome/events/v1/events';
import type { PaymentPolicyRef, SpentPayment, TurnView } from './journal-view-types';
import { parseSpendLimits } from './spend-limits-input';

/** A payment counted against a persona, with the charge's key when the records gave it. */
export interface CountedPayment extends SpentPayment {
  readonly idempotencyKey?: string;
}

/** The payment policy of the persona the turn is attributed to, and what it spent. */
export interface PersonaPayment {
  readonly personaId: string;
  /** The persona's wallet; '' when it links none. */
  readonly wallet: string;
  /** Canonical JSON of the persona's limits; '' when it has none. */
  readonly limitsJson: string;
  /** The payments counted against the persona, over all its conversations. */
  readonly spent: readonly CountedPayment[];
}

/** What decides a charge: both policies and what each has counted. */
export interface PaymentPolicies {
  /** The conversation's newest `payment_policy`. */
  readonly conversation: PaymentPolicyRef | undefined;
  /** What counts against the conversation's limits (sent, and pending at charge time). */
  readonly conversationSpent: readonly SpentPayment[];
  /** Absent: the turn names no persona, or its persona has no payment policy. */
  readonly persona: PersonaPayment | undefined;
}

/** Who pays a charge, or why nobody may. */
export type EffectivePayment =
  | {
      readonly kind: 'pay';
      readonly wallet: string;
      /** Whose link gives the wallet. */
      readonly payer: 'conversation' | 'persona';
    }
  | { readonly kind: 'refuse'; readonly reason: string; readonly noWallet: boolean };

/**
 * Decides `charge` at `nowMs` against both policies. `exclude` is an idempotency key not to
 * count against the persona (the charge itself, at a retried send: its spend may already be
 * recorded).
 */
export function effectivePayment(
  policies: PaymentPolicies,
  charge: SpendCharge,
  nowMs: number,
  exclude?: string,
): EffectivePayment {
  const { conversation, persona } = policies;
  const paying = payingWallet(policies);
  if (paying === undefined) return { kind: 'refuse', noWallet: true, reason: NO_WALLET };
  const linked = conversation?.wallet ?? '';
  if (linked !== '' && conversation !== undefined) {
    const refusal = limitsRefusal(
      conversation.limitsJson,
      charge,
      policies.conversationSpent,
      nowMs,
    );
    if (refusal !== undefined) return refuse(`the conversation's ${refusal}`);
  }
  if (persona !== undefined && persona.limitsJson !== '') {
    const counted = persona.spent.filter(
      (p) => exclude === undefined || p.idempotencyKey !== exclude,
    );
    const refusal = limitsRefusal(persona.limitsJson, charge, counted, nowMs);
    if (refusal !== undefined) return refuse(`persona ${persona.personaId}'s ${refusal}`);
  }
  return { kind: 'pay', ...paying };
}

/** The refusal of a charge when neither the conversation nor the persona links a wallet. */
export const NO_WALLET =
  'payments are off for this conversation: no wallet is linked to it or to the persona of the turn, so the control plane pays nothing (docs/payments.md, "Linking a wallet")';

/** The wallet that pays: the conversation's link, else the persona's; undefined: none. */
export function payingWallet(
  policies: Pick<PaymentPolicies, 'conversation' | 'persona'>,
): { wallet: string; payer: 'conversation' | 'persona' } | undefined {
  const linked = policies.conversation?.wallet ?? '';
  if (linked !== '') return { wallet: linked, payer: 'conversation' };
  const own = policies.persona?.wallet ?? '';
  return own === '' ? undefined : { wallet: own, payer: 'persona' };
}

const refuse = (reason: string): EffectivePayment => ({ kind: 'refuse', reason, noWallet: false });

/** Why `charge` is outside the limits `limitsJson`, counted against `prior`; else undefined. */
function limitsRefusal(
  limitsJson: string,
  charge: SpendCharge,
  prior: readonly PriorPayment[],
  nowMs: number,
): string | undefined {
  let limits: SpendLimits;
  try {
    limits = parseSpendLimits(limitsJson).limits;
  } catch (error) {
    if (!isAppError(error)) throw error;
    return `spend limits cannot be read (${error.message})`;
  }
  const decision = checkSpendLimits(limits, charge, prior, new Date(nowMs));
  return decision.allowed ? undefined : `spend limit ${decision.limit}: ${decision.message}`;
}

/**
 * The policies that decide a charge of `turn`: the conversation's, with what it sent and
 * its `pending` charges; and the persona's, only when `persona` is of the persona the turn
 * is attributed to (another persona's link never pays), with its own waiting charges.
 */
export function policiesOfTurn(
  turn: TurnView,
  facts: {
    readonly policy: PaymentPolicyRef | undefined;
    readonly spent: readonly SpentPayment[];
    readonly pending?: readonly PendingCharge[];
    readonly persona?: PersonaPayment;
  },
): PaymentPolicies {
  const pending = facts.pending ?? [];
  const attributed = turn.attribution.persona;
  const persona =
    attributed !== '' && facts.persona?.personaId === attributed ? facts.persona : undefined;
  return {
    conversation: facts.policy,
    conversationSpent: [...facts.spent, ...pending],
    persona:
      persona === undefined
        ? undefined
        : {
            ...persona,
            spent: [...persona.spent, ...pending.filter((p) => p.persona === attributed)],
          },
  };
}

/** A charge committed and not yet paid, denied or expired, with the persona of its turn. */
export interface PendingCharge extends SpentPayment {
  readonly persona: string;
}

/**
 * The charges committed in `turns` and still waiting to be paid at `nowMs`: no
 * `payment_sent`, no receipt, no denial, no result for the call, not expired. They count
 * against the period totals when another charge is read, so two charges of one turn cannot
 * both be shown when together they would cross a total.
 */
export function pendingCharges(turns: Iterable<TurnView>, nowMs: number): PendingCharge[] {
  const pending: PendingCharge[] = [];
  const at = new Date(nowMs).toISOString();
  for (const turn of turns) {
    const { persona } = turn.attribution;
    for (const { charge, sent, receipt } of turn.payments) {
      if (sent !== undefined || receipt !== undefined) continue;
      if (Date.parse(charge.expiresAt) <= nowMs) continue;
      const denied = turn.approvalResponses.some(
        ({ response }) =>
          response.requestId === charge.approvalRequestId &&
          response.decision !== ApprovalDecision.APPROVAL_DECISION_APPROVED,
      );
      const answered = turn.steps.some(
        (step) => step.kind === 'tool_result' && step.payload.toolCallId === charge.toolCallId,
      );
      if (denied || answered) continue;
      const { network, asset, amount } = charge;
      pending.push({ network, asset, amount, at, persona });
    }
  }
  return pending;
}
