import type {
  AuthenticateResponse,
  CreateSessionResponse,
  ListSessionsResponse,
  SessionResponse,
} from '../proto/gen/polychrome/state/v1/records';
import type { RecordsConnection } from './records-connection';
import { personaFromProto, sessionFromProto } from './records-from-proto';
import type { PersonaRecord, SessionRecord } from './records-types';
import type { StateCallOptions } from './state-calls';

/* The session calls of the Records service (RecordsClient's session methods). */

/** A session to open (common/records-client.ts `createSession`). */
export interface NewSessionInput {
  readonly mintedBy: string;
  readonly ttlMs?: number;
}

/**
 * Opens a session. `token` is the only copy: hand it to the client, never log it.
 * `mintedBy` (the identity that mints it) is recorded with the session.
 *
 * @param input.ttlMs @default 12 hours (at most 30 days)
 * @throws StateCallError `not_found`, `invalid_argument`.
 */
export async function createSession(
  connection: RecordsConnection,
  personaId: string,
  input: NewSessionInput,
  options: StateCallOptions = {},
): Promise<{ session: SessionRecord; token: string }> {
  const response = await connection.unary<CreateSessionResponse>(
    'CreateSession',
    options,
    (m, o, done) =>
      connection.grpc.createSession(
        { personaId, ttlMs: input.ttlMs, mintedBy: input.mintedBy },
        m,
        o,
        done,
      ),
  );
  return {
    session: sessionFromProto(connection.required(response.session, 'CreateSession')),
    token: response.token,
  };
}

/**
 * Checks a bearer token.
 *
 * @throws StateCallError `unauthenticated` when it is malformed, unknown, revoked or
 *   expired.
 */
export async function authenticate(
  connection: RecordsConnection,
  token: string,
  options: StateCallOptions = {},
): Promise<{ session: SessionRecord; persona: PersonaRecord }> {
  const response = await connection.unary<AuthenticateResponse>(
    'Authenticate',
    options,
    (m, o, done) => connection.grpc.authenticate({ token }, m, o, done),
  );
  return {
    session: sessionFromProto(connection.required(response.session, 'Authenticate')),
    persona: personaFromProto(connection.required(response.persona, 'Authenticate')),
  };
}

/**
 * The session `sessionId`.
 *
 * @throws StateCallError `not_found`, `invalid_argument`.
 */
export async function getSession(
  connection: RecordsConnection,
  sessionId: string,
  options: StateCallOptions = {},
): Promise<SessionRecord> {
  const response = await connection.unary<SessionResponse>('GetSession', options, (m, o, done) =>
    connection.grpc.getSession({ sessionId }, m, o, done),
  );
  return sessionFromProto(connection.required(response.session, 'GetSession'));
}

/**
 * Revokes the session; its token stops working at once.
 *
 * @throws StateCallError `not_found`, `invalid_argument`.
 */
export async function revokeSession(
  connection: RecordsConnection,
  sessionId: string,
  options: StateCallOptions = {},
): Promise<SessionRecord> {
  const response = await connection.unary<SessionResponse>('RevokeSession', options, (m, o, done) =>
    connection.grpc.revokeSession({ sessionId }, m, o, done),
  );
  return sessionFromProto(connection.required(response.session, 'RevokeSession'));
}

/**
 * The persona's sessions (live, expired, revoked) in id order.
 *
 * @throws StateCallError `not_found`, `invalid_argument`.
 */
export async function listSessions(
  connection: RecordsConnection,
  personaId: string,
  options: StateCallOptions = {},
): Promise<SessionRecord[]> {
  const response = await connection.unary<ListSessionsResponse>(
    'ListSessions',
    options,
    (m, o, done) => connection.grpc.listSessions({ personaId }, m, o, done),
  );
  return response.sessions.map(sessionFromProto);
}
