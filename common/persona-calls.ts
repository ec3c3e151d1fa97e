import type {
  DeletePersonaResponse,
  FindPersonaByIdentityResponse,
  ListPersonasResponse,
  PersonaResponse,
} from '../proto/gen/polychrome/state/v1/records';
import type { Role } from './persona-roles';
import type { RecordsConnection } from './records-connection';
import { personaFromProto } from './records-from-proto';
import type { PersonaChangeOptions, PersonaRecord } from './records-types';
import type { StateCallOptions } from './state-calls';

/* The persona calls of the Records service (RecordsClient's persona methods). */

/** A persona to create (common/records-client.ts `createPersona`). */
export interface NewPersonaInput {
  readonly displayName: string;
  readonly roles?: readonly Role[];
  readonly identities?: readonly string[];
  readonly rolesSetBy?: string;
}

/**
 * Creates a persona, linking `identities` at once.
 *
 * @param input.roles @default [member]
 * @param input.rolesSetBy the identity giving the roles, recorded as `rolesSetBy`
 * @throws StateCallError `invalid_argument`, `already_exists` (an identity is linked
 *   elsewhere; `details.linkedPersonaId`), `resource_exhausted`, `permission_denied`,
 *   `failed_precondition` (admin with a ServiceAccount identity).
 */
export async function createPersona(
  connection: RecordsConnection,
  input: NewPersonaInput,
  options: StateCallOptions = {},
): Promise<PersonaRecord> {
  const request = {
    displayName: input.displayName,
    identities: [...(input.identities ?? [])],
    ...(input.roles === undefined ? {} : { roles: { roles: [...input.roles] } }),
    ...(input.rolesSetBy === undefined ? {} : { rolesSetBy: input.rolesSetBy }),
  };
  const response = await connection.unary<PersonaResponse>('CreatePersona', options, (m, o, done) =>
    connection.grpc.createPersona(request, m, o, done),
  );
  return personaFromProto(connection.required(response.persona, 'CreatePersona'));
}

/**
 * The persona `personaId`.
 *
 * @throws StateCallError `invalid_argument`, `not_found`, `permission_denied`.
 */
export async function getPersona(
  connection: RecordsConnection,
  personaId: string,
  options: StateCallOptions = {},
): Promise<PersonaRecord> {
  const response = await connection.unary<PersonaResponse>('GetPersona', options, (m, o, done) =>
    connection.grpc.getPersona({ personaId }, m, o, done),
  );
  return personaFromProto(connection.required(response.persona, 'GetPersona'));
}

/**
 * The persona `identity` is linked to, or `undefined`.
 *
 * @throws StateCallError `invalid_argument`, `permission_denied`.
 */
export async function findPersonaByIdentity(
  connection: RecordsConnection,
  identity: string,
  options: StateCallOptions = {},
): Promise<PersonaRecord | undefined> {
  const response = await connection.unary<FindPersonaByIdentityResponse>(
    'FindPersonaByIdentity',
    options,
    (m, o, done) => connection.grpc.findPersonaByIdentity({ identity }, m, o, done),
  );
  return response.persona === undefined ? undefined : personaFromProto(response.persona);
}

/**
 * One page of personas in id order. Pass `nextPageToken` back as `pageToken` for the
 * next page; it is `undefined` after the last (a full last page is followed by an empty
 * one).
 *
 * @param page.limit @default 100 (at most 1000)
 * @throws StateCallError `invalid_argument`, `permission_denied`.
 */
export async function listPersonas(
  connection: RecordsConnection,
  page: { readonly limit?: number; readonly pageToken?: string } = {},
  options: StateCallOptions = {},
): Promise<{ personas: PersonaRecord[]; nextPageToken: string | undefined }> {
  const response = await connection.unary<ListPersonasResponse>(
    'ListPersonas',
    options,
    (m, o, done) =>
      connection.grpc.listPersonas(
        {
          pageToken: page.pageToken ?? '',
          ...(page.limit === undefined ? {} : { limit: page.limit }),
        },
        m,
        o,
        done,
      ),
  );
  return {
    personas: response.personas.map(personaFromProto),
    nextPageToken: response.nextPageToken === '' ? undefined : response.nextPageToken,
  };
}

/**
 * Links `identity` to the persona (no change when it already holds it).
 *
 * @throws RecordConflictError on a stale `expectedVersion`; StateCallError
 *   `already_exists`, `not_found`, `invalid_argument`, `resource_exhausted`.
 */
export async function linkIdentity(
  connection: RecordsConnection,
  personaId: string,
  identity: string,
  options: PersonaChangeOptions = {},
): Promise<PersonaRecord> {
  const response = await connection.unary<PersonaResponse>('LinkIdentity', options, (m, o, done) =>
    connection.grpc.linkIdentity(
      { personaId, identity, expectedVersion: options.expectedVersion },
      m,
      o,
      done,
    ),
  );
  return personaFromProto(connection.required(response.persona, 'LinkIdentity'));
}

/**
 * Unlinks `identity` from the persona.
 *
 * @throws RecordConflictError; StateCallError `not_found` (also when the persona does
 *   not hold it), `invalid_argument`.
 */
export async function unlinkIdentity(
  connection: RecordsConnection,
  personaId: string,
  identity: string,
  options: PersonaChangeOptions = {},
): Promise<PersonaRecord> {
  const response = await connection.unary<PersonaResponse>(
    'UnlinkIdentity',
    options,
    (m, o, done) =>
      connection.grpc.unlinkIdentity(
        { personaId, identity, expectedVersion: options.expectedVersion },
        m,
        o,
        done,
      ),
  );
  return personaFromProto(connection.required(response.persona, 'UnlinkIdentity'));
}

/**
 * Replaces the persona's roles; the records keep `setBy` (the identity that sets them)
 * and the time with the persona.
 *
 * @throws RecordConflictError; StateCallError `not_found`, `invalid_argument`,
 *   `failed_precondition` (admin for a persona that links a ServiceAccount).
 */
export async function setRoles(
  connection: RecordsConnection,
  personaId: string,
  newRoles: readonly Role[],
  options: PersonaChangeOptions & { readonly setBy: string },
): Promise<PersonaRecord> {
  const response = await connection.unary<PersonaResponse>('SetRoles', options, (m, o, done) =>
    connection.grpc.setRoles(
      {
        personaId,
        roles: [...newRoles],
        expectedVersion: options.expectedVersion,
        setBy: options.setBy,
      },
      m,
      o,
      done,
    ),
  );
  return personaFromProto(connection.required(response.persona, 'SetRoles'));
}

/**
 * Changes the persona's display name.
 *
 * @throws RecordConflictError; StateCallError `not_found`, `invalid_argument`.
 */
export async function renamePersona(
  connection: RecordsConnection,
  personaId: string,
  displayName: string,
  options: PersonaChangeOptions = {},
): Promise<PersonaRecord> {
  const response = await connection.unary<PersonaResponse>('RenamePersona', options, (m, o, done) =>
    connection.grpc.renamePersona(
      { personaId, displayName, expectedVersion: options.expectedVersion },
      m,
      o,
      done,
    ),
  );
  return personaFromProto(connection.required(response.persona, 'RenamePersona'));
}

/**
 * Deletes the persona with its identity links, sessions, credentials and ceremonies.
 *
 * @throws RecordConflictError; StateCallError `not_found`, `invalid_argument`.
 */
export async function deletePersona(
  connection: RecordsConnection,
  personaId: string,
  options: PersonaChangeOptions = {},
): Promise<void> {
  await connection.unary<DeletePersonaResponse>('DeletePersona', options, (m, o, done) =>
    connection.grpc.deletePersona(
      { personaId, expectedVersion: options.expectedVersion },
      m,
      o,
      done,
    ),
  );
}
