import type { Logger } from 'pino';

import { AppError } from '../../common/errors';

import type {
  AuthenticateRequest,
  AuthenticateResponse,
  CeremonyResponse,
  CompleteCeremonyRequest,
  CompleteCeremonyResponse,
  CreateCredentialRequest,
  CreatePersonaRequest,
  CreateSessionRequest,
  CreateSessionResponse,
  CredentialResponse,
  DeleteCredentialRequest,
  DeleteCredentialResponse,
  DeletePersonaRequest,
  DeletePersonaResponse,
  FindPersonaByIdentityRequest,
  FindPersonaByIdentityResponse,
  GetCeremonyRequest,
  GetPersonaPaymentPolicyRequest,
  ListPersonaSpendsRequest,
  ListPersonaSpendsResponse,
  PersonaPaymentPolicyResponse,
  RecordPersonaSpendRequest,
  RecordPersonaSpendResponse,
  SetPersonaPaymentPolicyRequest,
  GetCredentialRequest,
  GetPersonaRequest,
  GetSessionRequest,
  LinkIdentityRequest,
  ListCeremoniesRequest,
  ListCeremoniesResponse,
  ListCredentialsRequest,
  ListCredentialsResponse,
  ListPersonasRequest,
  ListPersonasResponse,
  ListSessionsRequest,
  ListSessionsResponse,
  PersonaResponse,
  RecordsServer,
  RenamePersonaRequest,
  RevealCredentialRequest,
  RevealCredentialResponse,
  RevokeSessionRequest,
  SessionResponse,
  SetRolesRequest,
  StartCeremonyRequest,
  StartCeremonyResponse,
  UnlinkIdentityRequest,
} from '../../proto/gen/polychrome/state/v1/records';
import type { PersonaPaymentPolicies } from '../records/persona-payments';
import type { Persona } from '../records/persona-records';
import type { RecordStore } from '../records/record-store';
import { checkRoles } from '../records/persona-checks';
import { createCallHandlers, type CallContext } from './call-handlers';
import { StateService, type RecordsMethod } from './rpc-roles';
import {
  ceremonyToProto,
  credentialToProto,
  DEFAULT_PERSONA_PAGE,
  listPersonasFromProto,
  listPersonasToProto,
  newCeremonyFromProto,
  newCredentialFromProto,
  newPersonaFromProto,
  personaToProto,
  sessionToProto,
} from './records-codec';
import type { StateMetrics } from './state-metrics';

/** Options of {@link createRecordsService}. */
export interface RecordsServiceOptions {
  /** Open: its database is opened and closed by the caller (state/main.ts). */
  readonly records: RecordStore;
  readonly log: Logger;
  readonly metrics?: StateMetrics;
  /** Changes in flight, so shutdown can let them finish before the database closes. */
  readonly trackWrite?: (work: Promise<unknown>) => void;
}

/**
 * The Records service over a {@link RecordStore}. Each RPC needs the roles rpc-roles.ts
 * lists for it: records administration, or the writer for the few the control plane's own
 * code calls. Any other caller is refused with PERMISSION_DENIED before the store is
 * touched. Errors cross the wire through the shared call handlers
 * (common/grpc-errors.ts); the record layer's messages never hold a token, code or secret, and no
 * request is logged, so neither the log nor an error carries one.
 */
export function createRecordsService(options: RecordsServiceOptions): RecordsServer {
  const { records } = options;
  const { unary } = createCallHandlers({ ...options, service: StateService.Records });

  /** A read: no tracking; its roles come from rpc-roles.ts, as every call's do. */
  function read<Req, Res>(
    method: RecordsMethod,
    run: (request: Req, context: CallContext) => Promise<Res>,
  ): ReturnType<typeof unary<Req, Res>> {
    return unary<Req, Res>(method, run);
  }

  /** A change: tracked, so a SIGTERM lets it reach the disk before the database closes. */
  function change<Req, Res>(
    method: RecordsMethod,
    run: (request: Req, context: CallContext) => Promise<Res>,
  ): ReturnType<typeof unary<Req, Res>> {
    return unary<Req, Res>(method, (request, context) => {
      const work = run(request, context);
      options.trackWrite?.(work);
      return work;
    });
  }

  const policiesToProto = ({
    current,
    history,
  }: PersonaPaymentPolicies): PersonaPaymentPolicyResponse => ({
    ...(current === undefined ? {} : { current }),
    history: [...history],
  });

  const persona = async (work: Promise<Persona>): Promise<PersonaResponse> => ({
    persona: personaToProto(await work),
  });

  return {
    createPersona: change<CreatePersonaRequest, PersonaResponse>(
      'CreatePersona',
      async (request, { log }) => {
        const created = await records.personas.create(newPersonaFromProto(request));
        log.info({ personaId: created.id }, 'persona created');
        return { persona: personaToProto(created) };
      },
    ),
    getPersona: read<GetPersonaRequest, PersonaResponse>('GetPersona', (request) =>
      persona(records.personas.get(request.personaId)),
    ),
    findPersonaByIdentity: read<FindPersonaByIdentityRequest, FindPersonaByIdentityResponse>(
      'FindPersonaByIdentity',
      async (request) => {
        const found = await records.personas.findByIdentity(request.identity);
        return found === undefined ? {} : { persona: personaToProto(found) };
      },
    ),
    listPersonas: read<ListPersonasRequest, ListPersonasResponse>('ListPersonas', async (request) =>
      listPersonasToProto(
        await records.personas.list(listPersonasFromProto(request)),
        request.limit ?? DEFAULT_PERSONA_PAGE,
      ),
    ),
    linkIdentity: change<LinkIdentityRequest, PersonaResponse>('LinkIdentity', (request) =>
      persona(
        records.personas.linkIdentity(request.personaId, request.identity, {
          expectedVersion: request.expectedVersion,
        }),
      ),
    ),
    unlinkIdentity: change<UnlinkIdentityRequest, PersonaResponse>('UnlinkIdentity', (request) =>
      persona(
        records.personas.unlinkIdentity(request.personaId, request.identity, {
          expectedVersion: request.expectedVersion,
        }),
      ),
    ),
    setRoles: change<SetRolesRequest, PersonaResponse>('SetRoles', async (request, { log }) => {
      const changed = await records.personas.setRoles(
        request.personaId,
        checkRoles(request.roles),
        { expectedVersion: request.expectedVersion, setBy: request.setBy },
      );
      log.info(
        { personaId: changed.id, roles: changed.roles, setBy: changed.rolesSetBy },
        'persona roles set',
      );
      return { persona: personaToProto(changed) };
    }),
    renamePersona: change<RenamePersonaRequest, PersonaResponse>('RenamePersona', (request) =>
      persona(
        records.personas.rename(request.personaId, request.displayName, {
          expectedVersion: request.expectedVersion,
        }),
      ),
    ),
    deletePersona: change<DeletePersonaRequest, DeletePersonaResponse>(
      'DeletePersona',
      async (request, { log }) => {
        await records.personas.delete(request.personaId, {
          expectedVersion: request.expectedVersion,
        });
        log.info({ personaId: request.personaId }, 'persona deleted');
        return {};
      },
    ),

    setPersonaPaymentPolicy: change<SetPersonaPaymentPolicyRequest, PersonaPaymentPolicyResponse>(
      'SetPersonaPaymentPolicy',
      async (request, { log }) => {
        const { expectedSequence, ...rest } = request;
        const set = policiesToProto(
          await records.personaPayments.setPolicy({ ...rest, expectedSequence }),
        );
        log.info(
          { personaId: request.personaId, wallet: request.wallet, setBy: request.setBy },
          'persona payment policy set',
        );
        return set;
      },
    ),
    getPersonaPaymentPolicy: read<GetPersonaPaymentPolicyRequest, PersonaPaymentPolicyResponse>(
      'GetPersonaPaymentPolicy',
      async (request) => policiesToProto(await records.personaPayments.policy(request.personaId)),
    ),
    recordPersonaSpend: change<RecordPersonaSpendRequest, RecordPersonaSpendResponse>(
      'RecordPersonaSpend',
      (request) => {
        if (request.spend === undefined) {
          throw new AppError('invalid_argument', 'RecordPersonaSpend needs a spend', {
            details: { field: 'spend' },
          });
        }
        const { maxPerPeriod, periodSinceMs } = request;
        const cap =
          maxPerPeriod === undefined ? undefined : { maxPerPeriod, sinceMs: periodSinceMs };
        return records.personaPayments.recordSpend(request.spend, cap);
      },
    ),
    listPersonaSpends: read<ListPersonaSpendsRequest, ListPersonaSpendsResponse>(
      'ListPersonaSpends',
      async (request) => ({
        spends: await records.personaPayments.spends(request.personaId, request.sinceMs),
      }),
    ),

    createSession: change<CreateSessionRequest, CreateSessionResponse>(
      'CreateSession',
      async (request, { log }) => {
        const { session, token } = await records.sessions.create(request.personaId, {
          ttlMs: request.ttlMs,
          mintedBy: request.mintedBy,
        });
        // Ids only: the token goes to the caller and nowhere else.
        log.info(
          { sessionId: session.id, personaId: session.personaId, mintedBy: session.mintedBy },
          'session created',
        );
        return { session: sessionToProto(session), token };
      },
    ),
    authenticate: read<AuthenticateRequest, AuthenticateResponse>(
      'Authenticate',
      async (request) => {
        const { session, persona: owner } = await records.sessions.authenticate(request.token);
        return { session: sessionToProto(session), persona: personaToProto(owner) };
      },
    ),
    getSession: read<GetSessionRequest, SessionResponse>('GetSession', async (request) => ({
      session: sessionToProto(await records.sessions.get(request.sessionId)),
    })),
    revokeSession: change<RevokeSessionRequest, SessionResponse>(
      'RevokeSession',
      async (request, { log }) => {
        const session = await records.sessions.revoke(request.sessionId);
        log.info({ sessionId: session.id, personaId: session.personaId }, 'session revoked');
        return { session: sessionToProto(session) };
      },
    ),
    listSessions: read<ListSessionsRequest, ListSessionsResponse>(
      'ListSessions',
      async (request) => ({
        sessions: (await records.sessions.listByPersona(request.personaId)).map(sessionToProto),
      }),
    ),

    createCredential: change<CreateCredentialRequest, CredentialResponse>(
      'CreateCredential',
      async (request, { log }) => {
        const credential = await records.credentials.create(newCredentialFromProto(request));
        log.info(
          { credentialId: credential.id, personaId: credential.personaId, kind: credential.kind },
          'credential stored',
        );
        return { credential: credentialToProto(credential) };
      },
    ),
    getCredential: read<GetCredentialRequest, CredentialResponse>(
      'GetCredential',
      async (request) => ({
        credential: credentialToProto(await records.credentials.get(request.credentialId)),
      }),
    ),
    revealCredential: read<RevealCredentialRequest, RevealCredentialResponse>(
      'RevealCredential',
      async (request, { log }) => {
        const { credential, secret } = await records.credentials.reveal(request.credentialId);
        // Who read which secret is worth an audit line; the value itself never is.
        log.info(
          { credentialId: credential.id, personaId: credential.personaId },
          'credential revealed',
        );
        return { credential: credentialToProto(credential), secret: Buffer.from(secret) };
      },
    ),
    listCredentials: read<ListCredentialsRequest, ListCredentialsResponse>(
      'ListCredentials',
      async (request) => ({
        credentials: (await records.credentials.listByPersona(request.personaId)).map(
          credentialToProto,
        ),
      }),
    ),
    deleteCredential: change<DeleteCredentialRequest, DeleteCredentialResponse>(
      'DeleteCredential',
      async (request, { log }) => {
        await records.credentials.delete(request.credentialId);
        log.info({ credentialId: request.credentialId }, 'credential deleted');
        return {};
      },
    ),

    startCeremony: change<StartCeremonyRequest, StartCeremonyResponse>(
      'StartCeremony',
      async (request, { log }) => {
        const { ceremony, code } = await records.ceremonies.start(newCeremonyFromProto(request));
        // Ids only: the code goes to the caller, which delivers it to the identity.
        log.info(
          { ceremonyId: ceremony.id, personaId: ceremony.personaId, kind: ceremony.kind },
          'ceremony started',
        );
        return { ceremony: ceremonyToProto(ceremony), code };
      },
    ),
    completeCeremony: change<CompleteCeremonyRequest, CompleteCeremonyResponse>(
      'CompleteCeremony',
      async (request, { log }) => {
        const done = await records.ceremonies.complete(request.ceremonyId, request.code);
        log.info(
          { ceremonyId: done.ceremony.id, personaId: done.persona.id },
          'ceremony completed',
        );
        return { ceremony: ceremonyToProto(done.ceremony), persona: personaToProto(done.persona) };
      },
    ),
    getCeremony: read<GetCeremonyRequest, CeremonyResponse>('GetCeremony', async (request) => ({
      ceremony: ceremonyToProto(await records.ceremonies.get(request.ceremonyId)),
    })),
    listCeremonies: read<ListCeremoniesRequest, ListCeremoniesResponse>(
      'ListCeremonies',
      async (request) => ({
        ceremonies: (await records.ceremonies.listByPersona(request.personaId)).map(
          ceremonyToProto,
        ),
      }),
    ),
  };
}
