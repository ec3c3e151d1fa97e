/*
 * Key layout of the records, all inside the LevelDB sublevel `records` (every raw key starts
 * with `!records!`, so the journal store's keys, which start with 'M' or 'P', never meet
 * ours). Keys and values are UTF-8; values are JSON (record-values.ts).
 *
 *   meta:format                                  → polychrome-records/v1 (plain text, checked on open)
 *   persona:{personaId}                          → persona record
 *   identity:{identity}                          → personaId: the identity is linked to it
 *   session:{sessionId}                          → session record (with its token hash)
 *   session-token:{sha256(token) hex}            → sessionId
 *   persona-session:{personaId}/{sessionId}      → null (index: a persona's sessions)
 *   credential:{credentialId}                    → credential record (with its sealed value)
 *   persona-credential:{personaId}/{credentialId} → null
 *   ceremony:{ceremonyId}                        → ceremony record (with its code MAC)
 *   persona-ceremony:{personaId}/{ceremonyId}    → null
 *   persona-payment-policy:{personaId}/{sequence, 10 digits} → one change of its payment policy
 *   persona-spend:{personaId}/{atMs, 15 digits}/{idempotencyKey} → a payment counted against it
 *   persona-spend-key:{personaId}/{idempotencyKey} → the persona-spend key of that payment
 *
 * Record ids are `[A-Za-z0-9_-]` only (record-input.ts), so `{personaId}/` is a prefix of
 * that persona's index keys and nobody else's ("p1/" cannot start "p10/..."). An identity
 * may hold any character but `:`-free segments; it is the last thing in its key, so it
 * needs no terminator. Distinct tags never prefix each other: `persona:` and
 * `persona-session:` part at the byte after "persona" (':' vs '-').
 *
 * Every write that changes a record changes its indexes in the same atomic batch, so an
 * index entry exists exactly when its record does.
 */

/** Key of the format marker. */
export const FORMAT_KEY = 'meta:format';
/** The format marker's value; a different value means another layout. */
export const RECORDS_FORMAT = 'polychrome-records/v1';

/** Key prefixes, one per record or index type. */
export const Tag = {
  Persona: 'persona:',
  Identity: 'identity:',
  Session: 'session:',
  SessionToken: 'session-token:',
  PersonaSession: 'persona-session:',
  Credential: 'credential:',
  PersonaCredential: 'persona-credential:',
  Ceremony: 'ceremony:',
  PersonaCeremony: 'persona-ceremony:',
  PersonaPaymentPolicy: 'persona-payment-policy:',
  PersonaSpend: 'persona-spend:',
  PersonaSpendKey: 'persona-spend-key:',
} as const;
export type Tag = (typeof Tag)[keyof typeof Tag];

/** The per-persona index tags. */
export type PersonaIndexTag =
  | typeof Tag.PersonaSession
  | typeof Tag.PersonaCredential
  | typeof Tag.PersonaCeremony
  | typeof Tag.PersonaPaymentPolicy
  | typeof Tag.PersonaSpend
  | typeof Tag.PersonaSpendKey;

/** Key of a persona record. */
export const personaKey = (personaId: string): string => Tag.Persona + personaId;
/** Key of the index entry naming the persona an identity is linked to. */
export const identityKey = (identity: string): string => Tag.Identity + identity;
/** Key of a session record. */
export const sessionKey = (sessionId: string): string => Tag.Session + sessionId;
/** Key of the index entry from a token's SHA-256 (hex) to its session. */
export const sessionTokenKey = (tokenHashHex: string): string => Tag.SessionToken + tokenHashHex;
/** Key of a credential record. */
export const credentialKey = (credentialId: string): string => Tag.Credential + credentialId;
/** Key of a ceremony record. */
export const ceremonyKey = (ceremonyId: string): string => Tag.Ceremony + ceremonyId;

/** Key of the index entry that says `personaId` owns the record `recordId`. */
export function personaIndexKey(tag: PersonaIndexTag, personaId: string, recordId: string): string {
  return `${personaIndexPrefix(tag, personaId)}${recordId}`;
}

/** Prefix of every index entry of `tag` for `personaId`. */
export function personaIndexPrefix(tag: PersonaIndexTag, personaId: string): string {
  return `${tag}${personaId}/`;
}
