/**
 * Erased entries in the journal view (docs/turns.md, "Erased entries"): an admin erased the
 * content of some entries (docs/journal-format.md, "Erasure"); each is excised, and a
 * sealed `excision` record marked `erased` after it names its kind and turn. The fold keeps
 * the turn and its standing, and leaves out the content:
 *
 * - a fresh fold meets the excised entry before its record, so it reads the batch's records
 *   ahead ({@link erasuresIn}) and folds an erased `message_received` as the turn's message
 *   with no content, and an erased `turn_complete` as its terminal with no text: the turn is
 *   opened and settled as it was;
 * - every fold applies the record itself as an amendment ({@link eraseInTurn}): the content
 *   at that position leaves the turn (a view folded before the erasure held it), and the
 *   position is listed in the turn's `erasedPositions`. So a view extended across an erasure
 *   equals a fresh fold of the erased journal.
 */
import { decodePayload, EventKind } from '../../common/event-kinds';
import type { JournalEntry } from '../../common/state-journal';
import { MessageReceived, TurnComplete } from '../../proto/gen/polychrome/events/v1/events';
import type { TurnView } from './journal-view-types';

/** What the transcript and a turn's reply show for an erased message or answer. */
export const ERASED_TEXT = '[erased]';

/** What an erasure record says of the entry it erased. */
export interface ErasedRef {
  readonly position: number;
  readonly kind: string;
  readonly turnId: string;
}

/**
 * The erasures recorded in `entries`, by erased position: the look-ahead of a fold. A record
 * that does not decode is left out here (the fold's own decoding fails on it).
 */
export function erasuresIn(entries: readonly JournalEntry[]): ReadonlyMap<number, ErasedRef> {
  const found = new Map<number, ErasedRef>();
  for (const entry of entries) {
    if (entry.excised === true || entry.kind !== EventKind.Excision) continue;
    try {
      const ref = erasureOf(decodePayload(EventKind.Excision, entry.payload));
      if (ref !== undefined) found.set(ref.position, ref);
    } catch {
      continue;
    }
  }
  return found;
}

/** The erased entry an `excision` payload names, or undefined for a repair's. */
export function erasureOf(payload: {
  readonly position: number;
  readonly erased: boolean;
  readonly erasedKind: string;
  readonly turnId: string;
}): ErasedRef | undefined {
  if (!payload.erased) return undefined;
  return { position: payload.position, kind: payload.erasedKind, turnId: payload.turnId };
}

/** The message of an erased `message_received`: its turn, nothing it said. */
export function erasedMessage(turnId: string): MessageReceived {
  return MessageReceived.fromPartial({ turnId });
}

/** The payload of an erased `turn_complete`: its turn, no answer. */
export function erasedAnswer(turnId: string): TurnComplete {
  return TurnComplete.fromPartial({ turnId });
}

/** `turn` with the content at `erased.position` left out and that position listed. */
export function eraseInTurn(turn: TurnView, erased: ErasedRef): TurnView {
  const { position } = erased;
  const at = <T extends { readonly position: number }>(list: readonly T[]): T[] =>
    list.filter((item) => item.position !== position);
  const listed = new Set([...(turn.erasedPositions ?? []), position]);
  const message =
    position === turn.messagePosition
      ? {
          text: '',
          idempotencyKey: '',
          attribution: { caller: '', participants: [], persona: '', session: '' },
          receivedAtMs: 0,
        }
      : {};
  const terminal =
    turn.terminal?.kind === 'turn_complete' && turn.terminal.position === position
      ? { ...turn.terminal, payload: erasedAnswer(turn.turnId) }
      : turn.terminal;
  return {
    ...turn,
    ...message,
    steps: at(turn.steps),
    questionRequests: at(turn.questionRequests),
    questionResponses: at(turn.questionResponses),
    terminal,
    erasedPositions: [...listed].sort((a, b) => a - b),
  };
}

/** Whether the turn's message was erased. */
export function isMessageErased(turn: TurnView): boolean {
  return turn.erasedPositions?.includes(turn.messagePosition) === true;
}

/** Whether the turn's answer (its `turn_complete`) was erased. */
export function isAnswerErased(turn: TurnView): boolean {
  const terminal = turn.terminal;
  return terminal !== undefined && turn.erasedPositions?.includes(terminal.position) === true;
}
