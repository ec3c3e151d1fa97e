import { createHash } from 'node:crypto';
import { AppError } from '../../common/errors';

/** Domain prefix of the turn id derivation: no other hash in the system starts with it. */
export const TURN_ID_DOMAIN = 'polychrome/turn/v1';

/**
 * The durable turn id of a claim (docs/design.md "One turn, end to end", step 1): an exact
 * retry of a message (same conversation, same idempotency key) derives the same id and so
 * finds the same turn in the journal instead of starting a second one.
 *
 *     turn_id = "turn_" ‖ hex( SHA-256( "polychrome/turn/v1" ‖ 0x00 ‖ conversation_id ‖ 0x00 ‖ idempotency_key )[0..16] )
 *
 * Strings are UTF-8, hex is lowercase. The NUL separators make the input injective as long
 * as the conversation id holds no NUL (the idempotency key is last, so it may hold any
 * character): ("ab", "c") and ("a", "bc") hash different bytes.
 *
 * @throws AppError `invalid_argument` when the conversation id is empty or holds a NUL, or
 *   the idempotency key is empty (every keyless message would share one turn).
 */
export function turnIdFor(conversationId: string, idempotencyKey: string): string {
  if (conversationId === '' || conversationId.includes('\u0000')) {
    throw new AppError(
      'invalid_argument',
      'turn id: the conversation id must be non-empty and hold no NUL character',
      { details: { field: 'conversationId' } },
    );
  }
  if (idempotencyKey === '') {
    throw new AppError(
      'invalid_argument',
      `turn id for conversation ${conversationId}: the idempotency key is empty; send a non-empty key`,
      { details: { field: 'idempotencyKey', conversationId } },
    );
  }
  const digest = createHash('sha256')
    .update(`${TURN_ID_DOMAIN}\u0000${conversationId}\u0000${idempotencyKey}`, 'utf8')
    .digest();
  return `turn_${digest.subarray(0, 16).toString('hex')}`;
}
