import {
  RecordsClient as RecordsGrpcClient,
  type Ceremony as CeremonyProto,
  type AuthenticateResponse,
  type CeremonyResponse,
  type CompleteCeremonyResponse,
  type CreateSessionResponse,
  type CredentialResponse,
  type DeleteCredentialResponse,
  type DeletePersonaResponse,
  type FindPersonaByIdentityResponse,
  type ListCeremoniesResponse,
  type ListCredentialsResponse,
  type ListPersonasResponse,
  type ListSessionsResponse,
  type PersonaResponse,
  type RevealCredentialResponse,
  type SessionResponse,
  type StartCeremonyResponse,
  type Credential as CredentialProto,
  type Persona as PersonaProto,
  type Session as SessionProto,
} from '../proto/gen/polychrome/state/v1/records';
import type { ErrorDetails } from './errors';
import {
  callStateUnary,
  DEFAULT_CALL_TIMEOUT_MS,
  StateCallError,
  stateChannel,
  waitForStateChannel,
  type StartUnaryCall,
  type StateCallOptions,
  type StateClientOptions,
} from './state-client';

/*
 * The typed client of the state plane's Records service (proto/polychrome/state/v1/
 * records.proto): personas, sessions, credentials, ceremonies. It dials the state plane
 * like StateClient (same mutual TLS channel helpers, same error contract) and needs a
 * certificate with the writer role: every Records call, reads included, is refused to
 * anyone else. Proto messages stop here: callers get the record types below.
 */

/** Roles a persona can hold. */
export const PersonaRole = { Admin: 'admin', Member: 'member', Edge: 'edge' } as const;
export type PersonaRole = (typeof PersonaRole)[keyof typeof PersonaRole];

const roles: readonly string[] = Object.values(PersonaRole);

/** True when `value` names a {@link PersonaRole}. */
export function isPersonaRole(value: string): value is PersonaRole {
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
  readonly roles: readonly PersonaRole[];
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

/**
 * A persona change refused because the persona moved on (`conflict`, gRPC ABORTED).
 * `version` is its current version: read it again and retry.
 */
export class RecordConflictError extends StateCallError {
  override readonly name: string = 'RecordConflictError';
  readonly version: number;

  constructor(
    message: string,
    options: {
      method: string;
      grpcStatus: number;
      version: number;
      details?: ErrorDetails;
      cause?: unknown;
    },
  ) {
    super('conflict', message, { ...options, fromServer: true });
    this.version = options.version;
  }
}

/**
 * `error` as a {@link RecordConflictError} when it is a server conflict naming the current
 * version; unchanged otherwise.
 */
export function recordsErrorOf(error: unknown): unknown {
  if (
    error instanceof StateCallError &&
    error.fromServer &&
    error.code === 'conflict' &&
    typeof error.details.version === 'number'
  ) {
    return new RecordConflictError(error.message, {
      method: error.method,
      grpcStatus: error.grpcStatus,
      version: error.details.version,
      details: error.details,
      cause: error,
    });
  }
  return error;
}

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
  private readonly client: RecordsGrpcClient;
  private readonly address: string;
  private readonly callTimeoutMs: number;

  constructor(options: StateClientOptions) {
    this.address = options.address;
    this.callTimeoutMs = options.callTimeoutMs ?? DEFAULT_CALL_TIMEOUT_MS;
    const channel = stateChannel(options);
    this.client = new RecordsGrpcClient(options.address, channel.credentials, channel.options);
  }

  /**
   * Waits until the channel is connected (TLS handshake done).
   *
   * @throws StateCallError `unavailable` when it is not connected within `timeoutMs`.
   */
  waitForReady(timeoutMs: number): Promise<void> {
    return waitForStateChannel(this.client, this.address, timeoutMs);
  }

  /** Closes the channel; calls in flight fail. Idempotent. */
  close(): void {
    this.client.close();
  }

  // --- Personas ---

  /**
   * Creates a persona, linking `identities` at once.
   *
   * @param input.roles @default [member]
   * @param input.rolesSetBy the identity giving the roles, recorded as `rolesSetBy`
   * @throws StateCallError `invalid_argument`, `already_exists` (an identity is linked
   *   elsewhere; `details.linkedPersonaId`), `resource_exhausted`, `permission_denied`,
   *   `failed_precondition` (admin with a ServiceAccount identity).
   */
  async createPersona(
    input: {
      readonly displayName: string;
      readonly roles?: readonly PersonaRole[];
      readonly identities?: readonly string[];
      readonly rolesSetBy?: string;
    },
    options: StateCallOptions = {},
  ): Promise<PersonaRecord> {
    const request = {
      displayName: input.displayName,
      identities: [...(input.identities ?? [])],
      ...(input.roles === undefined ? {} : { roles: { roles: [...input.roles] } }),
      ...(input.rolesSetBy === undefined ? {} : { rolesSetBy: input.rolesSetBy }),
    };
    const response = await this.unary<PersonaResponse>('CreatePersona', options, (m, o, done) =>
      this.client.createPersona(request, m, o, done),
    );
    return personaFromProto(this.required(response.persona, 'CreatePersona'));
  }

  /**
   * The persona `personaId`.
   *
   * @throws StateCallError `invalid_argument`, `not_found`, `permission_denied`.
   */
  async getPersona(personaId: string, options: StateCallOptions = {}): Promise<PersonaRecord> {
    const response = await this.unary<PersonaResponse>('GetPersona', options, (m, o, done) =>
      this.client.getPersona({ personaId }, m, o, done),
    );
    return personaFromProto(this.required(response.persona, 'GetPersona'));
  }

  /**
   * The persona `identity` is linked to, or `undefined`.
   *
   * @throws StateCallError `invalid_argument`, `permission_denied`.
   */
  async findPersonaByIdentity(
    identity: string,
    options: StateCallOptions = {},
  ): Promise<PersonaRecord | undefined> {
    const response = await this.unary<FindPersonaByIdentityResponse>(
      'FindPersonaByIdentity',
      options,
      (m, o, done) => this.client.findPersonaByIdentity({ identity }, m, o, done),
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
  async listPersonas(
    page: { readonly limit?: number; readonly pageToken?: string } = {},
    options: StateCallOptions = {},
  ): Promise<{ personas: PersonaRecord[]; nextPageToken: string | undefined }> {
    const response = await this.unary<ListPersonasResponse>('ListPersonas', options, (m, o, done) =>
      this.client.listPersonas(
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
  async linkIdentity(
    personaId: string,
    identity: string,
    options: PersonaChangeOptions = {},
  ): Promise<PersonaRecord> {
    const response = await this.unary<PersonaResponse>('LinkIdentity', options, (m, o, done) =>
      this.client.linkIdentity(
        { personaId, identity, expectedVersion: options.expectedVersion },
        m,
        o,
        done,
      ),
    );
    return personaFromProto(this.required(response.persona, 'LinkIdentity'));
  }

  /**
   * Unlinks `identity` from the persona.
   *
   * @throws RecordConflictError; StateCallError `not_found` (also when the persona does
   *   not hold it), `invalid_argument`.
   */
  async unlinkIdentity(
    personaId: string,
    identity: string,
    options: PersonaChangeOptions = {},
  ): Promise<PersonaRecord> {
    const response = await this.unary<PersonaResponse>('UnlinkIdentity', options, (m, o, done) =>
      this.client.unlinkIdentity(
        { personaId, identity, expectedVersion: options.expectedVersion },
        m,
        o,
        done,
      ),
    );
    return personaFromProto(this.required(response.persona, 'UnlinkIdentity'));
  }

  /**
   * Replaces the persona's roles; the records keep `setBy` (the identity that sets them)
   * and the time with the persona.
   *
   * @throws RecordConflictError; StateCallError `not_found`, `invalid_argument`,
   *   `failed_precondition` (admin for a persona that links a ServiceAccount).
   */
  async setRoles(
    personaId: string,
    newRoles: readonly PersonaRole[],
    options: PersonaChangeOptions & { readonly setBy: string },
  ): Promise<PersonaRecord> {
    const response = await this.unary<PersonaResponse>('SetRoles', options, (m, o, done) =>
      this.client.setRoles(
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
    return personaFromProto(this.required(response.persona, 'SetRoles'));
  }

  /**
   * Changes the persona's display name.
   *
   * @throws RecordConflictError; StateCallError `not_found`, `invalid_argument`.
   */
  async renamePersona(
    personaId: string,
    displayName: string,
    options: PersonaChangeOptions = {},
  ): Promise<PersonaRecord> {
    const response = await this.unary<PersonaResponse>('RenamePersona', options, (m, o, done) =>
      this.client.renamePersona(
        { personaId, displayName, expectedVersion: options.expectedVersion },
        m,
        o,
        done,
      ),
    );
    return personaFromProto(this.required(response.persona, 'RenamePersona'));
  }

  /**
   * Deletes the persona with its identity links, sessions, credentials and ceremonies.
   *
   * @throws RecordConflictError; StateCallError `not_found`, `invalid_argument`.
   */
  async deletePersona(personaId: string, options: PersonaChangeOptions = {}): Promise<void> {
    await this.unary<DeletePersonaResponse>('DeletePersona', options, (m, o, done) =>
      this.client.deletePersona(
        { personaId, expectedVersion: options.expectedVersion },
        m,
        o,
        done,
      ),
    );
  }

  // --- Sessions ---

  /**
   * Opens a session. `token` is the only copy: hand it to the client, never log it.
   * `mintedBy` (the identity that mints it) is recorded with the session.
   *
   * @param input.ttlMs @default 12 hours (at most 30 days)
   * @throws StateCallError `not_found`, `invalid_argument`.
   */
  async createSession(
    personaId: string,
    input: { readonly mintedBy: string; readonly ttlMs?: number },
    options: StateCallOptions = {},
  ): Promise<{ session: SessionRecord; token: string }> {
    const response = await this.unary<CreateSessionResponse>(
      'CreateSession',
      options,
      (m, o, done) =>
        this.client.createSession(
          { personaId, ttlMs: input.ttlMs, mintedBy: input.mintedBy },
          m,
          o,
          done,
        ),
    );
    return {
      session: sessionFromProto(this.required(response.session, 'CreateSession')),
      token: response.token,
    };
  }

  /**
   * Checks a bearer token.
   *
   * @throws StateCallError `unauthenticated` when it is malformed, unknown, revoked or
   *   expired.
   */
  async authenticate(
    token: string,
    options: StateCallOptions = {},
  ): Promise<{ session: SessionRecord; persona: PersonaRecord }> {
    const response = await this.unary<AuthenticateResponse>('Authenticate', options, (m, o, done) =>
      this.client.authenticate({ token }, m, o, done),
    );
    return {
      session: sessionFromProto(this.required(response.session, 'Authenticate')),
      persona: personaFromProto(this.required(response.persona, 'Authenticate')),
    };
  }

  /**
   * The session `sessionId`.
   *
   * @throws StateCallError `not_found`, `invalid_argument`.
   */
  async getSession(sessionId: string, options: StateCallOptions = {}): Promise<SessionRecord> {
    const response = await this.unary<SessionResponse>('GetSession', options, (m, o, done) =>
      this.client.getSession({ sessionId }, m, o, done),
    );
    return sessionFromProto(this.required(response.session, 'GetSession'));
  }

  /**
   * Revokes the session; its token stops working at once.
   *
   * @throws StateCallError `not_found`, `invalid_argument`.
   */
  async revokeSession(sessionId: string, options: StateCallOptions = {}): Promise<SessionRecord> {
    const response = await this.unary<SessionResponse>('RevokeSession', options, (m, o, done) =>
      this.client.revokeSession({ sessionId }, m, o, done),
    );
    return sessionFromProto(this.required(response.session, 'RevokeSession'));
  }

  /**
   * The persona's sessions (live, expired, revoked) in id order.
   *
   * @throws StateCallError `not_found`, `invalid_argument`.
   */
  async listSessions(personaId: string, options: StateCallOptions = {}): Promise<SessionRecord[]> {
    const response = await this.unary<ListSessionsResponse>('ListSessions', options, (m, o, done) =>
      this.client.listSessions({ personaId }, m, o, done),
    );
    return response.sessions.map(sessionFromProto);
  }

  // --- Credentials ---

  /**
   * Stores a credential; the state plane seals `secret` under the records key.
   *
   * @throws StateCallError `not_found`, `invalid_argument`.
   */
  async createCredential(
    input: {
      readonly personaId: string;
      readonly kind: string;
      readonly label: string;
      /** Bytes, or text sent as UTF-8. */
      readonly secret: Uint8Array | string;
    },
    options: StateCallOptions = {},
  ): Promise<CredentialRecord> {
    const request = {
      personaId: input.personaId,
      kind: input.kind,
      label: input.label,
      secret: Buffer.from(input.secret),
    };
    const response = await this.unary<CredentialResponse>(
      'CreateCredential',
      options,
      (m, o, done) => this.client.createCredential(request, m, o, done),
    );
    return credentialFromProto(this.required(response.credential, 'CreateCredential'));
  }

  /**
   * A credential's metadata.
   *
   * @throws StateCallError `not_found`, `invalid_argument`.
   */
  async getCredential(
    credentialId: string,
    options: StateCallOptions = {},
  ): Promise<CredentialRecord> {
    const response = await this.unary<CredentialResponse>('GetCredential', options, (m, o, done) =>
      this.client.getCredential({ credentialId }, m, o, done),
    );
    return credentialFromProto(this.required(response.credential, 'GetCredential'));
  }

  /**
   * A credential's metadata and its secret in the clear: use it where the secret is
   * needed, never log it.
   *
   * @throws StateCallError `not_found`, `invalid_argument`, `data_loss` (sealed under
   *   another records key, or changed).
   */
  async revealCredential(
    credentialId: string,
    options: StateCallOptions = {},
  ): Promise<{ credential: CredentialRecord; secret: Uint8Array }> {
    const response = await this.unary<RevealCredentialResponse>(
      'RevealCredential',
      options,
      (m, o, done) => this.client.revealCredential({ credentialId }, m, o, done),
    );
    return {
      credential: credentialFromProto(this.required(response.credential, 'RevealCredential')),
      secret: new Uint8Array(response.secret),
    };
  }

  /**
   * The persona's credentials (metadata only) in id order.
   *
   * @throws StateCallError `not_found`, `invalid_argument`.
   */
  async listCredentials(
    personaId: string,
    options: StateCallOptions = {},
  ): Promise<CredentialRecord[]> {
    const response = await this.unary<ListCredentialsResponse>(
      'ListCredentials',
      options,
      (m, o, done) => this.client.listCredentials({ personaId }, m, o, done),
    );
    return response.credentials.map(credentialFromProto);
  }

  /**
   * Deletes a credential.
   *
   * @throws StateCallError `not_found`, `invalid_argument`.
   */
  async deleteCredential(credentialId: string, options: StateCallOptions = {}): Promise<void> {
    await this.unary<DeleteCredentialResponse>('DeleteCredential', options, (m, o, done) =>
      this.client.deleteCredential({ credentialId }, m, o, done),
    );
  }

  // --- Ceremonies ---

  /**
   * Starts a ceremony. `code` is the only copy: deliver it to the identity, never log it.
   *
   * @param input.ttlMs @default 10 minutes (at most 1 hour)
   * @param input.maxAttempts @default 5 (at most 10)
   * @throws StateCallError `not_found`, `invalid_argument`, `already_exists` (the identity
   *   is linked elsewhere), `failed_precondition` (the persona already holds it).
   */
  async startCeremony(
    input: {
      readonly kind: CeremonyKindName;
      readonly personaId: string;
      readonly identity: string;
      readonly ttlMs?: number;
      readonly maxAttempts?: number;
    },
    options: StateCallOptions = {},
  ): Promise<{ ceremony: CeremonyRecord; code: string }> {
    const response = await this.unary<StartCeremonyResponse>(
      'StartCeremony',
      options,
      (m, o, done) =>
        this.client.startCeremony(
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
      ceremony: ceremonyFromProto(this.required(response.ceremony, 'StartCeremony')),
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
  async completeCeremony(
    ceremonyId: string,
    code: string,
    options: StateCallOptions = {},
  ): Promise<{ ceremony: CeremonyRecord; persona: PersonaRecord }> {
    const response = await this.unary<CompleteCeremonyResponse>(
      'CompleteCeremony',
      options,
      (m, o, done) => this.client.completeCeremony({ ceremonyId, code }, m, o, done),
    );
    return {
      ceremony: ceremonyFromProto(this.required(response.ceremony, 'CompleteCeremony')),
      persona: personaFromProto(this.required(response.persona, 'CompleteCeremony')),
    };
  }

  /**
   * The ceremony `ceremonyId`.
   *
   * @throws StateCallError `not_found`, `invalid_argument`.
   */
  async getCeremony(ceremonyId: string, options: StateCallOptions = {}): Promise<CeremonyRecord> {
    const response = await this.unary<CeremonyResponse>('GetCeremony', options, (m, o, done) =>
      this.client.getCeremony({ ceremonyId }, m, o, done),
    );
    return ceremonyFromProto(this.required(response.ceremony, 'GetCeremony'));
  }

  /**
   * The persona's ceremonies in id order.
   *
   * @throws StateCallError `not_found`, `invalid_argument`.
   */
  async listCeremonies(
    personaId: string,
    options: StateCallOptions = {},
  ): Promise<CeremonyRecord[]> {
    const response = await this.unary<ListCeremoniesResponse>(
      'ListCeremonies',
      options,
      (m, o, done) => this.client.listCeremonies({ personaId }, m, o, done),
    );
    return response.ceremonies.map(ceremonyFromProto);
  }

  private async unary<R>(
    method: string,
    options: StateCallOptions,
    start: StartUnaryCall<R>,
  ): Promise<R> {
    try {
      return await callStateUnary(
        this.address,
        method,
        {
          signal: options.signal,
          timeoutMs: options.timeoutMs ?? this.callTimeoutMs,
        },
        start,
      );
    } catch (error) {
      throw recordsErrorOf(error);
    }
  }

  /**
   * A message field the server always sets.
   *
   * @throws StateCallError `internal` when it is absent (a server that breaks the contract).
   */
  private required<T>(value: T | undefined, method: string): T {
    if (value !== undefined) return value;
    throw new StateCallError(
      'internal',
      `state plane at ${this.address}: ${method} answered without its record`,
      { method, grpcStatus: 0, fromServer: true },
    );
  }
}
