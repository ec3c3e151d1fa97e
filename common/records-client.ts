import * as ceremonyCalls from './ceremony-calls';
import type { Role } from './persona-roles';
import * as credentialCalls from './credential-calls';
import * as personaCalls from './persona-calls';
import * as paymentCalls from './persona-payment-calls';
import { RecordsConnection } from './records-connection';
import type {
  CeremonyRecord,
  CredentialRecord,
  PersonaChangeOptions,
  PersonaRecord,
  SessionRecord,
} from './records-types';
import * as sessionCalls from './session-calls';
import type { StateCallOptions } from './state-calls';
import type { StateClientOptions } from './state-channel';

/*
 * The typed client of the state plane's Records service (proto/polychrome/state/v1/
 * records.proto): personas, sessions, credentials, ceremonies. It dials the state plane
 * like StateClient (same mutual TLS channel helpers, same error contract) and needs a
 * certificate with the writer role: every Records call, reads included, is refused to
 * anyone else. Proto messages stop at common/records-from-proto.ts: callers get the record
 * types of common/records-types.ts. Each method is the call of its kind of record in
 * persona-calls.ts, session-calls.ts, credential-calls.ts or ceremony-calls.ts, whose
 * TSDoc says what it throws.
 */

/**
 * The typed client of the Records service over mutual TLS. Every failure is an AppError:
 * a {@link RecordConflictError} for a stale `expectedVersion`, a StateCallError otherwise
 * (`already_exists`, `unauthenticated`, `permission_denied`, ... as the state plane
 * reports them, README of state/records).
 *
 * @example
 * async function signIn(tls: StateClientTls, identity: string): Promise<string | undefined> {
 *   const records = new RecordsClient({ address: 'localhost:7443', tls });
 *   try {
 *     const persona = await records.findPersonaByIdentity(identity);
 *     return persona === undefined ? undefined : (await records.createSession(persona.id)).token;
 *   } finally {
 *     records.close();
 *   }
 * }
 */
export class RecordsClient {
  private readonly connection: RecordsConnection;

  constructor(options: StateClientOptions) {
    this.connection = new RecordsConnection(options);
  }

  /**
   * Waits until the channel is connected (TLS handshake done).
   *
   * @throws StateCallError `unavailable` when it is not connected within `timeoutMs`.
   */
  waitForReady(timeoutMs: number): Promise<void> {
    return this.connection.waitForReady(timeoutMs);
  }

  /** Closes the channel; calls in flight fail. Idempotent. */
  close(): void {
    this.connection.close();
  }

  // --- Personas ---

  /** Creates a persona, linking `identities` at once (see {@link personaCalls.createPersona}). */
  createPersona(
    input: personaCalls.NewPersonaInput,
    options: StateCallOptions = {},
  ): Promise<PersonaRecord> {
    return personaCalls.createPersona(this.connection, input, options);
  }

  /** The persona `personaId` (see {@link personaCalls.getPersona}). */
  getPersona(personaId: string, options: StateCallOptions = {}): Promise<PersonaRecord> {
    return personaCalls.getPersona(this.connection, personaId, options);
  }

  /** The persona `identity` is linked to, or `undefined` (see {@link personaCalls.findPersonaByIdentity}). */
  findPersonaByIdentity(
    identity: string,
    options: StateCallOptions = {},
  ): Promise<PersonaRecord | undefined> {
    return personaCalls.findPersonaByIdentity(this.connection, identity, options);
  }

  /** One page of personas in id order (see {@link personaCalls.listPersonas}). */
  listPersonas(
    page: { readonly limit?: number; readonly pageToken?: string } = {},
    options: StateCallOptions = {},
  ): Promise<{ personas: PersonaRecord[]; nextPageToken: string | undefined }> {
    return personaCalls.listPersonas(this.connection, page, options);
  }

  /** Links `identity` to the persona (no change when it already holds it) (see {@link personaCalls.linkIdentity}). */
  linkIdentity(
    personaId: string,
    identity: string,
    options: PersonaChangeOptions = {},
  ): Promise<PersonaRecord> {
    return personaCalls.linkIdentity(this.connection, personaId, identity, options);
  }

  /** Unlinks `identity` from the persona (see {@link personaCalls.unlinkIdentity}). */
  unlinkIdentity(
    personaId: string,
    identity: string,
    options: PersonaChangeOptions = {},
  ): Promise<PersonaRecord> {
    return personaCalls.unlinkIdentity(this.connection, personaId, identity, options);
  }

  /** Replaces the persona's roles; the records keep `setBy` (the identity that sets them) and the time with the persona (see {@link personaCalls.setRoles}). */
  setRoles(
    personaId: string,
    newRoles: readonly Role[],
    options: PersonaChangeOptions & { readonly setBy: string },
  ): Promise<PersonaRecord> {
    return personaCalls.setRoles(this.connection, personaId, newRoles, options);
  }

  /** Changes the persona's display name (see {@link personaCalls.renamePersona}). */
  renamePersona(
    personaId: string,
    displayName: string,
    options: PersonaChangeOptions = {},
  ): Promise<PersonaRecord> {
    return personaCalls.renamePersona(this.connection, personaId, displayName, options);
  }

  /** Deletes the persona with its identity links, sessions, credentials and ceremonies (see {@link personaCalls.deletePersona}). */
  deletePersona(personaId: string, options: PersonaChangeOptions = {}): Promise<void> {
    return personaCalls.deletePersona(this.connection, personaId, options);
  }

  // --- Persona payments ---

  /** Appends a change of the persona's payment policy (see {@link paymentCalls.setPersonaPaymentPolicy}). */
  setPersonaPaymentPolicy(
    input: paymentCalls.NewPersonaPaymentPolicy,
    options: StateCallOptions = {},
  ): Promise<paymentCalls.PersonaPaymentPolicies> {
    return paymentCalls.setPersonaPaymentPolicy(this.connection, input, options);
  }

  /** The persona's payment policy and its history (see {@link paymentCalls.getPersonaPaymentPolicy}). */
  getPersonaPaymentPolicy(
    personaId: string,
    options: StateCallOptions = {},
  ): Promise<paymentCalls.PersonaPaymentPolicies> {
    return paymentCalls.getPersonaPaymentPolicy(this.connection, personaId, options);
  }

  /** Counts a payment against the persona, once per idempotency key (see {@link paymentCalls.recordPersonaSpend}). */
  recordPersonaSpend(
    spend: paymentCalls.PersonaSpendRecord,
    cap?: paymentCalls.PersonaSpendCap,
    options: StateCallOptions = {},
  ): Promise<{ spend: paymentCalls.PersonaSpendRecord; recorded: boolean }> {
    return paymentCalls.recordPersonaSpend(this.connection, spend, cap, options);
  }

  /** The payments counted against the persona since `sinceMs` (see {@link paymentCalls.listPersonaSpends}). */
  listPersonaSpends(
    personaId: string,
    sinceMs: number,
    options: StateCallOptions = {},
  ): Promise<paymentCalls.PersonaSpendRecord[]> {
    return paymentCalls.listPersonaSpends(this.connection, personaId, sinceMs, options);
  }

  // --- Sessions ---

  /** Opens a session (see {@link sessionCalls.createSession}). */
  createSession(
    personaId: string,
    input: sessionCalls.NewSessionInput,
    options: StateCallOptions = {},
  ): Promise<{ session: SessionRecord; token: string }> {
    return sessionCalls.createSession(this.connection, personaId, input, options);
  }

  /** Checks a bearer token (see {@link sessionCalls.authenticate}). */
  authenticate(
    token: string,
    options: StateCallOptions = {},
  ): Promise<{ session: SessionRecord; persona: PersonaRecord }> {
    return sessionCalls.authenticate(this.connection, token, options);
  }

  /** The session `sessionId` (see {@link sessionCalls.getSession}). */
  getSession(sessionId: string, options: StateCallOptions = {}): Promise<SessionRecord> {
    return sessionCalls.getSession(this.connection, sessionId, options);
  }

  /** Revokes the session; its token stops working at once (see {@link sessionCalls.revokeSession}). */
  revokeSession(sessionId: string, options: StateCallOptions = {}): Promise<SessionRecord> {
    return sessionCalls.revokeSession(this.connection, sessionId, options);
  }

  /** The persona's sessions (live, expired, revoked) in id order (see {@link sessionCalls.listSessions}). */
  listSessions(personaId: string, options: StateCallOptions = {}): Promise<SessionRecord[]> {
    return sessionCalls.listSessions(this.connection, personaId, options);
  }

  // --- Credentials ---

  /** Stores a credential; the state plane seals `secret` under the records key (see {@link credentialCalls.createCredential}). */
  createCredential(
    input: credentialCalls.NewCredentialInput,
    options: StateCallOptions = {},
  ): Promise<CredentialRecord> {
    return credentialCalls.createCredential(this.connection, input, options);
  }

  /** A credential's metadata (see {@link credentialCalls.getCredential}). */
  getCredential(credentialId: string, options: StateCallOptions = {}): Promise<CredentialRecord> {
    return credentialCalls.getCredential(this.connection, credentialId, options);
  }

  /** A credential's metadata and its secret in the clear: use it where the secret is needed, never log it (see {@link credentialCalls.revealCredential}). */
  revealCredential(
    credentialId: string,
    options: StateCallOptions = {},
  ): Promise<{ credential: CredentialRecord; secret: Uint8Array }> {
    return credentialCalls.revealCredential(this.connection, credentialId, options);
  }

  /** The persona's credentials (metadata only) in id order (see {@link credentialCalls.listCredentials}). */
  listCredentials(personaId: string, options: StateCallOptions = {}): Promise<CredentialRecord[]> {
    return credentialCalls.listCredentials(this.connection, personaId, options);
  }

  /** Deletes a credential (see {@link credentialCalls.deleteCredential}). */
  deleteCredential(credentialId: string, options: StateCallOptions = {}): Promise<void> {
    return credentialCalls.deleteCredential(this.connection, credentialId, options);
  }

  // --- Ceremonies ---

  /** Starts a ceremony (see {@link ceremonyCalls.startCeremony}). */
  startCeremony(
    input: ceremonyCalls.NewCeremonyInput,
    options: StateCallOptions = {},
  ): Promise<{ ceremony: CeremonyRecord; code: string }> {
    return ceremonyCalls.startCeremony(this.connection, input, options);
  }

  /** Completes a ceremony with the code; a `link-identity` ceremony links its identity (see {@link ceremonyCalls.completeCeremony}). */
  completeCeremony(
    ceremonyId: string,
    code: string,
    options: StateCallOptions = {},
  ): Promise<{ ceremony: CeremonyRecord; persona: PersonaRecord }> {
    return ceremonyCalls.completeCeremony(this.connection, ceremonyId, code, options);
  }

  /** The ceremony `ceremonyId` (see {@link ceremonyCalls.getCeremony}). */
  getCeremony(ceremonyId: string, options: StateCallOptions = {}): Promise<CeremonyRecord> {
    return ceremonyCalls.getCeremony(this.connection, ceremonyId, options);
  }

  /** The persona's ceremonies in id order (see {@link ceremonyCalls.listCeremonies}). */
  listCeremonies(personaId: string, options: StateCallOptions = {}): Promise<CeremonyRecord[]> {
    return ceremonyCalls.listCeremonies(this.connection, personaId, options);
  }
}
