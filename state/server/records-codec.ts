import { AppError } from '../../common/errors';
import type {
  Ceremony as CeremonyProto,
  CreateCredentialRequest,
  CreatePersonaRequest,
  Credential as CredentialProto,
  ListPersonasRequest,
  ListPersonasResponse,
  Persona as PersonaProto,
  Session as SessionProto,
  StartCeremonyRequest,
} from '../../proto/gen/polychrome/state/v1/records';
import { CeremonyKind } from '../records/record-schemas';
import { type Ceremony, type NewCeremony } from '../records/ceremony-records';
import { type Credential, type NewCredential } from '../records/credential-records';
import { type NewPersona, type Persona } from '../records/persona-records';
import { type Session } from '../records/session-records';
import { checkRoles } from '../records/persona-checks';

/*
 * Proto messages stop here (STYLE.md §1): one toProto per record the service answers with,
 * one fromProto per request that carries more than ids. The record layer validates every
 * value (ids, names, identities, ttl); this file only maps shapes, and checks the closed
 * sets that the proto carries as plain strings, so the domain never sees a string where it
 * expects a role or a ceremony kind.
 */

/** The wire form of a persona. */
export function personaToProto(persona: Persona): PersonaProto {
  return {
    id: persona.id,
    displayName: persona.displayName,
    identities: [...persona.identities],
    roles: [...persona.roles],
    version: persona.version,
    createdAtMs: persona.createdAtMs,
    updatedAtMs: persona.updatedAtMs,
    ...(persona.rolesSetBy === null ? {} : { rolesSetBy: persona.rolesSetBy }),
    ...(persona.rolesSetAtMs === null ? {} : { rolesSetAtMs: persona.rolesSetAtMs }),
  };
}

/** The wire form of a session: never its token or hash (the domain type has neither). */
export function sessionToProto(session: Session): SessionProto {
  return {
    id: session.id,
    personaId: session.personaId,
    createdAtMs: session.createdAtMs,
    expiresAtMs: session.expiresAtMs,
    ...(session.revokedAtMs === null ? {} : { revokedAtMs: session.revokedAtMs }),
    mintedBy: session.mintedBy ?? '',
  };
}

/** The wire form of a credential's metadata (the secret travels only in Reveal). */
export function credentialToProto(credential: Credential): CredentialProto {
  return {
    id: credential.id,
    personaId: credential.personaId,
    kind: credential.kind,
    label: credential.label,
    createdAtMs: credential.createdAtMs,
    keyId: credential.keyId,
  };
}

/** The wire form of a ceremony: never its code or MAC. */
export function ceremonyToProto(ceremony: Ceremony): CeremonyProto {
  return {
    id: ceremony.id,
    kind: ceremony.kind,
    personaId: ceremony.personaId,
    identity: ceremony.identity,
    state: ceremony.state,
    attempts: ceremony.attempts,
    maxAttempts: ceremony.maxAttempts,
    createdAtMs: ceremony.createdAtMs,
    expiresAtMs: ceremony.expiresAtMs,
    ...(ceremony.endedAtMs === null ? {} : { endedAtMs: ceremony.endedAtMs }),
    ...(ceremony.failureReason === null ? {} : { failureReason: ceremony.failureReason }),
  };
}

/**
 * The persona to create. An absent role list means the default ([member]); an empty one
 * means no roles.
 *
 * @throws AppError `invalid_argument` for a role outside `Role`.
 */
export function newPersonaFromProto(request: CreatePersonaRequest): NewPersona {
  return {
    displayName: request.displayName,
    identities: request.identities,
    ...(request.roles === undefined ? {} : { roles: checkRoles(request.roles.roles) }),
    ...(request.rolesSetBy === undefined ? {} : { rolesSetBy: request.rolesSetBy }),
  };
}

/** The credential to store; the record layer checks kind, label and secret. */
export function newCredentialFromProto(request: CreateCredentialRequest): NewCredential {
  return {
    personaId: request.personaId,
    kind: request.kind,
    label: request.label,
    secret: new Uint8Array(request.secret),
  };
}

const ceremonyKinds: readonly string[] = Object.values(CeremonyKind);

/** True when `value` names a {@link CeremonyKind}. */
export function isCeremonyKind(value: string): value is CeremonyKind {
  return ceremonyKinds.includes(value);
}

/**
 * The ceremony to start.
 *
 * @throws AppError `invalid_argument` for a kind outside `CeremonyKind`.
 */
export function newCeremonyFromProto(request: StartCeremonyRequest): NewCeremony {
  const kind = request.kind;
  if (!isCeremonyKind(kind)) {
    throw new AppError(
      'invalid_argument',
      `ceremony kind ${JSON.stringify(kind.slice(0, 80))} is unknown; kinds are ` +
        ceremonyKinds.join(', '),
      { details: { record: 'ceremony', field: 'kind' } },
    );
  }
  return {
    kind,
    personaId: request.personaId,
    identity: request.identity,
    ...(request.ttlMs === undefined ? {} : { ttlMs: request.ttlMs }),
    ...(request.maxAttempts === undefined ? {} : { maxAttempts: request.maxAttempts }),
  };
}

/** Page size when a ListPersonas request gives none: the record layer's default. */
export const DEFAULT_PERSONA_PAGE = 100;

/** A page request as the record layer takes it: the page token is the last id seen. */
export function listPersonasFromProto(request: ListPersonasRequest): {
  after?: string;
  limit?: number;
} {
  return {
    ...(request.pageToken === '' ? {} : { after: request.pageToken }),
    ...(request.limit === undefined ? {} : { limit: request.limit }),
  };
}

/**
 * A page as the wire carries it. A full page gets its last id as the next token (the next
 * page may then be empty); a short page is the last.
 */
export function listPersonasToProto(
  personas: readonly Persona[],
  limit: number,
): ListPersonasResponse {
  const last = personas.at(-1);
  return {
    personas: personas.map(personaToProto),
    nextPageToken: personas.length >= limit && last !== undefined ? last.id : '',
  };
}
