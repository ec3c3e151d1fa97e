import type {
  Ceremony as CeremonyProto,
  Credential as CredentialProto,
  Persona as PersonaProto,
  Session as SessionProto,
} from '../proto/gen/polychrome/state/v1/records';
import {
  isPersonaRole,
  type CeremonyRecord,
  type CredentialRecord,
  type PersonaRecord,
  type SessionRecord,
} from './records-types';

/* The Records service's proto messages as the records of common/records-types.ts. */

/** The client form of a persona; roles this client does not know are left out. */
export function personaFromProto(proto: PersonaProto): PersonaRecord {
  return {
    id: proto.id,
    displayName: proto.displayName,
    identities: [...proto.identities],
    roles: proto.roles.filter(isPersonaRole),
    version: proto.version,
    createdAtMs: proto.createdAtMs,
    updatedAtMs: proto.updatedAtMs,
    ...(proto.rolesSetBy === undefined ? {} : { rolesSetBy: proto.rolesSetBy }),
    ...(proto.rolesSetAtMs === undefined ? {} : { rolesSetAtMs: proto.rolesSetAtMs }),
  };
}

/** The client form of a session. */
export function sessionFromProto(proto: SessionProto): SessionRecord {
  return {
    id: proto.id,
    personaId: proto.personaId,
    createdAtMs: proto.createdAtMs,
    expiresAtMs: proto.expiresAtMs,
    revokedAtMs: proto.revokedAtMs,
    mintedBy: proto.mintedBy,
  };
}

/** The client form of a credential's metadata. */
export function credentialFromProto(proto: CredentialProto): CredentialRecord {
  return {
    id: proto.id,
    personaId: proto.personaId,
    kind: proto.kind,
    label: proto.label,
    createdAtMs: proto.createdAtMs,
    keyId: proto.keyId,
  };
}

/** The client form of a ceremony. */
export function ceremonyFromProto(proto: CeremonyProto): CeremonyRecord {
  return {
    id: proto.id,
    kind: proto.kind,
    personaId: proto.personaId,
    identity: proto.identity,
    state: proto.state,
    attempts: proto.attempts,
    maxAttempts: proto.maxAttempts,
    createdAtMs: proto.createdAtMs,
    expiresAtMs: proto.expiresAtMs,
    endedAtMs: proto.endedAtMs,
    failureReason: proto.failureReason,
  };
}
