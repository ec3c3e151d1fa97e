import { z } from 'zod';

/*
 * Stored shapes of the records (JSON values, record-keys.ts) and the closed sets they use.
 * Unknown fields are dropped on read, so a later version may add fields that an older
 * reader ignores; removing or retyping a field needs a new RECORDS_FORMAT.
 */

import { Role } from '../../common/persona-roles';

/** Kinds of ceremony. */
export const CeremonyKind = {
  /** Prove control of an identity with a one-time code, then link it to the persona. */
  LinkIdentity: 'link-identity',
} as const;
export type CeremonyKind = (typeof CeremonyKind)[keyof typeof CeremonyKind];

/** Where a ceremony stands. Only `pending` can move; the other three are final. */
export const CeremonyState = {
  Pending: 'pending',
  Completed: 'completed',
  Expired: 'expired',
  Failed: 'failed',
} as const;
export type CeremonyState = (typeof CeremonyState)[keyof typeof CeremonyState];

const time = z.number().int().nonnegative();

/** A persona record (`persona:{id}`). */
export const personaSchema = z.object({
  id: z.string(),
  displayName: z.string(),
  /** Sorted, unique. */
  identities: z.array(z.string()),
  /** In the order of {@link Role}, unique. */
  roles: z.array(z.enum(Role)),
  version: z.number().int().positive(),
  createdAtMs: time,
  updatedAtMs: time,
  /**
   * Who last set the roles with setRoles, and when; null when none has since the record
   * was created (roles given at creation, or a record written before these fields).
   */
  rolesSetBy: z.string().nullable().default(null),
  rolesSetAtMs: time.nullable().default(null),
});
/** The parsed form of the record. */
export type StoredPersona = z.infer<typeof personaSchema>;

/** A session record (`session:{id}`). */
export const sessionSchema = z.object({
  id: z.string(),
  personaId: z.string(),
  /** Hex SHA-256 of the bearer token; the token itself is never stored. */
  tokenHash: z.string().regex(/^[0-9a-f]{64}$/),
  createdAtMs: time,
  expiresAtMs: time,
  revokedAtMs: time.nullable(),
  /** The identity that minted it; null in a record written before minters were recorded. */
  mintedBy: z.string().nullable().default(null),
});
/** The parsed form of the record. */
export type StoredSession = z.infer<typeof sessionSchema>;

/** A credential record (`credential:{id}`). */
export const credentialSchema = z.object({
  id: z.string(),
  personaId: z.string(),
  kind: z.string(),
  label: z.string(),
  createdAtMs: time,
  /** Key id of the records key that sealed the value (records-key.ts). */
  keyId: z.string(),
  /** credential-seal.ts format, base64url. */
  sealed: z.string(),
});
/** The parsed form of the record. */
export type StoredCredential = z.infer<typeof credentialSchema>;

/** A ceremony record (`ceremony:{id}`). */
export const ceremonySchema = z.object({
  id: z.string(),
  kind: z.enum(CeremonyKind),
  personaId: z.string(),
  identity: z.string(),
  state: z.enum(CeremonyState),
  /** Hex HMAC-SHA-256 of the code under the records code key; the code is never stored. */
  codeMac: z.string().regex(/^[0-9a-f]{64}$/),
  attempts: z.number().int().nonnegative(),
  maxAttempts: z.number().int().positive(),
  createdAtMs: time,
  expiresAtMs: time,
  /** When the ceremony left `pending`, or null. */
  endedAtMs: time.nullable(),
  /** Why it failed or expired, for audit; null otherwise. */
  failureReason: z.string().nullable(),
});
/** The parsed form of the record. */
export type StoredCeremony = z.infer<typeof ceremonySchema>;

/** Index entries that point at a record id. */
export const idSchema = z.string();
/** Index entries that only mark membership. */
export const markSchema = z.null();

/** One change of a persona's payment policy (`persona-payment-policy:{id}/{sequence}`). */
export const personaPaymentPolicySchema = z.object({
  personaId: z.string(),
  /** A wallet name, or '' for none. */
  wallet: z.string(),
  /** Canonical JSON of the spend limits, or '' for none. */
  limitsJson: z.string(),
  setBy: z.string(),
  session: z.string(),
  reason: z.string(),
  setAtMs: time,
  sequence: z.number().int().positive(),
});
/** The parsed form of the record. */
export type StoredPersonaPaymentPolicy = z.infer<typeof personaPaymentPolicySchema>;

/** A payment counted against a persona (`persona-spend:{id}/{atMs}/{key}`). */
export const personaSpendSchema = z.object({
  personaId: z.string(),
  idempotencyKey: z.string(),
  conversationId: z.string(),
  network: z.string(),
  asset: z.string(),
  amount: z.string().regex(/^[0-9]{1,78}$/),
  atMs: time,
});
/** The parsed form of the record. */
export type StoredPersonaSpend = z.infer<typeof personaSpendSchema>;
