import type {
  CeremonyResponse,
  CompleteCeremonyResponse,
  ListCeremoniesResponse,
  StartCeremonyResponse,
} from '../proto/gen/polychrome/state/v1/records';
import type { RecordsConnection } from './records-connection';
import { ceremonyFromProto, personaFromProto } from './records-from-proto';
import type { CeremonyKindName, CeremonyRecord, PersonaRecord } from './records-types';
import type { StateCallOptions } from './state-calls';

/* The ceremony calls of the Records service (RecordsClient's ceremony methods). */

/** A ceremony to start (common/records-client.ts `startCeremony`). */
export interface NewCeremonyInput {
  readonly kind: CeremonyKindName;
  readonly personaId: string;
  readonly identity: string;
  readonly ttlMs?: number;
  readonly maxAttempts?: number;
}

/**
 * Starts a ceremony. `code` is the only copy: deliver it to the identity, never log it.
 *
 * @param input.ttlMs @default 10 minutes (at most 1 hour)
 * @param input.maxAttempts @default 5 (at most 10)
 * @throws StateCallError `not_found`, `invalid_argument`, `already_exists` (the identity
 *   is linked elsewhere), `failed_precondition` (the persona already holds it).
 */
export async function startCeremony(
  connection: RecordsConnection,
  input: NewCeremonyInput,
  options: StateCallOptions = {},
): Promise<{ ceremony: CeremonyRecord; code: string }> {
  const response = await connection.unary<StartCeremonyResponse>(
    'StartCeremony',
    options,
    (m, o, done) =>
      connection.grpc.startCeremony(
        {
          kind: input.kind,
          personaId: input.personaId,
          identity: input.identity,
          ttlMs: input.ttlMs,
          maxAttempts: input.maxAttempts,
        },
        m,
        o,
        done,
      ),
  );
  return {
    ceremony: ceremonyFromProto(connection.required(response.ceremony, 'StartCeremony')),
    code: response.code,
  };
}

/**
 * Completes a ceremony with the code; a `link-identity` ceremony links its identity.
 *
 * @throws StateCallError `permission_denied` for a wrong code (`details.attemptsLeft`),
 *   `failed_precondition` (expired or no longer pending), `not_found`,
 *   `invalid_argument`, `already_exists`.
 */
export async function completeCeremony(
  connection: RecordsConnection,
  ceremonyId: string,
  code: string,
  options: StateCallOptions = {},
): Promise<{ ceremony: CeremonyRecord; persona: PersonaRecord }> {
  const response = await connection.unary<CompleteCeremonyResponse>(
    'CompleteCeremony',
    options,
    (m, o, done) => connection.grpc.completeCeremony({ ceremonyId, code }, m, o, done),
  );
  return {
    ceremony: ceremonyFromProto(connection.required(response.ceremony, 'CompleteCeremony')),
    persona: personaFromProto(connection.required(response.persona, 'CompleteCeremony')),
  };
}

/**
 * The ceremony `ceremonyId`.
 *
 * @throws StateCallError `not_found`, `invalid_argument`.
 */
export async function getCeremony(
  connection: RecordsConnection,
  ceremonyId: string,
  options: StateCallOptions = {},
): Promise<CeremonyRecord> {
  const response = await connection.unary<CeremonyResponse>('GetCeremony', options, (m, o, done) =>
    connection.grpc.getCeremony({ ceremonyId }, m, o, done),
  );
  return ceremonyFromProto(connection.required(response.ceremony, 'GetCeremony'));
}

/**
 * The persona's ceremonies in id order.
 *
 * @throws StateCallError `not_found`, `invalid_argument`.
 */
export async function listCeremonies(
  connection: RecordsConnection,
  personaId: string,
  options: StateCallOptions = {},
): Promise<CeremonyRecord[]> {
  const response = await connection.unary<ListCeremoniesResponse>(
    'ListCeremonies',
    options,
    (m, o, done) => connection.grpc.listCeremonies({ personaId }, m, o, done),
  );
  return response.ceremonies.map(ceremonyFromProto);
}
