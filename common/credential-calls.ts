import type {
  CredentialResponse,
  DeleteCredentialResponse,
  ListCredentialsResponse,
  RevealCredentialResponse,
} from '../proto/gen/polychrome/state/v1/records';
import type { RecordsConnection } from './records-connection';
import { credentialFromProto } from './records-from-proto';
import type { CredentialRecord } from './records-types';
import type { StateCallOptions } from './state-calls';

/* The credential calls of the Records service (RecordsClient's credential methods). */

/** A credential to store (common/records-client.ts `createCredential`). */
export interface NewCredentialInput {
  readonly personaId: string;
  readonly kind: string;
  readonly label: string;
  /** Bytes, or text sent as UTF-8. */
  readonly secret: Uint8Array | string;
}

/**
 * Stores a credential; the state plane seals `secret` under the records key.
 *
 * @throws StateCallError `not_found`, `invalid_argument`.
 */
export async function createCredential(
  connection: RecordsConnection,
  input: NewCredentialInput,
  options: StateCallOptions = {},
): Promise<CredentialRecord> {
  const request = {
    personaId: input.personaId,
    kind: input.kind,
    label: input.label,
    secret: Buffer.from(input.secret),
  };
  const response = await connection.unary<CredentialResponse>(
    'CreateCredential',
    options,
    (m, o, done) => connection.grpc.createCredential(request, m, o, done),
  );
  return credentialFromProto(connection.required(response.credential, 'CreateCredential'));
}

/**
 * A credential's metadata.
 *
 * @throws StateCallError `not_found`, `invalid_argument`.
 */
export async function getCredential(
  connection: RecordsConnection,
  credentialId: string,
  options: StateCallOptions = {},
): Promise<CredentialRecord> {
  const response = await connection.unary<CredentialResponse>(
    'GetCredential',
    options,
    (m, o, done) => connection.grpc.getCredential({ credentialId }, m, o, done),
  );
  return credentialFromProto(connection.required(response.credential, 'GetCredential'));
}

/**
 * A credential's metadata and its secret in the clear: use it where the secret is
 * needed, never log it.
 *
 * @throws StateCallError `not_found`, `invalid_argument`, `data_loss` (sealed under
 *   another records key, or changed).
 */
export async function revealCredential(
  connection: RecordsConnection,
  credentialId: string,
  options: StateCallOptions = {},
): Promise<{ credential: CredentialRecord; secret: Uint8Array }> {
  const response = await connection.unary<RevealCredentialResponse>(
    'RevealCredential',
    options,
    (m, o, done) => connection.grpc.revealCredential({ credentialId }, m, o, done),
  );
  return {
    credential: credentialFromProto(connection.required(response.credential, 'RevealCredential')),
    secret: new Uint8Array(response.secret),
  };
}

/**
 * The persona's credentials (metadata only) in id order.
 *
 * @throws StateCallError `not_found`, `invalid_argument`.
 */
export async function listCredentials(
  connection: RecordsConnection,
  personaId: string,
  options: StateCallOptions = {},
): Promise<CredentialRecord[]> {
  const response = await connection.unary<ListCredentialsResponse>(
    'ListCredentials',
    options,
    (m, o, done) => connection.grpc.listCredentials({ personaId }, m, o, done),
  );
  return response.credentials.map(credentialFromProto);
}

/**
 * Deletes a credential.
 *
 * @throws StateCallError `not_found`, `invalid_argument`.
 */
export async function deleteCredential(
  connection: RecordsConnection,
  credentialId: string,
  options: StateCallOptions = {},
): Promise<void> {
  await connection.unary<DeleteCredentialResponse>('DeleteCredential', options, (m, o, done) =>
    connection.grpc.deleteCredential({ credentialId }, m, o, done),
  );
}
