/**
 * Where a turn stands and what it waits on, read from its record in a journal view
 * (journal-view.ts). Pure.
 *
 * Turn state ({@link turnState}), in this order:
 * 1. A terminal marker (`turn_complete`, `turn_ambiguous`, `handoff`) settles the turn for
 *    good: `complete`, `ambiguous` (quarantined, never retried), `handoff`. A later
 *    terminal marker is ignored.
 * 2. No `turn_dispatched`: `received`. Batch one writes message and dispatch together, so
 *    only a damaged journal shows this; such a turn is no orphan and not in the transcript.
 * 3. After the latest dispatch there is a request with no answer after it (an
 *    `approval_response` / `question_response` with the same request id at a later
 *    position): `awaiting_approval` / `awaiting_answer`. An answer recorded before the
 *    request does not count, so a harness that rejected an answer and paused again with
 *    the same request id leaves the turn paused, not orphaned.
 * 4. Anything else: `orphan`, a dispatch with nothing settling or pausing it. The
 *    coordinator resumes a paused turn by appending the answer and a new `turn_dispatched`
 *    in one batch, so an answered, re-dispatched turn without an outcome is an orphan
 *    again (its new attempt crashed) and recovery picks it up.
 */
import type { ApprovalRequest, QuestionRequest } from '../../proto/gen/polychrome/events/v1/events';
import type { JournalView, RecordedResponse, TurnView } from './journal-view';

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

/** The request a paused turn waits on. */
export type PendingRequest =
  | { readonly type: 'approval'; readonly position: number; readonly request: ApprovalRequest }
  | { readonly type: 'question'; readonly position: number; readonly request: QuestionRequest };

/** Where `turn` stands (rules at the top of this file). */
export function turnState(turn: TurnView): TurnState {
  switch (turn.terminal?.kind) {
    case 'turn_complete':
      return TurnState.Complete;
    case 'turn_ambiguous':
      return TurnState.Ambiguous;
    case 'handoff':
      return TurnState.Handoff;
    case undefined:
      break;
  }
  if (turn.dispatches.length === 0) return TurnState.Received;
  const pending = pendingRequest(turn);
  if (pending === undefined) return TurnState.Orphan;
  return pending.type === 'approval' ? TurnState.AwaitingApproval : TurnState.AwaitingAnswer;
}

/**
 * The request an unsettled turn waits on: one after its latest dispatch with no answer
 * (same request id) after it. Should one attempt have left two (a harness pauses once per
 * call), the later one.
 */
export function pendingRequest(turn: TurnView): PendingRequest | undefined {
  if (turn.terminal !== undefined) return undefined;
  const latest = turn.dispatches.at(-1);
  if (latest === undefined) return undefined;
  let pending: PendingRequest | undefined;
  for (const { position, request } of turn.approvalRequests) {
    if (position < latest.position) continue;
    if (isAnswered(request.requestId, position, turn.approvalResponses)) continue;
    if (pending === undefined || position > pending.position) {
      pending = { type: 'approval', position, request };
    }
  }
  for (const { position, request } of turn.questionRequests) {
    if (position < latest.position) continue;
    if (isAnswered(request.requestId, position, turn.questionResponses)) continue;
    if (pending === undefined || position > pending.position) {
      pending = { type: 'question', position, request };
    }
  }
  return pending;
}

function isAnswered(
  requestId: string,
  requestPosition: number,
  responses: readonly RecordedResponse<{ readonly requestId: string }>[],
): boolean {
  return responses.some((r) => r.response.requestId === requestId && r.position > requestPosition);
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
  return view.turns.find((turn) => turnState(turn) === TurnState.Orphan);
}

/** The turn waiting for an approval or an answer (the oldest, should there be several). */
export function pendingTurn(view: JournalView): TurnView | undefined {
  return view.turns.find((turn) => pendingRequest(turn) !== undefined);
}

/** The turn an idempotency key opened, if any. */
export function turnForKey(view: JournalView, idempotencyKey: string): TurnView | undefined {
  const turnId = view.turnIdsByKey.get(idempotencyKey);
  return turnId === undefined ? undefined : view.turnsById.get(turnId);
}
