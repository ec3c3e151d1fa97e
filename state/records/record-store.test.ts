import { afterEach, beforeEach, describe, expect, it } from '@jest/globals';

import { RecordStore } from './record-store';
import { CeremonyKind } from './record-schemas';
import { Role } from '../../common/persona-roles';
import { openHarness, rejection, testKey, type Harness } from './testdata/fixtures';

/** The identity recorded as minter or role setter in these tests. */
const MINTER = 'test:minter';

let h: Harness;

beforeEach(async () => {
  h = await openHarness();
});

afterEach(async () => {
  await h.close();
});

describe('RecordStore', () => {
  it('writes only under its own sublevel and leaves other keys alone', async () => {
    // A journal-store-like key at the root of the same database.
    const foreign = Uint8Array.of(0x50, 0x63, 0x00, 0x68);
    await h.db.put(foreign, Uint8Array.of(1, 2, 3));
    const p = await h.store.personas.create({ displayName: 'Ada', identities: ['email:ada'] });
    await h.store.sessions.create(p.id, { mintedBy: MINTER });
    const keys = await h.db.keys().all();
    const prefix = Buffer.from('!records!');
    expect(keys.filter((k) => !Buffer.from(k).subarray(0, prefix.length).equals(prefix))).toEqual([
      foreign,
    ]);
    expect(await h.db.get(foreign)).toEqual(Uint8Array.of(1, 2, 3));
  });

  it('finds everything again after the database is reopened', async () => {
    const ada = await h.store.personas.create({
      displayName: 'Ada',
      roles: [Role.Admin],
      identities: ['email:ada'],
    });
    const linked = await h.store.personas.linkIdentity(ada.id, 'github:ada');
    const { session, token } = await h.store.sessions.create(ada.id, { mintedBy: MINTER });
    const credential = await h.store.credentials.create({
      personaId: ada.id,
      kind: 'api-key',
      label: 'k',
      secret: 'sk-1',
    });
    const { ceremony } = await h.store.ceremonies.start({
      kind: CeremonyKind.LinkIdentity,
      personaId: ada.id,
      identity: 'slack:T1:U1',
    });
    const raw = await h.rawRecords();

    const store = await h.reopen();
    expect(await h.rawRecords()).toEqual(raw);
    expect(await store.personas.get(ada.id)).toEqual(linked);
    expect(await store.personas.list()).toEqual([linked]);
    expect((await store.personas.findByIdentity('github:ada'))?.id).toBe(ada.id);
    expect((await store.sessions.authenticate(token)).session).toEqual(session);
    expect(Buffer.from((await store.credentials.reveal(credential.id)).secret).toString()).toBe(
      'sk-1',
    );
    expect(await store.ceremonies.get(ceremony.id)).toEqual(ceremony);
  });

  it('works inside a sublevel of the database', async () => {
    const parent = h.db.sublevel('state');
    const store = new RecordStore({ db: parent, key: testKey(0) });
    await store.open();
    const p = await store.personas.create({ displayName: 'Nested' });
    expect((await store.personas.get(p.id)).displayName).toBe('Nested');
    const keys = (await h.db.keys().all()).map((k) => Buffer.from(k).toString());
    expect(keys).toContain(`!state!!records!persona:${p.id}`);
    // The harness store (a sibling sublevel) does not see it.
    expect(await h.store.personas.list()).toEqual([]);
  });

  it('refuses records written in another format', async () => {
    await h.putRaw('meta:format', 'polychrome-records/v9');
    const store = new RecordStore({ db: h.db, key: testKey(0) });
    const error = await rejection(store.open());
    expect(error.code).toBe('failed_precondition');
    expect(error.message).toBe(
      'the records in this database are in format "polychrome-records/v9", not ' +
        'polychrome-records/v1; run a state plane that reads that format',
    );
  });

  it('reports an unreadable record as data loss, naming the key', async () => {
    const p = await h.store.personas.create({ displayName: 'Ada' });
    await h.putRaw(`persona:${p.id}`, '{"id":"id-0001","displayName":3}');
    const error = await rejection(h.store.personas.get(p.id));
    expect(error.code).toBe('data_loss');
    expect(error.message).toBe(
      `the stored record persona:${p.id} does not match its schema at "displayName": Invalid ` +
        'input: expected string, received number; restore the state volume from a backup or ' +
        'delete the record',
    );
    await h.putRaw(`persona:${p.id}`, 'not json');
    expect((await rejection(h.store.personas.get(p.id))).message).toBe(
      `the stored record persona:${p.id} is not JSON; restore the state volume from a backup ` +
        'or delete the record',
    );
  });

  it('reports a closed database as unavailable and changes nothing', async () => {
    const p = await h.store.personas.create({ displayName: 'Ada' });
    await h.db.close();
    const error = await rejection(h.store.personas.rename(p.id, 'B'));
    expect(error.code).toBe('unavailable');
    expect(error.message).toBe(
      'the records database failed to read; check the state volume and restart the state ' +
        'plane if it persists',
    );
    const store = await h.reopen();
    expect((await store.personas.get(p.id)).displayName).toBe('Ada');
  });
});
