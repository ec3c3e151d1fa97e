import type {
  PaymentChallenge,
  PaymentChargeAnswer,
  PaymentSettle,
} from '../../proto/gen/polychrome/harness/v1/harness';
import type { RecordedPayment, TurnView } from './journal-view-types';

/**
 * The turn plan's part for a paid call (docs/payments.md, "A paid call in a turn"): what the
 * control plane answers a harness's `payment_challenge` and `payment_settle`, decided from
 * the turn's journal view alone. The harness is less trusted than the control plane, so a
 * message about a call the journal does not hold as waiting for it is forged and quarantines
 * the turn, as a forged step does.
 *
 * Payments are off unless a wallet is linked to the conversation, and no wallet can be
 * linked yet: every charge is refused, named, and the tool is told nothing was paid.
 */

/** What the control plane does with a harness's payment message. */
export type PaymentPlan =
  | { readonly kind: 'forged'; readonly reason: string }
  | { readonly kind: 'answer'; readonly answer: PaymentChargeAnswer };

/** Why a call's payment messages cannot be about `toolCallId` of `turn`, or undefined. */
function waitingCallProblem(
  turn: TurnView,
  turnId: string,
  toolCallId: string,
): string | undefined {
  if (turnId !== turn.turnId) {
    return `the harness named turn ${turnId}, not the dispatched turn ${turn.turnId}`;
  }
  const called = turn.steps.some(
    (step) => step.kind === 'tool_call' && step.payload.toolCallId === toolCallId,
  );
  if (!called) return `no tool_call ${toolCallId} is committed in turn ${turn.turnId}`;
  const done = turn.steps.some(
    (step) => step.kind === 'tool_result' && step.payload.toolCallId === toolCallId,
  );
  if (done) return `tool call ${toolCallId} already has its result`;
  return undefined;
}

/** The committed charge of a call, if one is. */
export function chargeOfCall(turn: TurnView, toolCallId: string): RecordedPayment | undefined {
  return turn.payments.findLast((payment) => payment.charge.toolCallId === toolCallId);
}

/**
 * A tool met a 402. The call must be committed and waiting, with no charge yet (a call
 * whose charge is committed waits for its approval and never meets its 402 again).
 */
export function paymentChallengePlan(turn: TurnView, challenge: PaymentChallenge): PaymentPlan {
  const { toolCallId } = challenge;
  const problem = waitingCallProblem(turn, challenge.turnId, toolCallId);
  if (problem !== undefined) return { kind: 'forged', reason: `payment_challenge: ${problem}` };
  if (chargeOfCall(turn, toolCallId) !== undefined) {
    return {
      kind: 'forged',
      reason: `payment_challenge: tool call ${toolCallId} already has a committed charge`,
    };
  }
  return {
    kind: 'answer',
    answer: {
      toolCallId,
      answer: {
        $case: 'refusal',
        value:
          'payments are off for this conversation: no wallet is linked to it, so the control plane pays nothing (docs/payments.md, "Wallets and the SecretStore")',
      },
    },
  };
}

/**
 * Pay an approved charge: only a call whose charge is committed may ask, and none can be
 * committed while no wallet can be linked, so every settle is forged today.
 */
export function paymentSettlePlan(
  turn: TurnView,
  settle: PaymentSettle,
): Extract<PaymentPlan, { kind: 'forged' }> {
  const { toolCallId } = settle;
  const problem = waitingCallProblem(turn, settle.turnId, toolCallId);
  if (problem !== undefined) return { kind: 'forged', reason: `payment_settle: ${problem}` };
  if (chargeOfCall(turn, toolCallId) === undefined) {
    return {
      kind: 'forged',
      reason: `payment_settle: tool call ${toolCallId} has no committed charge to pay`,
    };
  }
  return {
    kind: 'forged',
    reason: `payment_settle: tool call ${toolCallId} names a charge this control plane cannot pay`,
  };
}
