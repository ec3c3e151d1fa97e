import { afterEach, beforeEach, describe, expect, it } from '@jest/globals';

import { Role } from '../../common/persona-roles';
import { openHarness, rejection, type Harness } from './testdata/fixtures';

/** The identity recorded as minter or role setter in these tests. */
const MINTER = 'test:minter';

let h: Harness;

beforeEach(async () => {
  h = await openHarness();
});

afterEach(async () => {
  await h.close();
});

describe('PersonaRecords.create and get', () => {
  it('stores a persona with version 1, sorted identities, default role and clock times', async () => {
    const created = await h.store.personas.create({
      displayName: 'Ada Lovelace',
      identities: ['slack:T1:U1', 'email:ada@example.com'],
    });
    const start = h.clock.nowMs();
    expect(created).toEqual({
      id: 'id-0001',
      displayName: 'Ada Lovelace',
      identities: ['email:ada@example.com', 'slack:T1:U1'],
      roles: ['member'],
      version: 1,
      createdAtMs: start,
      updatedAtMs: start,
      rolesSetBy: null,
      rolesSetAtMs: null,
    });
    expect(await h.store.personas.get('id-0001')).toEqual(created);
    expect((await h.store.personas.findByIdentity('slack:T1:U1'))?.id).toBe('id-0001');
    expect(await h.store.personas.findByIdentity('slack:T1:U2')).toBeUndefined();
  });

  it('keeps roles in the order of Role without repeats', async () => {
    const p = await h.store.personas.create({
      displayName: 'Root',
      roles: [Role.Member, Role.Admin, Role.Member],
    });
    expect(p.roles).toEqual(['admin', 'member']);
  });

  it('reports a missing or malformed id', async () => {
    const missing = await rejection(h.store.personas.get('nobody'));
    expect(missing.code).toBe('not_found');
    expect(missing.message).toBe('persona nobody does not exist; create it first or check the id');
    const malformed = await rejection(h.store.personas.get('a/b'));
    expect(malformed.code).toBe('invalid_argument');
    expect(malformed.message).toBe(
      'persona id "a/b" is not valid: use 1 to 64 characters of A-Z, a-z, 0-9, "_" and "-"',
    );
  });

  it.each<[string, object, string]>([
    [
      'empty name',
      { displayName: '  ' },
      'persona displayName "  " is empty; give 1 to 128 characters',
    ],
    [
      'untrimmed name',
      { displayName: ' Ada' },
      'persona displayName " Ada" has leading or trailing whitespace; trim it',
    ],
    [
      'control character',
      { displayName: 'Ada\u0007' },
      'persona displayName "Ada\\u0007" holds a control character; remove it',
    ],
    [
      'long name',
      { displayName: 'x'.repeat(129) },
      `persona displayName "${'x'.repeat(80)}"… is 129 characters long; give at most 128`,
    ],
    ['name not a string', { displayName: 7 }, 'persona displayName 7 must be a string'],
    [
      'unknown role',
      { displayName: 'Ada', roles: ['owner'] },
      'persona role "owner" is unknown; roles are admin, member, edge',
    ],
    [
      'bad identity',
      { displayName: 'Ada', identities: ['Email:ada'] },
      'identity "Email:ada" has provider "Email": a provider starts with a lower-case letter ' +
        'and holds only a-z, 0-9 and "-"; expected provider:external_id or ' +
        'provider:scope:external_id',
    ],
    [
      'repeated identity',
      { displayName: 'Ada', identities: ['email:ada', 'email:ada'] },
      'persona identities repeat an identity; list each identity once',
    ],
  ])('rejects a %s and writes nothing', async (_case, input, message) => {
    const before = await h.rawRecords();
    // Object.assign keeps the declared type while the runtime values are ill-typed: the
    // store is the boundary (gRPC input arrives unchecked) and must catch them itself.
    const error = await rejection(
      h.store.personas.create(Object.assign({ displayName: '' }, input)),
    );
    expect(error.code).toBe('invalid_argument');
    expect(error.message).toBe(message);
    expect(await h.rawRecords()).toEqual(before);
  });

  it('refuses an identity another persona holds, naming the holder in details only', async () => {
    const ada = await h.store.personas.create({ displayName: 'Ada', identities: ['email:ada'] });
    const before = await h.rawRecords();
    const error = await rejection(
      h.store.personas.create({ displayName: 'Eve', identities: ['github:eve', 'email:ada'] }),
    );
    expect(error.code).toBe('already_exists');
    expect(error.message).toBe(
      'identity "email:ada" is already linked to another persona; unlink it there before ' +
        'linking it to persona id-0002',
    );
    expect(error.details).toMatchObject({ identity: 'email:ada', linkedPersonaId: ada.id });
    expect(await h.rawRecords()).toEqual(before);
    expect(await h.store.personas.findByIdentity('github:eve')).toBeUndefined();
  });
});

describe('PersonaRecords.linkIdentity and unlinkIdentity', () => {
  it('links and unlinks, bumping the version and moving the index', async () => {
    const ada = await h.store.personas.create({ displayName: 'Ada' });
    h.clock.advance(1000);
    const linked = await h.store.personas.linkIdentity(ada.id, 'github:ada', {
      expectedVersion: 1,
    });
    expect(linked).toMatchObject({ identities: ['github:ada'], version: 2 });
    expect(linked.updatedAtMs).toBe(ada.createdAtMs + 1000);
    expect((await h.store.personas.findByIdentity('github:ada'))?.id).toBe(ada.id);

    const again = await h.store.personas.linkIdentity(ada.id, 'github:ada');
    expect(again.version).toBe(2);

    const unlinked = await h.store.personas.unlinkIdentity(ada.id, 'github:ada', {
      expectedVersion: 2,
    });
    expect(unlinked).toMatchObject({ identities: [], version: 3 });
    expect(await h.store.personas.findByIdentity('github:ada')).toBeUndefined();

    const missing = await rejection(h.store.personas.unlinkIdentity(ada.id, 'github:ada'));
    expect(missing.code).toBe('not_found');
    expect(missing.message).toBe(
      'identity "github:ada" is not linked to persona id-0001; nothing to unlink',
    );
  });

  it('lets exactly one of two personas link the same identity at once', async () => {
    const a = await h.store.personas.create({ displayName: 'A' });
    const b = await h.store.personas.create({ displayName: 'B' });
    const results = await Promise.allSettled([
      h.store.personas.linkIdentity(a.id, 'slack:T1:U9'),
      h.store.personas.linkIdentity(b.id, 'slack:T1:U9'),
    ]);
    const won = results.filter((r) => r.status === 'fulfilled');
    const lost = results.filter((r) => r.status === 'rejected');
    expect(won).toHaveLength(1);
    expect(lost).toHaveLength(1);
    expect(lost[0]?.status === 'rejected' && lost[0].reason).toMatchObject({
      code: 'already_exists',
    });
    const holder = await h.store.personas.findByIdentity('slack:T1:U9');
    const holders = [await h.store.personas.get(a.id), await h.store.personas.get(b.id)].filter(
      (p) => p.identities.includes('slack:T1:U9'),
    );
    expect(holders.map((p) => p.id)).toEqual([holder?.id]);
  });

  it('keeps one holder when many personas race for one identity', async () => {
    const personas = [];
    for (let i = 0; i < 12; i++) {
      personas.push(await h.store.personas.create({ displayName: `P${String(i)}` }));
    }
    const results = await Promise.allSettled(
      personas.map((p) => h.store.personas.linkIdentity(p.id, 'email:shared@example.com')),
    );
    expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
    const identityKeys = (await h.rawRecords()).filter(([k]) => k.startsWith('identity:'));
    expect(identityKeys).toHaveLength(1);
  });

  it('bounds the identities a persona may hold', async () => {
    const identities = Array.from({ length: 64 }, (_, i) => `email:u${String(i)}@example.com`);
    const p = await h.store.personas.create({ displayName: 'Many', identities });
    const error = await rejection(h.store.personas.linkIdentity(p.id, 'email:one-more'));
    expect(error.code).toBe('resource_exhausted');
    expect(error.message).toBe(
      'persona id-0001 would hold 65 identities, more than the 64 allowed; unlink some first',
    );
  });
});

describe('PersonaRecords optimistic concurrency', () => {
  it('refuses a stale expectedVersion with the current version and changes nothing', async () => {
    const p = await h.store.personas.create({ displayName: 'Ada' });
    await h.store.personas.setRoles(p.id, [Role.Admin], { expectedVersion: 1, setBy: MINTER });
    const before = await h.rawRecords();
    for (const change of [
      () => h.store.personas.setRoles(p.id, [Role.Member], { expectedVersion: 1, setBy: MINTER }),
      () => h.store.personas.rename(p.id, 'Countess', { expectedVersion: 1 }),
      () => h.store.personas.linkIdentity(p.id, 'email:ada', { expectedVersion: 1 }),
      () => h.store.personas.delete(p.id, { expectedVersion: 1 }),
    ]) {
      const error = await rejection(change());
      expect(error.code).toBe('conflict');
      expect(error.message).toBe(
        'persona id-0001 is at version 2, not 1: it changed since you read it; read it again ' +
          'and retry',
      );
      expect(error.details).toEqual({
        record: 'persona',
        personaId: 'id-0001',
        expectedVersion: 1,
        version: 2,
      });
    }
    expect(await h.rawRecords()).toEqual(before);
  });

  it('lets one of two writers holding the same version win', async () => {
    const p = await h.store.personas.create({ displayName: 'Ada' });
    const results = await Promise.allSettled([
      h.store.personas.rename(p.id, 'First', { expectedVersion: 1 }),
      h.store.personas.rename(p.id, 'Second', { expectedVersion: 1 }),
    ]);
    expect(results.map((r) => r.status).sort()).toEqual(['fulfilled', 'rejected']);
    const after = await h.store.personas.get(p.id);
    expect(after.version).toBe(2);
    const winner = results.find((r) => r.status === 'fulfilled');
    expect(winner?.status === 'fulfilled' && winner.value).toEqual(after);
  });

  it('rejects a malformed expectedVersion', async () => {
    const p = await h.store.personas.create({ displayName: 'Ada' });
    const error = await rejection(h.store.personas.rename(p.id, 'B', { expectedVersion: 0 }));
    expect(error.code).toBe('invalid_argument');
    expect(error.message).toBe(
      'persona expectedVersion 0 is not valid: give the positive version you last read, or ' +
        'omit it to skip the check',
    );
  });
});

describe('PersonaRecords.list and delete', () => {
  it('pages through personas in id order', async () => {
    for (const name of ['A', 'B', 'C', 'D', 'E'])
      await h.store.personas.create({ displayName: name });
    const first = await h.store.personas.list({ limit: 2 });
    expect(first.map((p) => p.displayName)).toEqual(['A', 'B']);
    const next = await h.store.personas.list({ after: first[1]?.id, limit: 10 });
    expect(next.map((p) => p.displayName)).toEqual(['C', 'D', 'E']);
    const error = await rejection(h.store.personas.list({ limit: 0 }));
    expect(error.message).toBe('limit 0 is not valid: give a whole number from 1 to 1000');
  });

  it('deletes a persona with its identities, sessions, credentials and ceremonies', async () => {
    const bob = await h.store.personas.create({ displayName: 'Bob', identities: ['email:bob'] });
    const { token: bobToken } = await h.store.sessions.create(bob.id, { mintedBy: MINTER });
    const bobOnly = await h.rawRecords();
    const ada = await h.store.personas.create({ displayName: 'Ada', identities: ['email:ada'] });
    const { token } = await h.store.sessions.create(ada.id, { mintedBy: MINTER });
    await h.store.credentials.create({
      personaId: ada.id,
      kind: 'api-key',
      label: 'k',
      secret: 's',
    });
    await h.store.ceremonies.start({
      kind: 'link-identity',
      personaId: ada.id,
      identity: 'github:ada',
    });

    await h.store.personas.delete(ada.id);

    expect((await rejection(h.store.personas.get(ada.id))).code).toBe('not_found');
    expect(await h.store.personas.findByIdentity('email:ada')).toBeUndefined();
    const error = await rejection(h.store.sessions.authenticate(token));
    expect(error.message).toBe(
      'the bearer token is unknown (never issued, or its persona was deleted); sign in again ' +
        'to get a new token',
    );
    expect((await h.store.sessions.authenticate(bobToken)).persona.id).toBe(bob.id);
    // Every record and index entry Ada had is gone in the one batch; Bob's are untouched.
    expect(await h.rawRecords()).toEqual(bobOnly);
    // The identity is free again.
    await h.store.personas.linkIdentity(bob.id, 'email:ada');
  });
});
