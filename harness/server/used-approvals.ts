import type { ApprovalUse } from '../turn/approval-token';
import type { RequestIds } from '../../common/request-ids';
import type { ApprovalAnswer, TurnStep } from '../turn/turn-records';

/**
 * The single-use ids of the approval answers this harness has used (docs/approvals.md,
 * "Single use"). The harness serves one conversation, so the set is that conversation's.
 *
 * An answer counts as used once a step that consumes it is committed: the approved call's
 * `tool_call` (its `approval_request_id` names the request) or the denied `tool_result`.
 * A new pod knows only the history the control plane sends it, so every start also marks
 * the answers its recorded steps already consumed: a replay after a restart meets the same
 * refusal as one on the pod that used it.
 */
export class UsedApprovals {
  private readonly used = new Set<string>();

  constructor(private readonly ids: RequestIds) {}

  has(approvalId: string): boolean {
    return this.used.has(approvalId);
  }

  /** The use rules of one call: answers for `conversation`, unexpired at `nowMs`, unused. */
  useFor(conversation: string, nowMs: number): ApprovalUse {
    return { conversation, nowMs, isUsed: (id) => this.used.has(id) };
  }

  /** Marks the answers `step` consumes among `answers` (the call's recorded answers). */
  noteStep(step: TurnStep, answers: readonly ApprovalAnswer[]): void {
    const requestId = this.consumedRequest(step);
    if (requestId === undefined) return;
    for (const answer of answers) {
      if (answer.requestId === requestId && answer.scope !== undefined) {
        this.used.add(answer.scope.approvalId);
      }
    }
  }

  /** Marks what the recorded history already consumed. */
  noteHistory(steps: readonly TurnStep[], answers: readonly ApprovalAnswer[]): void {
    for (const step of steps) this.noteStep(step, answers);
  }

  private consumedRequest(step: TurnStep): string | undefined {
    if (step.kind === 'tool_call' && step.record.approvalRequestId !== '') {
      return step.record.approvalRequestId;
    }
    if (step.kind === 'tool_result' && step.record.denied) {
      return this.ids.approvalRequestId(step.record.turnId, step.record.toolCallId);
    }
    return undefined;
  }
}
