/**
 * The status fields the turn code owns (DESIGN.md, "Kubernetes objects"): while a turn is
 * in flight `Progressing` is True (TurnRunning, AwaitingApproval, AwaitingAnswer) and
 * `currentTurn` names it; a quarantined turn sets `Degraded` TurnAmbiguous; every settled
 * batch moves `journal` (head, last signed root). The reconciler carries these over
 * (controller/report.ts) and owns everything else. Pure: the coordinator writes the result.
 */
import {
  ConditionReason,
  ConditionType,
  ConversationPhase,
  type Condition,
  type ConversationStatus,
} from '../api/v1alpha1';

/** The journal position and integrity the status shows. */
export interface JournalMark {
  readonly head: number;
  /** Lowercase hex of the last signed root. */
  readonly lastSignedRoot: string;
  readonly keyId: string;
}

export type TurnStatusChange = (
  | { readonly kind: 'running'; readonly turnId: string }
  | { readonly kind: 'awaiting_approval'; readonly turnId: string; readonly requestId: string }
  | { readonly kind: 'awaiting_answer'; readonly turnId: string; readonly requestId: string }
  | { readonly kind: 'settled'; readonly turnId: string }
  | {
      readonly kind: 'ambiguous';
      readonly turnId: string;
      readonly toolCallId: string;
      readonly reason: string;
    }
) & {
  /**
   * When the turn started: (re)opens the conversation and resets the idle timer. A change
   * that replaces a waiting one carries it on, so coalesced writes never lose it.
   */
  readonly lastTurnTime?: string;
};

/**
 * The next status after a turn event. Conditions keep their `lastTransitionTime` while
 * their status does not change; `observedGeneration` is the object's generation.
 */
export function applyTurnStatus(
  status: ConversationStatus | undefined,
  generation: number,
  change: TurnStatusChange,
  journal: JournalMark | undefined,
  now: string,
): ConversationStatus {
  const previous = status ?? {};
  const conditions = [...(previous.conditions ?? [])];
  const put = (condition: Omit<Condition, 'lastTransitionTime' | 'observedGeneration'>): void => {
    const index = conditions.findIndex((c) => c.type === condition.type);
    const old = index === -1 ? undefined : conditions[index];
    const next: Condition = {
      ...condition,
      observedGeneration: generation,
      lastTransitionTime:
        old !== undefined && old.status === condition.status ? old.lastTransitionTime : now,
    };
    if (index === -1) conditions.push(next);
    else conditions[index] = next;
  };

  const next: ConversationStatus = { ...previous };
  if (change.lastTurnTime !== undefined) {
    next.lastTurnTime = change.lastTurnTime;
    delete next.closedTime;
  }
  switch (change.kind) {
    case 'running':
      next.currentTurn = change.turnId;
      next.phase = ConversationPhase.Running;
      put({
        type: ConditionType.Progressing,
        status: 'True',
        reason: ConditionReason.TurnRunning,
        message: `turn ${change.turnId} is running`,
      });
      break;
    case 'awaiting_approval':
      next.currentTurn = change.turnId;
      next.phase = ConversationPhase.AwaitingApproval;
      put({
        type: ConditionType.Progressing,
        status: 'True',
        reason: ConditionReason.AwaitingApproval,
        message: `turn ${change.turnId} waits for approval ${change.requestId}: answer it with POST .../approvals/${change.requestId}`,
      });
      break;
    case 'awaiting_answer':
      next.currentTurn = change.turnId;
      next.phase = ConversationPhase.AwaitingAnswer;
      put({
        type: ConditionType.Progressing,
        status: 'True',
        reason: ConditionReason.AwaitingAnswer,
        message: `turn ${change.turnId} waits for an answer to question ${change.requestId}`,
      });
      break;
    case 'settled':
    case 'ambiguous':
      delete next.currentTurn;
      put({
        type: ConditionType.Progressing,
        status: 'False',
        reason: ConditionReason.SandboxReady,
        message: `turn ${change.turnId} settled; the conversation takes the next turn`,
      });
      if (change.kind === 'ambiguous') {
        next.phase = ConversationPhase.Degraded;
        put({
          type: ConditionType.Degraded,
          status: 'True',
          reason: ConditionReason.TurnAmbiguous,
          message: `turn ${change.turnId} is quarantined: the outcome of side-effecting tool call ${change.toolCallId} is unknown (${change.reason}); an admin must check it and repair the conversation`,
        });
      } else {
        next.phase =
          previous.phase === ConversationPhase.Degraded ? previous.phase : ConversationPhase.Ready;
      }
      break;
  }
  next.conditions = conditions;
  if (journal !== undefined) {
    next.journal = {
      head: journal.head,
      lastSignedRoot: journal.lastSignedRoot,
      keyId: journal.keyId,
    };
  }
  return next;
}
