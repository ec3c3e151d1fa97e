/**
 * The shell of accepting a rolled-back journal (plan-accept-rollback.ts): claim the
 * conversation as a turn does (fenced by its lease), read the journal as the state plane
 * holds it and check it against `status.journal`, commit the plan's batch, and queue the
 * status change that makes its signed root the new checkpoint and lifts Degraded
 * JournalRolledBack.
 */
import { AppError } from '../../common/errors';
import { checkpointOf } from './journal-checkpoint';
import { authorizeAcceptRollback, planAcceptRollback } from './plan-accept-rollback';
import type { ResolveParts } from './resolve-turn';
import type { AcceptRollback, AcceptRollbackAnswer, Caller } from './turn-service';

/** What the shell uses of the coordinator: what resolving a turn uses. */
export type AcceptRollbackParts = ResolveParts;

/**
 * Accepts the rollback of `request.conversationId`'s journal.
 *
 * @throws AppError `not_found`, `permission_denied` (refused before the claim),
 *   `invalid_argument` (no reason), `conflict` (nothing to accept, or the journal is not at
 *   `request.head`), `unavailable` when another replica holds the conversation.
 */
export async function acceptRollback(
  parts: AcceptRollbackParts,
  caller: Caller,
  request: AcceptRollback,
  signal: AbortSignal,
): Promise<AcceptRollbackAnswer> {
  const uid = request.conversationId;
  const conversation = parts.conversations.byUid(uid);
  // Refused before the claim: someone who may not accept never takes the lease.
  const denied = authorizeAcceptRollback(caller, request, conversation);
  if (denied !== undefined) throw denied.error;
  if (conversation === undefined) throw new AppError('internal', 'unreachable: authorized');
  return parts.claims.run(conversation, signal, async (lease) => {
    const fresh = parts.runner.fresh(conversation);
    const view = await parts.views.acceptingRollback(uid, lease, signal);
    const verdict = await parts.views.verdictFor(uid, view, checkpointOf(fresh), signal);
    const plan = planAcceptRollback({
      view,
      conversation: fresh,
      caller,
      request,
      verdict,
      nowMs: parts.nowMs(),
    });
    if (plan.kind === 'refuse') {
      parts.views.forget(uid);
      throw plan.error;
    }
    const { outcome } = await parts.runner.commit(uid, lease, plan.events);
    parts.runner.queueSettled(fresh, { kind: 'rollback_accepted' }, outcome);
    return {
      conversationId: uid,
      checkpointHead: plan.lost.head,
      checkpointRoot: plan.lost.root,
      position: view.head,
      head: outcome.head,
      actor: request.actor,
      message:
        `the rollback of conversation ${uid} is accepted and recorded at position ${String(view.head)}: ` +
        `entries ${String(view.head)} to ${String(plan.lost.head - 1)} that status.journal recorded are lost; ` +
        `the journal goes on from ${String(outcome.head)}, its new checkpoint`,
    };
  });
}
