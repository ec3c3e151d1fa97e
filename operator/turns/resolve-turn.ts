/**
 * The shell of resolving a quarantined turn (plan-resolve.ts): claim the conversation as a
 * turn does (fenced by its lease), read the journal, commit the plan's batch, and queue the
 * status change that lifts the quarantine. The turn itself runs on the next claim.
 */
import { AppError } from '../../common/errors';
import { StandingState } from '../../common/turn-standing';
import type { Conversation } from '../api/v1alpha1/conversation-types';
import type { ApprovalSigner } from './approval-signer';
import type { JournalView } from './journal-view-types';
import type { JournalViews } from './journal-views';
import type { PaymentSettings } from './pay-charge';
import { authorizeResolve, planResolve, type ResolveInput } from './plan-resolve';
import { unsettledPayment } from './plan-resolve-payment';
import type { TurnClaims } from './turn-claims';
import type { TurnRunner } from './turn-runner';
import type { Caller, ResolveAnswer, ResolveTurn } from './turn-service';

/** What the resolve shell uses of the coordinator. */
export interface ResolveParts {
  readonly conversations: { byUid(uid: string): Conversation | undefined };
  readonly claims: TurnClaims;
  readonly views: JournalViews;
  readonly runner: TurnRunner;
  readonly nowMs: () => number;
  /** Where a payment resolve reads the paying wallet's address (off: undefined). */
  readonly payments: PaymentSettings | undefined;
  /** Signs the receipt a payment resolve records. */
  readonly approvals: ApprovalSigner;
}

/**
 * Resolves `request.turnId` of the conversation.
 *
 * @throws AppError `not_found`, `permission_denied` (refused before the claim), `conflict`
 *   (the plan's refusals, under the claim), `unavailable` when another replica holds the
 *   conversation (details.forwardTo).
 */
export async function resolveTurn(
  parts: ResolveParts,
  caller: Caller,
  request: ResolveTurn,
  signal: AbortSignal,
): Promise<ResolveAnswer> {
  const uid = request.conversationId;
  const conversation = parts.conversations.byUid(uid);
  // Refused before the claim: someone who may not resolve never takes the lease.
  const denied = authorizeResolve(caller, request, conversation);
  if (denied !== undefined) throw denied.error;
  if (conversation === undefined) throw new AppError('internal', 'unreachable: authorized');
  return parts.claims.run(conversation, signal, async (lease) => {
    const view = await parts.runner.startView(conversation, lease, signal);
    const fresh = parts.runner.fresh(conversation);
    const payment = await paymentOf(parts, view, request);
    const plan = planResolve({
      view,
      conversation: fresh,
      caller,
      request,
      nowMs: parts.nowMs(),
      ...(payment === undefined ? {} : { payment }),
    });
    if (plan.kind === 'refuse') throw plan.error;
    const { outcome } = await parts.runner.commit(uid, lease, plan.events);
    parts.runner.queueSettled(fresh, plan.status, outcome);
    const decision = request.decision;
    const resultUnknown = decision.kind === 'ran' && decision.result === undefined;
    return {
      conversationId: uid,
      turnId: plan.turn.turnId,
      decision: decision.kind,
      resultUnknown,
      actor: request.actor,
      position: view.head,
      head: outcome.head,
      message:
        decision.kind === 'ran' && decision.transaction !== undefined
          ? `turn ${plan.turn.turnId} is resolved as paid in transaction ${decision.transaction}, with its receipt recorded: the next message (or the retry of its request) finishes it past the call, which is never paid again`
          : decision.kind === 'did_not_run'
            ? `turn ${plan.turn.turnId} is resolved as not run: the next message (or the retry of its request) runs it again under its id`
            : `turn ${plan.turn.turnId} is resolved as run${resultUnknown ? ' with its result unknown' : ''}: the next message (or the retry of its request) finishes it past the call`,
    };
  });
}

/**
 * What resolving a turn quarantined on a payment needs besides the journal (a transaction
 * given, and a payment of the quarantined call sent without a receipt): the address of the
 * wallet that sent it, read from the store only this process reads, and the approval key
 * that signs the receipt. Undefined for any other resolve.
 *
 * @throws AppError `failed_precondition` when payments are off here, so the wallet cannot be read.
 */
async function paymentOf(
  parts: ResolveParts,
  view: JournalView,
  request: ResolveTurn,
): Promise<ResolveInput['payment']> {
  if (request.decision.kind !== 'ran' || request.decision.transaction === undefined) {
    return undefined;
  }
  const turn = view.turnsById.get(request.turnId);
  const standing = turn?.standingFold.standing;
  if (turn === undefined || standing?.state !== StandingState.Quarantined) return undefined;
  const paying = unsettledPayment(turn, standing.toolCallId);
  if (paying === undefined) return undefined;
  const name = paying.sent?.payload.wallet ?? '';
  if (parts.payments === undefined) {
    throw new AppError(
      'failed_precondition',
      `payments are off on this control plane, so it cannot read wallet ${name} to record who paid; turn them on (docs/payments.md, "Turning payments on") and resolve again`,
      { details: { wallet: name } },
    );
  }
  const wallet = await parts.payments.wallets.wallet(name);
  return { payer: wallet.address, signReceipt: (r) => parts.approvals.signReceipt(r) };
}
