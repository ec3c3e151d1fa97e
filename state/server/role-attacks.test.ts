import { Client, Metadata, status, type ServiceError } from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';

import { CertificateRole } from '../../common/certificate-identity';
import { encodePayload } from '../../common/event-kinds';
import { RecordsClient } from '../../common/records-client';
import { StateCallError } from '../../common/state-call-errors';
import { StateClient } from '../../common/state-client';
import { stateChannel } from '../../common/state-channel';
import { BackupService } from '../../proto/gen/polychrome/state/v1/backup';
import { RecordsService } from '../../proto/gen/polychrome/state/v1/records';
import { JournalService } from '../../proto/gen/polychrome/state/v1/state';
import type { JournalStore } from '../store/journal-store';
import { collect } from '../store/testdata/fixtures';
import { rolesFor } from './rpc-roles';
import {
  clientTls,
  makeTestPki,
  message,
  startTestStateServer,
  tempDir,
  type TestPki,
  type TestStateServer,
} from './testdata/fixtures';

/*
 * What a certificate holding one role can reach, over the real mutual TLS listener with
 * the real Journal and Records services: for every role, an attacker with only that role
 * calls what it must not reach and gets PERMISSION_DENIED naming the method, the role
 * needed and the role held, and nothing is read or written.
 */

let dir: { path: string; remove: () => Promise<void> };
let pki: TestPki;
let journal: JournalStore;
let state: TestStateServer;
let address: string;
const clients: { close(): void }[] = [];

const ROLES = Object.values(CertificateRole);
/** Every RPC the services serve: its path (`/service/Method`), whether it streams. */
const RPCS: readonly { readonly path: string; readonly streams: boolean }[] = [
  ...Object.values(JournalService),
  ...Object.values(RecordsService),
  ...Object.values(BackupService),
].map((d: { readonly path: string; readonly responseStream: boolean }) => ({
  path: d.path,
  streams: d.responseStream,
}));

function parts(path: string): { service: string; method: string } {
  const [, service = '', method = ''] = path.split('/');
  return { service, method };
}

beforeAll(async () => {
  dir = await tempDir('role-attacks');
  pki = await makeTestPki(dir.path);
  state = await startTestStateServer(dir.path, pki, { signerSeed: 5 });
  ({ journal, address } = state);
}, 120_000);

afterAll(async () => {
  for (const client of clients) client.close();
  await state.close();
  await dir.remove();
});

/** A raw gRPC client holding only `role` (its certificate's one O). */
async function rawClientWith(role: CertificateRole): Promise<Client> {
  const channel = stateChannel({ tls: await clientTls(pki.ca, pki.only[role]) });
  const client = new Client(address, channel.credentials, channel.options);
  clients.push(client);
  return client;
}

/**
 * Calls `path` with an empty request (every field its default): enough to pass or fail
 * authorization, which runs before the request is looked at. Resolves with the error, or
 * undefined when the call got past authorization and succeeded.
 */
function call(client: Client, path: string, streams: boolean): Promise<ServiceError | undefined> {
  const serialize = (): Buffer => Buffer.alloc(0);
  const deserialize = (bytes: Buffer): Buffer => bytes;
  const options = { deadline: Date.now() + 10_000 };
  return new Promise((resolve) => {
    if (!streams) {
      client.makeUnaryRequest(path, serialize, deserialize, {}, new Metadata(), options, (e) =>
        resolve(e ?? undefined),
      );
      return;
    }
    const stream = client.makeServerStreamRequest(
      path,
      serialize,
      deserialize,
      {},
      new Metadata(),
      options,
    );
    stream.on('data', () => undefined);
    stream.on('error', (e: ServiceError) => resolve(e));
    stream.on('end', () => resolve(undefined));
  });
}

/** What an attacker holding only one role tries first: the dangerous calls, by name. */
const ATTACKS: readonly (readonly [CertificateRole, readonly string[]])[] = [
  [
    CertificateRole.Writer,
    [
      'Journal/Repair',
      'Journal/Erase',
      'Records/RevealCredential',
      'Records/DeletePersona',
      'Records/ListSessions',
      'Records/ListPersonas',
      'Records/CreateCredential',
      'Records/LinkIdentity',
      'Journal/Verify',
      'Journal/Retire',
      'Backup/Take',
    ],
  ],
  [
    CertificateRole.Verifier,
    [
      'Journal/Append',
      'Journal/Repair',
      'Journal/Retire',
      'Journal/Erase',
      'Records/Authenticate',
      'Records/CreateSession',
      'Backup/Take',
    ],
  ],
  [
    CertificateRole.Retire,
    [
      'Journal/Append',
      'Journal/Read',
      'Journal/Export',
      'Journal/Repair',
      'Journal/Erase',
      'Records/SetRoles',
    ],
  ],
  [
    CertificateRole.Repair,
    [
      'Journal/Append',
      'Journal/Read',
      'Journal/Export',
      'Journal/Erase',
      'Journal/Retire',
      'Records/SetRoles',
    ],
  ],
  // ---- erasure ----
  [
    CertificateRole.Erase,
    [
      'Journal/Append',
      'Journal/Read',
      'Journal/Export',
      'Journal/Repair',
      'Journal/Retire',
      'Records/SetRoles',
    ],
  ],
  [
    CertificateRole.RecordsAdmin,
    [
      'Journal/Append',
      'Journal/Read',
      'Journal/Repair',
      'Journal/Erase',
      'Journal/Head',
      'Journal/Retire',
      'Backup/Take',
    ],
  ],
  [
    CertificateRole.Backup,
    [
      'Journal/Append',
      'Journal/Read',
      'Journal/Export',
      'Journal/Repair',
      'Journal/Erase',
      'Journal/Retire',
      'Records/RevealCredential',
      'Records/ListPersonas',
      'Records/SetRoles',
    ],
  ],
  [
    CertificateRole.ControlPlaneReplica,
    [
      'Journal/Append',
      'Journal/Head',
      'Journal/Retire',
      'Records/Authenticate',
      'Records/CreateSession',
    ],
  ],
];

describe('an attacker holding one role', () => {
  it('covers every role', () => {
    expect(ATTACKS.map(([role]) => role).sort()).toEqual([...ROLES].sort());
  });

  it.each(ATTACKS)('with only %s is refused the calls it must not reach', async (role, rpcs) => {
    const client = await rawClientWith(role);
    for (const rpc of rpcs) {
      const path = `/polychrome.state.v1.${rpc}`;
      const { method } = parts(path);
      const needed = rolesFor(parts(path).service, method);
      expect(needed).not.toContain(role);
      const error = await call(client, path, RPCS.find((r) => r.path === path)?.streams ?? false);
      expect(error?.code).toBe(status.PERMISSION_DENIED);
      expect(error?.details).toContain(
        `may not call ${method}: it needs role ${needed.join(' or ')} (in the certificate's O or OU), ` +
          `and its certificate holds ${role}`,
      );
    }
  });

  it.each(ROLES)(
    'with only %s is refused every RPC the table does not grant it, and reaches the ones it does',
    async (role) => {
      const client = await rawClientWith(role);
      for (const { path, streams } of RPCS) {
        const { service, method } = parts(path);
        const error = await call(client, path, streams);
        if (rolesFor(service, method).includes(role)) {
          // Past authorization: an empty request may be refused, but not for the role.
          expect([path, error?.code]).not.toEqual([path, status.PERMISSION_DENIED]);
        } else {
          expect([path, error?.code]).toEqual([path, status.PERMISSION_DENIED]);
          expect(error?.details).toContain(`may not call ${method}:`);
          expect(error?.details).toContain(`its certificate holds ${role}`);
        }
      }
    },
    60_000,
  );
});

describe('a refused call', () => {
  it('erases nothing: an Erase with any role but erase leaves the entry as it was', async () => {
    await journal.append('conv-erase-attack', 0, [message('personal')]);
    for (const role of ROLES.filter((r) => r !== CertificateRole.Erase)) {
      const client = new StateClient({
        address,
        tls: await clientTls(pki.ca, pki.only[role]),
        callTimeoutMs: 5_000,
      });
      clients.push(client);
      const request = { positions: [0], actor: 'mallory', reason: 'cover tracks' };
      const error = await client.erase('conv-erase-attack', request).catch((e: unknown) => e);
      expect([role, (error as StateCallError).code]).toEqual([role, 'permission_denied']);
    }
    expect(journal.head('conv-erase-attack').head).toBe(2);
    const [entry] = await collect(journal.read('conv-erase-attack', 0, 1));
    expect(entry?.kind).toBe('message_received');
  });

  it('erases nothing through a memory clear: a writer naming a message, or a set of another key, is refused and nothing changes', async () => {
    const P = 'conv-clear-attack';
    const set = (key: string, value: string) => ({
      kind: 'memory_set',
      payload: encodePayload('memory_set', {
        key,
        value,
        attribution: undefined,
        turnId: 't',
        toolCallId: 'c',
        setAtMs: 1,
      }),
    });
    await journal.append(P, 0, [message('personal'), set('city', 'Lisbon'), set('food', 'fish')]);
    const writer = new StateClient({
      address,
      tls: await clientTls(pki.ca, pki.only[CertificateRole.Writer]),
      callTimeoutMs: 5_000,
    });
    clients.push(writer);
    const clear = (setPositions: number[]) => ({
      kind: 'memory_cleared',
      payload: encodePayload('memory_cleared', {
        key: 'city',
        attribution: { caller: 'mallory', participants: [], persona: '', session: '' },
        clearedAtMs: 1,
        setPositions,
        turnId: '',
        toolCallId: '',
      }),
    });
    for (const [positions, why] of [
      [[0], 'position 0: it is a "message_received" entry'],
      [[1, 2], 'position 2: it sets "food", not "city"'],
    ] as const) {
      const error = await writer.clearMemory(P, 4, clear([...positions])).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(StateCallError);
      expect((error as StateCallError).code).toBe('permission_denied');
      expect((error as StateCallError).message).toContain(why);
    }
    expect(journal.head(P).head).toBe(4);
    expect((await collect(journal.read(P))).map((e) => e.kind)).toEqual([
      'message_received',
      'memory_set',
      'memory_set',
      'signed_root',
    ]);
    // The clear it may make: the set of the key it clears, erased with it.
    const done = await writer.clearMemory(P, 4, clear([1]));
    expect(done.erased.map((e) => [e.position, e.kind])).toEqual([[1, 'memory_set']]);
  });

  it('writes nothing: an Append with only a non-writer role leaves the journal empty', async () => {
    for (const role of ROLES.filter((r) => r !== CertificateRole.Writer)) {
      const client = new StateClient({
        address,
        tls: await clientTls(pki.ca, pki.only[role]),
        callTimeoutMs: 5_000,
      });
      clients.push(client);
      const error = await client.append('conv-attack', 0, [message(role)]).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(StateCallError);
      expect((error as StateCallError).code).toBe('permission_denied');
    }
    expect(journal.head('conv-attack').head).toBe(0);
  });

  it('reveals nothing: a writer cannot read back a credential the records admin stored', async () => {
    const admin = new RecordsClient({
      address,
      tls: await clientTls(pki.ca, pki.only[CertificateRole.RecordsAdmin]),
      callTimeoutMs: 5_000,
    });
    const writer = new RecordsClient({
      address,
      tls: await clientTls(pki.ca, pki.only[CertificateRole.Writer]),
      callTimeoutMs: 5_000,
    });
    clients.push(admin, writer);
    const persona = await admin.createPersona({ displayName: 'p', roles: ['member'] });
    const credential = await admin.createCredential({
      personaId: persona.id,
      kind: 'api-key',
      label: 'k',
      secret: 'hunter2',
    });
    const error = await writer.revealCredential(credential.id).catch((e: unknown) => e);
    expect(error).toMatchObject({ code: 'permission_denied' });
    expect((error as Error).message).toContain(
      'may not call RevealCredential: it needs role polychrome:records-admin',
    );
    expect((error as Error).message).not.toContain('hunter2');
    // The records admin can, so the refusal was the role's.
    expect(Buffer.from((await admin.revealCredential(credential.id)).secret).toString()).toBe(
      'hunter2',
    );
  });
});

describe('a refused Retire', () => {
  it('removes nothing: a writer or verifier asking to retire leaves the partition whole', async () => {
    const writer = new StateClient({
      address,
      tls: await clientTls(pki.ca, pki.only[CertificateRole.Writer]),
      callTimeoutMs: 5_000,
    });
    clients.push(writer);
    const { head } = await writer.append('conv-keep-me', 0, [message('mine')]);
    for (const role of ROLES.filter((r) => r !== CertificateRole.Retire)) {
      const client = new StateClient({
        address,
        tls: await clientTls(pki.ca, pki.only[role]),
        callTimeoutMs: 5_000,
      });
      clients.push(client);
      const error = await client
        .retire('conv-keep-me', { policy: 'delete', actor: 'attacker', reason: 'wipe' })
        .catch((e: unknown) => e);
      expect([role, (error as StateCallError).code]).toEqual([role, 'permission_denied']);
      expect((error as StateCallError).message).toContain(
        'may not call Retire: it needs role polychrome:retire',
      );
    }
    expect(journal.head('conv-keep-me').head).toBe(head);
    expect(journal.listPartitions().map((p) => p.partition)).toContain('conv-keep-me');
    // The retire role alone can; afterwards the writer is refused, naming the retirement.
    const retirer = new StateClient({
      address,
      tls: await clientTls(pki.ca, pki.only[CertificateRole.Retire]),
      callTimeoutMs: 5_000,
    });
    clients.push(retirer);
    const done = await retirer.retire('conv-keep-me', {
      policy: 'checkpoint',
      actor: 'test',
      reason: 'deleted',
    });
    expect(done).toMatchObject({ retiredNow: true, eventsRemoved: head });
    const after = await writer
      .append('conv-keep-me', head, [message('x')])
      .catch((e: unknown) => e);
    expect(after).toMatchObject({ code: 'failed_precondition' });
    expect((after as Error).message).toContain('conv-keep-me was retired at');
  });
});

describe('the shipped certificates', () => {
  it('let the control plane append, repair, erase, retire and authenticate, and not administer records', async () => {
    const tls = await clientTls(pki.ca, pki.controlPlane);
    const state = new StateClient({ address, tls, callTimeoutMs: 5_000 });
    const records = new RecordsClient({ address, tls, callTimeoutMs: 5_000 });
    clients.push(state, records);
    await state.append('conv-cp', 0, [message('hello')]);
    const repaired = await state.repair('conv-cp', { actor: 'a', reason: 'r', dryRun: true });
    expect(repaired.excised).toEqual([]);
    const erase = { positions: [0], actor: 'a', reason: 'r', dryRun: true };
    expect((await state.erase('conv-cp', erase)).erased.map((e) => e.kind)).toEqual([
      'message_received',
    ]);
    const retired = await state.retire('conv-cp', { policy: 'delete', actor: 'a', reason: 'r' });
    expect(retired.retiredNow).toBe(true);
    expect(await records.authenticate('pc_not-a-token').catch((e: unknown) => e)).not.toMatchObject(
      {
        code: 'permission_denied',
      },
    );
    expect(await records.listPersonas({}).catch((e: unknown) => e)).toMatchObject({
      code: 'permission_denied',
    });
  });
});
