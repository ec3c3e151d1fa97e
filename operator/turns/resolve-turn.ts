/**
 * The shell of resolving a quarantined turn (plan-resolve.ts): claim the conversation as a
 * turn does (fenced by its lease), read the journal, commit the plan's batch, and queue the
 * status change that lifts the quarantine. The turn itself runs on the next claim.
 */
import { AppError } from '../../common/errors';
import type { Conversation } from '../api/v1alpha1/conversation-types';
import type { JournalViews } from './journal-views';
import { authorizeResolve, planResolve } from './plan-resolve';
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
    const plan = planResolve({ view, conversation: fresh, caller, request, nowMs: parts.nowMs() });
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
        decision.kind === 'did_not_run'
          ? `turn ${plan.turn.turnId} is resolved as not run: the next message (or the retry of its request) runs it again under its id`
          : `turn ${plan.turn.turnId} is resolved as run${resultUnknown ? ' with its result unknown' : ''}: the next message (or the retry of its request) finishes it past the call`,
    };
  });
}
