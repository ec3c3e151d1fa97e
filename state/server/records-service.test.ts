import { status } from '@grpc/grpc-js';
import { Role } from '../../common/persona-roles';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import pino from 'pino';
import { Registry } from 'prom-client';

import { CeremonyKindName, type PersonaRecord } from '../../common/records-types';
import { RecordConflictError } from '../../common/record-conflict-error';
import { RecordsClient } from '../../common/records-client';
import { callStateUnary, type StartUnaryCall } from '../../common/state-calls';
import { stateChannel } from '../../common/state-channel';
import { StateCallError } from '../../common/state-call-errors';
import {
  RecordsClient as RecordsGrpcClient,
  RecordsService,
} from '../../proto/gen/polychrome/state/v1/records';
import { createStateMetrics } from './state-metrics';
import {
  clientTls,
  makeTestPki,
  startTestStateServer,
  tempDir,
  type TestPki,
  type TestStateServer,
} from './testdata/fixtures';

/** The identity recorded as minter or role setter in these tests. */
const MINTER = 'test:minter';

/*
 * The Records service in process, over a real mutual TLS listener on loopback, with the
 * real RecordStore on its own temporary LevelDB and the real client: the record flows,
 * how record errors cross the wire, who may call, and that no secret reaches the log.
 */

let dir: { path: string; remove: () => Promise<void> };
let pki: TestPki;
let state: TestStateServer;
let registry: Registry;
let address: string;
let writer: RecordsClient;
let verifier: RecordsClient;
let stranger: RecordsClient;
/** The generated client, for requests the typed client cannot express (unknown enums). */
let rawClient: RecordsGrpcClient;
/** Every line the server logged (debug and up). */
const logLines: string[] = [];

async function clientAs(
  identity: 'recordsAdmin' | 'verifier' | 'stranger',
): Promise<RecordsClient> {
  return new RecordsClient({
    address,
    tls: await clientTls(pki.ca, pki[identity]),
    callTimeoutMs: 5_000,
  });
}

beforeAll(async () => {
  dir = await tempDir('records-service');
  pki = await makeTestPki(dir.path);
  registry = new Registry();
  state = await startTestStateServer(dir.path, pki, {
    signerSeed: 3,
    logger: pino({ level: 'debug' }, { write: (line: string) => logLines.push(line) }),
    metrics: (journal) => createStateMetrics(registry, () => journal.stats()),
  });
  ({ address } = state);
  // The records admin may call every Records RPC (rpc-roles.ts); role attacks: role-attacks.test.ts.
  writer = await clientAs('recordsAdmin');
  verifier = await clientAs('verifier');
  stranger = await clientAs('stranger');
  const channel = stateChannel({ tls: await clientTls(pki.ca, pki.recordsAdmin) });
  rawClient = new RecordsGrpcClient(address, channel.credentials, channel.options);
}, 60_000);

afterAll(async () => {
  writer.close();
  verifier.close();
  stranger.close();
  rawClient.close();
  await state.close();
  await dir.remove();
});

async function rejection(promise: Promise<unknown>): Promise<StateCallError> {
  try {
    await promise;
  } catch (error) {
    if (error instanceof StateCallError) return error;
    throw error;
  }
  throw new Error('expected the call to fail, it succeeded');
}

function raw<R>(method: string, start: StartUnaryCall<R>): Promise<R> {
  return callStateUnary(address, method, { timeoutMs: 5_000 }, start);
}

async function allPersonas(): Promise<PersonaRecord[]> {
  const out: PersonaRecord[] = [];
  let pageToken: string | undefined;
  do {
    const page = await writer.listPersonas({
      limit: 2,
      ...(pageToken === undefined ? {} : { pageToken }),
    });
    out.push(...page.personas);
    pageToken = page.nextPageToken;
  } while (pageToken !== undefined);
  return out;
}

async function calls(method: string, code: string): Promise<number> {
  const metric = await registry.getSingleMetric('polychrome_state_calls_total')?.get();
  return (
    metric?.values.find((v) => v.labels.method === method && v.labels.status === code)?.value ?? 0
  );
}

describe('personas', () => {
  it('creates a persona, links an identity and finds the persona by it', async () => {
    const ada = await writer.createPersona({
      displayName: 'Ada',
      identities: ['email:ada@example.com'],
    });
    expect(ada).toMatchObject({
      displayName: 'Ada',
      identities: ['email:ada@example.com'],
      roles: [Role.Member],
      version: 1,
    });
    const linked = await writer.linkIdentity(ada.id, 'github:ada', { expectedVersion: 1 });
    expect(linked.identities).toEqual(['email:ada@example.com', 'github:ada']);
    expect(linked.version).toBe(2);
    expect(await writer.findPersonaByIdentity('github:ada')).toEqual(linked);
    expect(await writer.findPersonaByIdentity('github:nobody')).toBeUndefined();
    expect(await writer.getPersona(ada.id)).toEqual(linked);
    expect(await calls('LinkIdentity', 'OK')).toBe(1);
  });

  it('refuses an identity linked to another persona with ALREADY_EXISTS, naming the holder', async () => {
    const first = await writer.createPersona({ displayName: 'First', identities: ['slack:T1:U1'] });
    const second = await writer.createPersona({ displayName: 'Second' });
    const error = await rejection(writer.linkIdentity(second.id, 'slack:T1:U1'));
    expect(error).toMatchObject({
      code: 'already_exists',
      grpcStatus: status.ALREADY_EXISTS,
      fromServer: true,
    });
    expect(error.details.linkedPersonaId).toBe(first.id);
    expect(await writer.getPersona(second.id)).toEqual(second);
    const dup = await rejection(
      writer.createPersona({ displayName: 'Third', identities: ['slack:T1:U1'] }),
    );
    expect(dup.code).toBe('already_exists');
  });

  it('refuses a stale expected_version with ABORTED and the current version', async () => {
    const p = await writer.createPersona({ displayName: 'Grace' });
    const renamed = await writer.renamePersona(p.id, 'Grace H.', { expectedVersion: 1 });
    expect(renamed.version).toBe(2);
    const error = await rejection(
      writer.setRoles(p.id, [Role.Admin], { expectedVersion: 1, setBy: MINTER }),
    );
    expect(error).toBeInstanceOf(RecordConflictError);
    expect(error).toMatchObject({ code: 'conflict', grpcStatus: status.ABORTED, version: 2 });
    expect(error.message).toContain('version 2');
    expect(await writer.getPersona(p.id)).toEqual(renamed);
    const admin = await writer.setRoles(p.id, [Role.Admin], {
      expectedVersion: 2,
      setBy: MINTER,
    });
    expect(admin.roles).toEqual([Role.Admin]);
    const unlinkStale = await rejection(writer.deletePersona(p.id, { expectedVersion: 2 }));
    expect(unlinkStale).toMatchObject({ code: 'conflict', version: 3 });
    await writer.deletePersona(p.id, { expectedVersion: 3 });
    expect(await rejection(writer.getPersona(p.id))).toMatchObject({
      code: 'not_found',
      grpcStatus: status.NOT_FOUND,
    });
  });

  it('unlinks an identity, which frees it', async () => {
    const p = await writer.createPersona({
      displayName: 'Lin',
      identities: ['email:lin@example.com'],
    });
    const after = await writer.unlinkIdentity(p.id, 'email:lin@example.com', {
      expectedVersion: 1,
    });
    expect(after.identities).toEqual([]);
    expect(await writer.findPersonaByIdentity('email:lin@example.com')).toBeUndefined();
  });

  it('pages through every persona in id order', async () => {
    const everyone = await allPersonas();
    const ids = everyone.map((p) => p.id);
    expect(ids).toEqual([...ids].sort());
    expect(new Set(ids).size).toBe(ids.length);
    expect(ids.length).toBeGreaterThanOrEqual(4);
  });
});

describe('sessions', () => {
  it('authenticates a token until the session is revoked, then answers UNAUTHENTICATED', async () => {
    const p = await writer.createPersona({ displayName: 'Sam' });
    const { session, token } = await writer.createSession(p.id, {
      ttlMs: 60_000,
      mintedBy: MINTER,
    });
    expect(token).toMatch(/^pcs_[A-Za-z0-9_-]{43}$/);
    expect(session.revokedAtMs).toBeUndefined();
    const auth = await writer.authenticate(token);
    expect(auth.session.id).toBe(session.id);
    expect(auth.persona.id).toBe(p.id);
    const revoked = await writer.revokeSession(session.id);
    expect(revoked.revokedAtMs).toEqual(expect.any(Number));
    const error = await rejection(writer.authenticate(token));
    expect(error).toMatchObject({
      code: 'unauthenticated',
      grpcStatus: status.UNAUTHENTICATED,
      fromServer: true,
    });
    expect(error.message).toContain('revoked');
    expect(error.message).not.toContain(token);
    expect(await writer.listSessions(p.id)).toEqual([revoked]);
    expect(await writer.getSession(session.id)).toEqual(revoked);
    // The token never reached the server's log (which did record the session), nor did the
    // error carry it.
    expect(logLines.join('\n')).toContain(session.id);
    expect(logLines.join('\n')).not.toContain(token);
    expect(logLines.join('\n')).not.toContain(token.slice(4));
  });

  it('answers a malformed token with UNAUTHENTICATED without quoting it', async () => {
    const error = await rejection(writer.authenticate('pcs_not-a-real-token'));
    expect(error.code).toBe('unauthenticated');
    expect(error.message).not.toContain('not-a-real-token');
  });
});

describe('credentials', () => {
  it('stores a secret sealed and reveals it byte for byte', async () => {
    const p = await writer.createPersona({ displayName: 'Cred' });
    const secret = new Uint8Array([0, 1, 2, 250, 255, 42]);
    const credential = await writer.createCredential({
      personaId: p.id,
      kind: 'api-key',
      label: 'CI token',
      secret,
    });
    expect(credential).toMatchObject({ personaId: p.id, kind: 'api-key', label: 'CI token' });
    expect(await writer.getCredential(credential.id)).toEqual(credential);
    const revealed = await writer.revealCredential(credential.id);
    expect(revealed.credential).toEqual(credential);
    expect(revealed.secret).toEqual(secret);
    const text = await writer.createCredential({
      personaId: p.id,
      kind: 'password',
      label: 'mail',
      secret: 'hunter2-correct-horse',
    });
    expect(Buffer.from((await writer.revealCredential(text.id)).secret).toString()).toBe(
      'hunter2-correct-horse',
    );
    expect((await writer.listCredentials(p.id)).map((c) => c.id).sort()).toEqual(
      [credential.id, text.id].sort(),
    );
    await writer.deleteCredential(credential.id);
    expect(await rejection(writer.getCredential(credential.id))).toMatchObject({
      code: 'not_found',
    });
    expect(logLines.join('\n')).not.toContain('hunter2-correct-horse');
  });
});

describe('ceremonies', () => {
  it('refuses a wrong code with PERMISSION_DENIED and attempts left, then links on the right code', async () => {
    const p = await writer.createPersona({ displayName: 'Cera' });
    const { ceremony, code } = await writer.startCeremony({
      kind: CeremonyKindName.LinkIdentity,
      personaId: p.id,
      identity: 'telegram:cera',
      maxAttempts: 3,
    });
    expect(code).toMatch(/^[0-9]{8}$/);
    expect(ceremony).toMatchObject({ state: 'pending', attempts: 0, maxAttempts: 3 });
    const wrong = code === '00000000' ? '11111111' : '00000000';
    const error = await rejection(writer.completeCeremony(ceremony.id, wrong));
    expect(error).toMatchObject({
      code: 'permission_denied',
      grpcStatus: status.PERMISSION_DENIED,
      fromServer: true,
    });
    expect(error.details.attemptsLeft).toBe(2);
    expect(error.message).toContain('2 attempt(s) left');
    expect(await writer.findPersonaByIdentity('telegram:cera')).toBeUndefined();
    const done = await writer.completeCeremony(ceremony.id, code);
    expect(done.ceremony).toMatchObject({ state: 'completed', attempts: 2 });
    expect(done.persona.identities).toEqual(['telegram:cera']);
    expect((await writer.findPersonaByIdentity('telegram:cera'))?.id).toBe(p.id);
    expect(await writer.getCeremony(ceremony.id)).toEqual(done.ceremony);
    expect(await writer.listCeremonies(p.id)).toEqual([done.ceremony]);
    expect(logLines.join('\n')).not.toMatch(new RegExp(`\\b${code}\\b`));
  });
});

describe('authorization', () => {
  const probes: readonly [string, (c: RecordsClient, personaId: string) => Promise<unknown>][] = [
    ['CreatePersona', (c) => c.createPersona({ displayName: 'Mallory' })],
    ['GetPersona', (c, id) => c.getPersona(id)],
    ['FindPersonaByIdentity', (c) => c.findPersonaByIdentity('email:owner@example.com')],
    ['ListPersonas', (c) => c.listPersonas()],
    ['LinkIdentity', (c, id) => c.linkIdentity(id, 'github:mallory')],
    ['UnlinkIdentity', (c, id) => c.unlinkIdentity(id, 'email:owner@example.com')],
    ['SetRoles', (c, id) => c.setRoles(id, [Role.Admin], { setBy: MINTER })],
    ['RenamePersona', (c, id) => c.renamePersona(id, 'Mallory')],
    ['DeletePersona', (c, id) => c.deletePersona(id)],
    ['CreateSession', (c, id) => c.createSession(id, { mintedBy: MINTER })],
    ['Authenticate', (c) => c.authenticate(`pcs_${'A'.repeat(43)}`)],
    ['GetSession', (c, id) => c.getSession(id)],
    ['RevokeSession', (c, id) => c.revokeSession(id)],
    ['ListSessions', (c, id) => c.listSessions(id)],
    [
      'CreateCredential',
      (c, id) => c.createCredential({ personaId: id, kind: 'api-key', label: 'x', secret: 's' }),
    ],
    ['GetCredential', (c, id) => c.getCredential(id)],
    ['RevealCredential', (c, id) => c.revealCredential(id)],
    ['ListCredentials', (c, id) => c.listCredentials(id)],
    ['DeleteCredential', (c, id) => c.deleteCredential(id)],
    [
      'StartCeremony',
      (c, id) =>
        c.startCeremony({ kind: CeremonyKindName.LinkIdentity, personaId: id, identity: 'x:y' }),
    ],
    ['CompleteCeremony', (c, id) => c.completeCeremony(id, '12345678')],
    ['GetCeremony', (c, id) => c.getCeremony(id)],
    ['ListCeremonies', (c, id) => c.listCeremonies(id)],
    [
      'SetPersonaPaymentPolicy',
      (c, id) =>
        c.setPersonaPaymentPolicy({
          personaId: id,
          wallet: 'mallory',
          limitsJson: '{}',
          setBy: MINTER,
          session: '',
          reason: 'widen',
          expectedSequence: 0,
        }),
    ],
    ['GetPersonaPaymentPolicy', (c, id) => c.getPersonaPaymentPolicy(id)],
    [
      'RecordPersonaSpend',
      (c, id) =>
        c.recordPersonaSpend({
          personaId: id,
          idempotencyKey: 'a'.repeat(64),
          conversationId: 'c',
          network: 'eip155:1',
          asset: '0x0',
          amount: '1',
          atMs: 1,
        }),
    ],
    ['ListPersonaSpends', (c, id) => c.listPersonaSpends(id, 0)],
  ];

  let owner: PersonaRecord;
  beforeAll(async () => {
    owner = await writer.createPersona({
      displayName: 'Owner',
      identities: ['email:owner@example.com'],
    });
  });

  it('covers every Records RPC', () => {
    const rpcs = Object.values(RecordsService).map((rpc) => rpc.path.split('/').at(-1));
    expect(probes.map(([method]) => method).sort()).toEqual(rpcs.sort());
  });

  it.each(probes)(
    'refuses %s to the verifier with PERMISSION_DENIED and writes nothing',
    async (method, call) => {
      const before = await allPersonas();
      const refusedBefore = await calls(method, 'PERMISSION_DENIED');
      const error = await rejection(call(verifier, owner.id));
      expect(error).toMatchObject({
        code: 'permission_denied',
        grpcStatus: status.PERMISSION_DENIED,
        fromServer: true,
      });
      expect(error.message).toContain('CN=polychrome-verifier');
      expect(error.message).toContain('polychrome:records-admin');
      expect(error.message).toContain(method);
      expect(await calls(method, 'PERMISSION_DENIED')).toBe(refusedBefore + 1);
      expect(await allPersonas()).toEqual(before);
      expect(await writer.listSessions(owner.id)).toEqual([]);
      expect(await writer.listCredentials(owner.id)).toEqual([]);
      expect(await writer.listCeremonies(owner.id)).toEqual([]);
    },
  );

  it('refuses a certificate with no Polychrome role too', async () => {
    const error = await rejection(stranger.listPersonas());
    expect(error).toMatchObject({ code: 'permission_denied' });
    expect(error.message).toContain('CN=someone-else');
  });
});

describe('bad input', () => {
  let p: PersonaRecord;
  beforeAll(async () => {
    p = await writer.createPersona({ displayName: 'Input' });
  });

  it.each<[string, () => Promise<unknown>]>([
    ['an empty display name', () => writer.createPersona({ displayName: '' })],
    [
      'a malformed identity',
      () => writer.createPersona({ displayName: 'X', identities: ['nocolon'] }),
    ],
    [
      'an unknown role',
      () =>
        raw('CreatePersona', (m, o, done) =>
          rawClient.createPersona(
            { displayName: 'X', identities: [], roles: { roles: ['member', 'owner'] } },
            m,
            o,
            done,
          ),
        ),
    ],
    ['an empty persona id', () => writer.getPersona('')],
    ['expected_version 0', () => writer.renamePersona(p.id, 'Y', { expectedVersion: 0 })],
    ['a page size of 0', () => writer.listPersonas({ limit: 0 })],
    ['a session ttl of 0', () => writer.createSession(p.id, { ttlMs: 0, mintedBy: MINTER })],
    ['a session without minted_by', () => writer.createSession(p.id, { mintedBy: '' })],
    ['roles without set_by', () => writer.setRoles(p.id, [Role.Edge], { setBy: '' })],
    [
      'an empty credential secret',
      () => writer.createCredential({ personaId: p.id, kind: 'api-key', label: 'x', secret: '' }),
    ],
    [
      'an unknown ceremony kind',
      () =>
        raw('StartCeremony', (m, o, done) =>
          rawClient.startCeremony(
            { kind: 'reset-password', personaId: p.id, identity: 'email:p@example.com' },
            m,
            o,
            done,
          ),
        ),
    ],
    ['a ceremony code that is not 8 digits', () => writer.completeCeremony(p.id, 'abc')],
  ])('answers %s with INVALID_ARGUMENT and writes nothing', async (_label, call) => {
    const before = await allPersonas();
    const error = await rejection(call());
    expect(error).toMatchObject({
      code: 'invalid_argument',
      grpcStatus: status.INVALID_ARGUMENT,
      fromServer: true,
    });
    expect(await allPersonas()).toEqual(before);
    expect(await writer.listSessions(p.id)).toEqual([]);
    expect(await writer.listCredentials(p.id)).toEqual([]);
    expect(await writer.listCeremonies(p.id)).toEqual([]);
  });
});
