/**
 * What the control plane adds to the state plane's rule before it erases (docs/turns.md,
 * "Erased entries"): an entry of a turn may be erased only once the turn is settled, so a
 * turn in flight never loses what it is working from, and a fallback `turn_complete` never,
 * since its text is the system's and its `fallback` flag decides the turn's standing. The
 * state plane checks the rest (the kinds, readability, positions). Pure.
 */
import { AppError } from '../../common/errors';
import { isSettled } from '../../common/turn-standing';
import type { JournalView, TurnView } from '../turns/journal-view-types';

/** The turn whose entry sits at `position`, if any. */
function turnAt(view: JournalView, position: number): TurnView | undefined {
  const holds = (list: readonly { readonly position: number }[]): boolean =>
    list.some((item) => item.position === position);
  return view.turns.find(
    (turn) =>
      turn.messagePosition === position ||
      turn.terminal?.position === position ||
      holds(turn.steps) ||
      holds(turn.questionRequests) ||
      holds(turn.questionResponses),
  );
}

/** Why the entry at `position` may not be erased now, or undefined. */
function refusalAt(view: JournalView, position: number): string | undefined {
  const turn = turnAt(view, position);
  if (turn === undefined) return undefined;
  const { state } = turn.standingFold.standing;
  if (!isSettled(state)) {
    return `it belongs to turn ${turn.turnId}, which is ${state}, not settled: erase once the turn has ended`;
  }
  const terminal = turn.terminal;
  if (
    terminal?.kind === 'turn_complete' &&
    terminal.position === position &&
    terminal.payload.fallback
  ) {
    return `it is the fallback answer of turn ${turn.turnId}: the system's text, whose flag settles the turn as failed`;
  }
  return undefined;
}

/**
 * Refuses an erasure of `positions` in `conversationId` whose journal folds to `view`.
 *
 * @throws AppError `failed_precondition` naming every refused position and why.
 */
export function checkErasable(
  conversationId: string,
  view: JournalView,
  positions: readonly number[],
): void {
  const refused = positions.flatMap((position) => {
    const why = refusalAt(view, position);
    return why === undefined ? [] : [`position ${String(position)} cannot be erased: ${why}`];
  });
  if (refused.length > 0) {
    throw new AppError(
      'failed_precondition',
      `conversation ${conversationId}: nothing was erased: ${refused.join('; ')}`,
      { details: { conversationId } },
    );
  }
}
