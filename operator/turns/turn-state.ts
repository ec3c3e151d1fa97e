/**
 * Where a turn stands in the control plane's words, and what it waits on, read from its
 * record in a journal view (journal-view.ts). Pure.
 *
 * The rule is common/turn-standing.ts, the one the UI and replay read a turn by; the view
 * folds it over each turn's events (lazy-view.ts). This file names its states as the
 * control plane acts on them ({@link turnState}):
 * - `received`: never dispatched. Batch one writes message and dispatch together, so only a
 *   damaged journal shows this; such a turn is no orphan and not in the transcript.
 * - `orphan`: running, or resolved and not dispatched again: a dispatch with nothing
 *   settling or pausing it, which recovery runs again. The coordinator resumes a paused turn
 *   by appending the answer and a new `turn_dispatched` in one batch, so an answered,
 *   re-dispatched turn without an outcome is an orphan again (its new attempt crashed); so
 *   is a quarantined turn an admin resolved (docs/turns.md, "Resolving a quarantined turn").
 * - `awaiting_approval` / `awaiting_answer`: paused on a request with no answer after it.
 * - `complete` (a reply, the fallback reply, or a cancel's reply), `ambiguous`
 *   (quarantined, never retried automatically), `handoff`: settled.
 */
import { StandingState } from '../../common/turn-standing';
import type { ApprovalRequest, QuestionRequest } from '../../proto/gen/polychrome/events/v1/events';
import type { JournalView, TurnView } from './journal-view-types';

/** Where a turn stands; see the rules at the top of this file. */
export const TurnState = {
  Received: 'received',
  Orphan: 'orphan',
  AwaitingApproval: 'awaiting_approval',
  AwaitingAnswer: 'awaiting_answer',
  Complete: 'complete',
  Ambiguous: 'ambiguous',
  Handoff: 'handoff',
} as const;
export type TurnState = (typeof TurnState)[keyof typeof TurnState];

/** The control plane's name for each standing (common/turn-standing.ts). */
const TURN_STATE_OF: { readonly [S in StandingState]: TurnState } = {
  [StandingState.Received]: TurnState.Received,
  [StandingState.Running]: TurnState.Orphan,
  [StandingState.Resolved]: TurnState.Orphan,
  [StandingState.AwaitingApproval]: TurnState.AwaitingApproval,
  [StandingState.AwaitingAnswer]: TurnState.AwaitingAnswer,
  [StandingState.Complete]: TurnState.Complete,
  [StandingState.Failed]: TurnState.Complete,
  [StandingState.Cancelled]: TurnState.Complete,
  [StandingState.Quarantined]: TurnState.Ambiguous,
  [StandingState.HandedOff]: TurnState.Handoff,
};

/** The request a paused turn waits on. */
export type PendingRequest =
  | { readonly type: 'approval'; readonly position: number; readonly request: ApprovalRequest }
  | { readonly type: 'question'; readonly position: number; readonly request: QuestionRequest };

/** Where `turn` stands (rules at the top of this file). */
export function turnState(turn: TurnView): TurnState {
  return TURN_STATE_OF[turn.standingFold.standing.state];
}

/**
 * The request a paused turn waits on (the standing names it: one after the turn's latest
 * dispatch with no answer after it, the later of two).
 */
export function pendingRequest(turn: TurnView): PendingRequest | undefined {
  const standing = turn.standingFold.standing;
  switch (standing.state) {
    case StandingState.AwaitingApproval: {
      const found = turn.approvalRequests.findLast((r) => r.position === standing.position);
      return found === undefined ? undefined : { type: 'approval', ...found };
    }
    case StandingState.AwaitingAnswer: {
      const found = turn.questionRequests.findLast((r) => r.position === standing.position);
      return found === undefined ? undefined : { type: 'question', ...found };
    }
    default:
      return undefined;
  }
}

/** The attempt number of the turn's next dispatch: its highest attempt + 1 (1 when none). */
export function nextAttempt(turn: TurnView): number {
  let highest = 0;
  for (const dispatch of turn.dispatches) highest = Math.max(highest, dispatch.attempt);
  return highest + 1;
}

/**
 * The orphan to recover first: the one whose message came first. Paused, settled,
 * quarantined (ambiguous) and never-dispatched turns are never returned.
 */
export function oldestOrphan(view: JournalView): TurnView | undefined {
  return view.openTurns.find((turn) => turnState(turn) === TurnState.Orphan);
}

/** The turn waiting for an approval or an answer (the oldest, should there be several). */
export function pendingTurn(view: JournalView): TurnView | undefined {
  return view.openTurns.find((turn) => pendingRequest(turn) !== undefined);
}

/** The turn an idempotency key opened, if any. */
export function turnForKey(view: JournalView, idempotencyKey: string): TurnView | undefined {
  const turnId = view.turnIdsByKey.get(idempotencyKey);
  return turnId === undefined ? undefined : view.turnsById.get(turnId);
}
