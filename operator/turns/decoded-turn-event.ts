/**
 * The checks and the shape every turn event decodes to (decoded-event.ts and its parts,
 * decoded-payment.ts): a payload that names no turn, or does not decode, is malformed.
 */
import { AppError } from '../../common/errors';
import type { EventKind } from '../../common/event-kinds';
import type { DecodedEvent, TurnEventKind } from './decoded-event-types';
import type { TurnView } from './journal-view-types';

/** A turn's event: checked to name a turn, folded into it by `apply`. */
export function turnEvent(
  position: number,
  kind: TurnEventKind,
  turnId: string,
  payload: unknown,
  apply: (turn: TurnView) => TurnView,
): DecodedEvent {
  requireTurnId(position, kind, turnId);
  return { type: 'turn', position, kind, turnId, payload, apply };
}

export function requireTurnId(position: number, kind: EventKind, turnId: string): void {
  if (turnId === '') throw malformed(position, kind, 'the payload names no turn (empty turn_id)');
}

/** A journal entry that cannot be read: nothing past it can be. */
export function malformed(
  position: number,
  kind: EventKind,
  what: string,
  cause?: unknown,
): AppError {
  return new AppError(
    'data_loss',
    `journal position ${position} (${kind}): ${what}; the journal cannot be read past it`,
    { details: { position, kind }, ...(cause === undefined ? {} : { cause }) },
  );
}
