import { afterEach, beforeEach, describe, expect, it } from '@jest/globals';

import { kubernetesIdentityOf } from '../../common/identity';
import { identityKey, personaKey, sessionKey } from './record-keys';
import { Role } from '../../common/persona-roles';
import { openHarness, rejection, type Harness } from './testdata/fixtures';

/*
 * Who minted a session and who set a persona's roles are recorded; a persona that links a
 * ServiceAccount never holds admin; records written before these rules still read.
 */

const CAROL = 'kubernetes:carol';
const DESK = kubernetesIdentityOf('system:serviceaccount:team:desk');

let h: Harness;

beforeEach(async () => {
  h = await openHarness();
});

afterEach(async () => {
  await h.close();
});

describe('a session records its minter', () => {
  it('keeps mintedBy with the session and returns it on authenticate, get and list', async () => {
    const ada = await h.store.personas.create({ displayName: 'Ada', identities: ['email:ada'] });
    const { session, token } = await h.store.sessions.create(ada.id, { mintedBy: CAROL });
    expect(session.mintedBy).toBe(CAROL);
    expect((await h.store.sessions.authenticate(token)).session.mintedBy).toBe(CAROL);
    expect((await h.store.sessions.get(session.id)).mintedBy).toBe(CAROL);
    expect((await h.store.sessions.listByPersona(ada.id)).map((s) => s.mintedBy)).toEqual([CAROL]);
  });

  it.each([
    ['absent', undefined],
    ['empty', ''],
    ['not an identity', 'carol'],
  ])('refuses a mint whose minter is %s, and writes nothing', async (_case, mintedBy) => {
    const ada = await h.store.personas.create({ displayName: 'Ada', identities: ['email:ada'] });
    const before = await h.rawRecords();
    const error = await rejection(
      h.store.sessions.create(ada.id, { mintedBy: mintedBy as unknown as string }),
    );
    expect(error.code).toBe('invalid_argument');
    expect(error.message).toMatch(/mintedBy|identity/u);
    expect(await h.rawRecords()).toEqual(before);
  });

  it('reads and authenticates a session record written before minters were recorded', async () => {
    const ada = await h.store.personas.create({ displayName: 'Ada', identities: ['email:ada'] });
    const { session, token } = await h.store.sessions.create(ada.id, { mintedBy: CAROL });
    const stored = (await h.rawRecords()).find(([k]) => k === sessionKey(session.id))?.[1] ?? '';
    const { tokenHash } = JSON.parse(stored) as { tokenHash: string };
    // The exact shape the previous version wrote: no mintedBy.
    await h.putRaw(
      sessionKey(session.id),
      JSON.stringify({
        id: session.id,
        personaId: ada.id,
        tokenHash,
        createdAtMs: session.createdAtMs,
        expiresAtMs: session.expiresAtMs,
        revokedAtMs: null,
      }),
    );
    const found = await h.store.sessions.authenticate(token);
    expect(found.session).toEqual({ ...session, mintedBy: null });
    expect((await h.store.sessions.revoke(session.id)).mintedBy).toBeNull();
  });
});

describe('setting roles records who and when, and is the only way roles change', () => {
  it('keeps setBy and the time; minting leaves the roles and version alone', async () => {
    const bot = await h.store.personas.create({ displayName: 'Bot', identities: ['bot:desk'] });
    expect(bot.rolesSetBy).toBeNull();
    h.clock.advance(1_000);
    const set = await h.store.personas.setRoles(bot.id, [Role.Edge], { setBy: CAROL });
    expect(set).toMatchObject({
      roles: [Role.Edge],
      rolesSetBy: CAROL,
      rolesSetAtMs: h.clock.nowMs(),
      version: 2,
    });
    await h.store.sessions.create(bot.id, { mintedBy: CAROL });
    expect(await h.store.personas.get(bot.id)).toEqual(set);
  });

  it('records who gave the roles of a persona created with them, when named', async () => {
    const bot = await h.store.personas.create({
      displayName: 'Bot',
      identities: ['bot:desk'],
      roles: [Role.Edge],
      rolesSetBy: CAROL,
    });
    expect([bot.rolesSetBy, bot.rolesSetAtMs]).toEqual([CAROL, h.clock.nowMs()]);
    const bad = await rejection(
      h.store.personas.create({ displayName: 'B', roles: [Role.Edge], rolesSetBy: 'carol' }),
    );
    expect(bad.code).toBe('invalid_argument');
  });

  it('refuses to set roles without naming who sets them', async () => {
    const bot = await h.store.personas.create({ displayName: 'Bot', identities: ['bot:desk'] });
    const error = await rejection(h.store.personas.setRoles(bot.id, [Role.Admin], { setBy: '' }));
    expect(error.code).toBe('invalid_argument');
    expect(error.message).toContain('setBy');
    expect((await h.store.personas.get(bot.id)).roles).toEqual([Role.Member]);
  });

  it('reads a persona record written before roles were attributed', async () => {
    const ada = await h.store.personas.create({ displayName: 'Ada', identities: ['email:ada'] });
    await h.putRaw(
      personaKey(ada.id),
      JSON.stringify({
        id: ada.id,
        displayName: 'Ada',
        identities: ['email:ada'],
        roles: ['admin'],
        version: 3,
        createdAtMs: 1,
        updatedAtMs: 2,
      }),
    );
    expect(await h.store.personas.get(ada.id)).toMatchObject({
      roles: [Role.Admin],
      version: 3,
      rolesSetBy: null,
      rolesSetAtMs: null,
    });
  });
});

describe('a persona that links a ServiceAccount never holds admin', () => {
  it('refuses to create one with both, and writes nothing', async () => {
    const before = await h.rawRecords();
    const error = await rejection(
      h.store.personas.create({ displayName: 'Desk', identities: [DESK], roles: [Role.Admin] }),
    );
    expect(error.code).toBe('failed_precondition');
    expect(error.message).toContain(DESK);
    expect(error.message).toContain('admin');
    expect(await h.rawRecords()).toEqual(before);
  });

  it('refuses to link a ServiceAccount to an admin persona', async () => {
    const root = await h.store.personas.create({
      displayName: 'Root',
      identities: ['email:root'],
      roles: [Role.Admin],
    });
    const error = await rejection(h.store.personas.linkIdentity(root.id, DESK));
    expect(error.code).toBe('failed_precondition');
    expect(error.message).toMatch(/ServiceAccount .* admin/u);
    expect(await h.store.personas.findByIdentity(DESK)).toBeUndefined();
    // However the ServiceAccount's identity is spelled: the rule ignores the escape's case.
    const lower = DESK.replace(/%3A/gu, '%3a');
    expect((await rejection(h.store.personas.linkIdentity(root.id, lower))).code).toBe(
      'failed_precondition',
    );
  });

  it('refuses admin for a persona that links a ServiceAccount; edge and member are fine', async () => {
    const desk = await h.store.personas.create({ displayName: 'Desk', identities: [DESK] });
    const error = await rejection(
      h.store.personas.setRoles(desk.id, [Role.Admin, Role.Edge], { setBy: CAROL }),
    );
    expect(error.code).toBe('failed_precondition');
    expect((await h.store.personas.get(desk.id)).roles).toEqual([Role.Member]);
    const edge = await h.store.personas.setRoles(desk.id, [Role.Edge, Role.Member], {
      setBy: CAROL,
    });
    expect(edge.roles).toEqual([Role.Member, Role.Edge]);
  });

  it('still reads an old record that holds both (the control plane drops admin when it authenticates)', async () => {
    const desk = await h.store.personas.create({ displayName: 'Desk', identities: [DESK] });
    const old = {
      id: desk.id,
      displayName: 'Desk',
      identities: [DESK],
      roles: ['admin', 'edge'],
      version: 1,
      createdAtMs: 1,
      updatedAtMs: 1,
    };
    await h.putRaw(personaKey(desk.id), JSON.stringify(old));
    await h.putRaw(identityKey(DESK), JSON.stringify(desk.id));
    expect((await h.store.personas.findByIdentity(DESK))?.roles).toEqual([Role.Admin, Role.Edge]);
  });
});
