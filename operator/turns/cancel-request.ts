/**
 * The shell of an admin's cancel of a pending approval or question (docs/turns.md,
 * "Cancel"; the plan is `planCancel`): claim the conversation as a turn does (fenced by its
 * lease), commit the plan's batch, which settles the turn with a reply saying so, and
 * queue its status.
 */
import { settledReplyOf } from './turn-projections';
import type { Logger } from 'pino';
import type { Conversation } from '../api/v1alpha1/conversation-types';
import { planCancel } from './plan-answers';
import type { TurnClaims } from './turn-claims';
import type { TurnRunner } from './turn-runner';
import type { Caller, TurnReply } from './turn-service';

/** What the cancel shell uses of the coordinator. */
export interface CancelParts {
  readonly claims: TurnClaims;
  readonly runner: TurnRunner;
  readonly logger: Logger;
  readonly nowMs: () => number;
}

/** Which pending request to cancel, and the admin's comment. */
export interface CancelRequest {
  readonly type: 'approval' | 'question';
  readonly requestId: string;
  readonly comment: string | undefined;
}

/**
 * Cancels the pending request of `conversation` and settles its turn.
 *
 * @throws the plan's refusals (not an admin, nothing pending with that id), as AppError.
 */
export function cancelRequest(
  parts: CancelParts,
  caller: Caller,
  conversation: Conversation,
  request: CancelRequest,
  signal: AbortSignal,
): Promise<TurnReply> {
  const { claims, runner } = parts;
  const { type, requestId, comment } = request;
  const uid = conversation.metadata.uid ?? '';
  return claims.run(conversation, signal, async (lease) => {
    const view = await runner.startView(conversation, lease, signal);
    const plan = planCancel({
      view,
      conversation,
      caller,
      requestId,
      lease,
      nowMs: parts.nowMs(),
      type,
      ...(comment === undefined ? {} : { comment }),
    });
    if (plan.kind === 'refuse') throw plan.error;
    const turnId = plan.turn.turnId;
    const { outcome, view: settled } = await runner.commit(uid, lease, plan.events);
    runner.queueSettled(conversation, { kind: 'settled', turnId }, outcome);
    parts.logger.info(
      { conversation: uid, turn: turnId, requestId, by: caller.identity },
      `${type} cancelled by an admin; the turn is settled`,
    );
    return settledReplyOf(uid, settled.turnsById.get(turnId) ?? plan.turn);
  });
}
