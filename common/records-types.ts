import { Role } from './persona-roles';
import type { StateCallOptions } from './state-calls';

/*
 * The records of the state plane's Records service as its clients see them: personas,
 * sessions, credentials, ceremonies (never a token, code or secret). Proto messages stop at
 * common/records-from-proto.ts.
 */

const roles: readonly string[] = Object.values(Role);

/** True when `value` names a {@link Role} a persona can hold. */
export function isPersonaRole(value: string): value is Role {
  return roles.includes(value);
}

/** Kinds of ceremony. */
export const CeremonyKindName = { LinkIdentity: 'link-identity' } as const;
export type CeremonyKindName = (typeof CeremonyKindName)[keyof typeof CeremonyKindName];

/** A persona: the person behind identities, with roles and a version for changes. */
export interface PersonaRecord {
  readonly id: string;
  readonly displayName: string;
  /** Sorted. */
  readonly identities: readonly string[];
  readonly roles: readonly Role[];
  /** Pass it back as `expectedVersion` to change only what you read. */
  readonly version: number;
  readonly createdAtMs: number;
  readonly updatedAtMs: number;
  /** Who last set the roles (SetRoles) and when; absent when none has. */
  readonly rolesSetBy?: string;
  readonly rolesSetAtMs?: number;
}

/** A session (never its token). */
export interface SessionRecord {
  readonly id: string;
  readonly personaId: string;
  readonly createdAtMs: number;
  readonly expiresAtMs: number;
  readonly revokedAtMs: number | undefined;
  /** The identity that minted it; empty for a session recorded before minters were. */
  readonly mintedBy: string;
}

/** A credential's metadata (never its secret). */
export interface CredentialRecord {
  readonly id: string;
  readonly personaId: string;
  readonly kind: string;
  readonly label: string;
  readonly createdAtMs: number;
  /** The records key it is sealed under. */
  readonly keyId: string;
}

/** A ceremony (never its code). */
export interface CeremonyRecord {
  readonly id: string;
  /** `link-identity`. */
  readonly kind: string;
  readonly personaId: string;
  readonly identity: string;
  /** `pending`, `completed`, `expired` or `failed`. */
  readonly state: string;
  readonly attempts: number;
  readonly maxAttempts: number;
  readonly createdAtMs: number;
  readonly expiresAtMs: number;
  readonly endedAtMs: number | undefined;
  readonly failureReason: string | undefined;
}

/** Optimistic concurrency for a persona change, plus the per-call options. */
export interface PersonaChangeOptions extends StateCallOptions {
  /** The version last read; omit to change whatever is there. */
  readonly expectedVersion?: number;
}
