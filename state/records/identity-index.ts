import { AppError } from '../../common/errors';
import type { RecordOp, RecordReader } from './record-db';
import { quoteValue } from './record-input';
import { identityKey } from './record-keys';
import { idSchema } from './record-schemas';
import { decodeValue, encodeValue } from './record-values';

/*
 * The identity index: one `identity:` entry per linked identity, naming its persona, so an
 * identity links to at most one persona. PersonaRecords keeps it in the same batches as the
 * personas.
 */

/** The op that links `identity` to `personaId` in the index. */
export function putIdentity(identity: string, personaId: string): RecordOp {
  return { type: 'put', key: identityKey(identity), value: encodeValue(personaId) };
}

/**
 * The persona `identity` (already checked) is linked to, or `undefined`.
 *
 * @throws AppError `data_loss` when the entry is unreadable.
 */
export async function identityOwner(
  reader: RecordReader,
  identity: string,
): Promise<string | undefined> {
  const key = identityKey(identity);
  const text = await reader.get(key);
  return text === undefined ? undefined : decodeValue(idSchema, text, key);
}

/**
 * Throws unless no persona holds `identity`.
 *
 * @throws AppError `already_exists` naming the holder in details.
 */
export async function requireFreeIdentity(
  reader: RecordReader,
  identity: string,
  forPersonaId: string,
): Promise<void> {
  const owner = await identityOwner(reader, identity);
  if (owner === undefined) return;
  throw new AppError(
    'already_exists',
    `identity ${quoteValue(identity)} is already linked to another persona; unlink it ` +
      `there before linking it to persona ${forPersonaId}`,
    { details: { record: 'persona', identity, linkedPersonaId: owner, personaId: forPersonaId } },
  );
}
