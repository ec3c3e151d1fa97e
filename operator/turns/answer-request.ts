/**
 * The shells of the answers to a paused turn (docs/turns.md, "Approvals and questions"): an
 * approval's signed decision or a question's answer, committed with the next dispatch in
 * one batch under the conversation's claim, then the turn runs on. The plans are
 * plan-answers.ts's; a cancel is cancel-request.ts's.
 */
import type { Conversation } from '../api/v1alpha1/conversation-types';
import type { ApprovalSigner } from './approval-signer';
import { cancelRequest, type CancelParts } from './cancel-request';
import { approvalAnswerBatch, planApprovalAnswer, planQuestionAnswer } from './plan-answers';
import type { AnswerApproval, AnswerQuestion, Caller, TurnReply } from './turn-service';

/** What the answer shells use of the coordinator. */
export interface AnswerParts extends CancelParts {
  readonly approvals: ApprovalSigner;
  /** `POLYCHROME_ALLOW_SELF_APPROVAL`. */
  readonly allowSelfApproval: boolean;
  readonly approvalTtlMs: number;
  /** `POLYCHROME_HISTORY_TOKENS` (history-window.ts). */
  readonly historyTokens: number;
}

/**
 * Approves or denies a paused call (a cancel is cancel-request.ts's): the signed answer
 * and the next dispatch in one batch, then the turn runs on. An answer that comes after
 * the approval's time ran out commits the expiry instead and is refused.
 */
export function answerApproval(
  parts: AnswerParts,
  caller: Caller,
  conversation: Conversation,
  request: AnswerApproval,
  signal: AbortSignal,
): Promise<TurnReply> {
  const uid = request.conversationId;
  const { decision, comment } = request;
  if (decision === 'cancel') {
    return cancelRequest(
      parts,
      caller,
      conversation,
      { type: 'approval', requestId: request.requestId, comment },
      signal,
    );
  }
  return parts.claims.run(conversation, signal, async (lease) => {
    const input = {
      view: await parts.runner.startView(conversation, lease, signal),
      conversation,
      caller,
      requestId: request.requestId,
      lease,
      nowMs: parts.nowMs(),
      deploymentHistoryTokens: parts.historyTokens,
    };
    const plan = planApprovalAnswer({
      ...input,
      decision,
      approvalTtlMs: parts.approvalTtlMs,
      allowSelfApproval: parts.allowSelfApproval,
    });
    switch (plan.kind) {
      case 'refuse':
        throw plan.error;
      case 'expire':
        // Too late: the expiry is due, so it is committed and the turn goes on as denied.
        await parts.runner.expire(conversation, lease, plan.due, input.view);
        throw plan.error;
      case 'answer': {
        // Usable for as long as the request could have waited (docs/approvals.md).
        const expiresAtMs = input.nowMs + parts.approvalTtlMs;
        const signed = parts.approvals.signScoped(plan.sign, uid, expiresAtMs);
        const answered = { ...input, ...(comment === undefined ? {} : { comment }) };
        const batch = approvalAnswerBatch(
          { ...answered, selfApproval: plan.selfApproval },
          plan.turn,
          plan.sign,
          signed,
        );
        await parts.runner.commit(uid, lease, batch);
        return parts.runner.drive(conversation, lease, plan.turn.turnId);
      }
    }
  });
}

/** Answers a question the agent asked (a cancel is cancel-request.ts's); the turn runs on. */
export function answerQuestion(
  parts: AnswerParts,
  caller: Caller,
  conversation: Conversation,
  request: AnswerQuestion,
  signal: AbortSignal,
): Promise<TurnReply> {
  const uid = request.conversationId;
  if ('cancel' in request) {
    const { requestId, comment } = request;
    return cancelRequest(
      parts,
      caller,
      conversation,
      { type: 'question', requestId, comment },
      signal,
    );
  }
  return parts.claims.run(conversation, signal, async (lease) => {
    const view = await parts.runner.startView(conversation, lease, signal);
    const plan = planQuestionAnswer({
      view,
      conversation,
      caller,
      requestId: request.requestId,
      answer: request.answer,
      lease,
      nowMs: parts.nowMs(),
      deploymentHistoryTokens: parts.historyTokens,
    });
    if (plan.kind === 'refuse') throw plan.error;
    await parts.runner.commit(uid, lease, plan.events);
    return parts.runner.drive(conversation, lease, plan.turn.turnId);
  });
}
