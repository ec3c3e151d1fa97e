import type { RecordContext } from './record-context';
import type { RecordOp } from './record-db';
import {
  ceremonyKey,
  credentialKey,
  personaIndexKey,
  personaIndexPrefix,
  sessionKey,
  sessionTokenKey,
  Tag,
  type PersonaIndexTag,
} from './record-keys';
import { sessionSchema } from './record-schemas';
import { decodeValue } from './record-values';

/**
 * The ops that delete what persona `personaId` owns, found through its indexes: its
 * sessions (with their token entries), credentials, ceremonies and payment records
 * (persona-payments.ts), with the index entries.
 * The caller holds the exclusive section and writes them in the persona's own batch.
 *
 * @throws AppError `data_loss` when a session record is unreadable.
 */
export async function ownedRecordDeletions(
  ctx: RecordContext,
  personaId: string,
): Promise<RecordOp[]> {
  const id = personaId;
  const ops: RecordOp[] = [];
  const indexed = async (tag: PersonaIndexTag): Promise<string[]> => {
    const prefix = personaIndexPrefix(tag, id);
    return (await ctx.db.scan(prefix)).map(([key]) => key.slice(prefix.length));
  };
  for (const sessionId of await indexed(Tag.PersonaSession)) {
    const key = sessionKey(sessionId);
    const text = await ctx.db.get(key);
    if (text !== undefined) {
      const session = decodeValue(sessionSchema, text, key);
      ops.push({ type: 'del', key: sessionTokenKey(session.tokenHash) });
    }
    ops.push(
      { type: 'del', key },
      { type: 'del', key: personaIndexKey(Tag.PersonaSession, id, sessionId) },
    );
  }
  for (const credentialId of await indexed(Tag.PersonaCredential)) {
    ops.push(
      { type: 'del', key: credentialKey(credentialId) },
      { type: 'del', key: personaIndexKey(Tag.PersonaCredential, id, credentialId) },
    );
  }
  for (const ceremonyId of await indexed(Tag.PersonaCeremony)) {
    ops.push(
      { type: 'del', key: ceremonyKey(ceremonyId) },
      { type: 'del', key: personaIndexKey(Tag.PersonaCeremony, id, ceremonyId) },
    );
  }
  // A persona's payment policy history and counted payments go with it.
  for (const tag of [Tag.PersonaPaymentPolicy, Tag.PersonaSpend, Tag.PersonaSpendKey] as const) {
    for (const [key] of await ctx.db.scan(personaIndexPrefix(tag, id))) {
      ops.push({ type: 'del', key });
    }
  }
  return ops;
}
