import { afterEach, beforeEach, describe, expect, it } from '@jest/globals';

import { DEFAULT_CEREMONY_TTL_MS } from './ceremony-records';
import { CeremonyKind } from './record-schemas';
import { openHarness, rejection, type Harness } from './testdata/fixtures';

let h: Harness;
let personaId: string;

beforeEach(async () => {
  h = await openHarness();
  personaId = (await h.store.personas.create({ displayName: 'Ada', identities: ['email:ada'] })).id;
});

afterEach(async () => {
  await h.close();
});

function start(options: { maxAttempts?: number; ttlMs?: number } = {}) {
  return h.store.ceremonies.start({
    kind: CeremonyKind.LinkIdentity,
    personaId,
    identity: 'slack:T1:U1',
    ...options,
  });
}

/** A well-formed code that is not `code`. */
function wrong(code: string): string {
  return code === '00000000' ? '00000001' : '00000000';
}

describe('CeremonyRecords.start', () => {
  it('returns an 8-digit code once and stores only its MAC', async () => {
    const { ceremony, code } = await start();
    expect(code).toMatch(/^[0-9]{8}$/);
    const now = h.clock.nowMs();
    expect(ceremony).toEqual({
      id: 'id-0002',
      kind: 'link-identity',
      personaId,
      identity: 'slack:T1:U1',
      state: 'pending',
      attempts: 0,
      maxAttempts: 5,
      createdAtMs: now,
      expiresAtMs: now + DEFAULT_CEREMONY_TTL_MS,
      endedAtMs: null,
      failureReason: null,
    });
    const raw = await h.rawRecords();
    const stored = raw.find(([k]) => k === `ceremony:${ceremony.id}`)?.[1] ?? '';
    expect(stored).toMatch(/"codeMac":"[0-9a-f]{64}"/);
    expect(stored).not.toContain(`"${code}"`);
    expect(await h.store.ceremonies.get(ceremony.id)).toEqual(ceremony);
    expect(await h.store.ceremonies.listByPersona(personaId)).toEqual([ceremony]);
  });

  it.each<[string, object, string, string]>([
    [
      'an unknown kind',
      { kind: 'reset-password' },
      'invalid_argument',
      'ceremony kind "reset-password" is unknown; kinds are link-identity',
    ],
    [
      'too many attempts',
      { maxAttempts: 11 },
      'invalid_argument',
      'ceremony maxAttempts 11 is not valid: give a whole number from 1 to 10, or omit it for 5',
    ],
    [
      'an identity this persona holds',
      { identity: 'email:ada' },
      'failed_precondition',
      'identity "email:ada" is already linked to persona id-0001; there is nothing to prove',
    ],
    [
      'a missing persona',
      { personaId: 'nobody' },
      'not_found',
      'persona nobody does not exist; create it first or check the id',
    ],
  ])('refuses %s and writes nothing', async (_case, change, code, message) => {
    const before = await h.rawRecords();
    const input = Object.assign(
      { kind: CeremonyKind.LinkIdentity, personaId, identity: 'slack:T1:U1' },
      change,
    );
    const error = await rejection(h.store.ceremonies.start(input));
    expect(error.code).toBe(code);
    expect(error.message).toBe(message);
    expect(await h.rawRecords()).toEqual(before);
  });

  it('refuses an identity another persona holds', async () => {
    await h.store.personas.create({ displayName: 'Eve', identities: ['slack:T1:U1'] });
    expect((await rejection(start())).code).toBe('already_exists');
  });
});

describe('CeremonyRecords.complete', () => {
  it('completes with the right code and links the identity in the same batch', async () => {
    const { ceremony, code } = await start();
    h.clock.advance(30_000);
    const done = await h.store.ceremonies.complete(ceremony.id, code);
    expect(done.ceremony).toMatchObject({
      state: 'completed',
      attempts: 1,
      endedAtMs: ceremony.createdAtMs + 30_000,
      failureReason: null,
    });
    expect(done.persona).toMatchObject({ identities: ['email:ada', 'slack:T1:U1'], version: 2 });
    expect((await h.store.personas.findByIdentity('slack:T1:U1'))?.id).toBe(personaId);

    const again = await rejection(h.store.ceremonies.complete(ceremony.id, code));
    expect(again.code).toBe('failed_precondition');
    expect(again.message).toBe(
      `ceremony ${ceremony.id} is completed, not pending; start a new ceremony`,
    );
  });

  it('counts wrong codes and says how many attempts are left', async () => {
    const { ceremony, code } = await start({ maxAttempts: 3 });
    const first = await rejection(h.store.ceremonies.complete(ceremony.id, wrong(code)));
    expect(first.code).toBe('permission_denied');
    expect(first.message).toBe(`the code for ceremony ${ceremony.id} is wrong; 2 attempt(s) left`);
    expect(first.details).toMatchObject({ attemptsLeft: 2, state: 'pending' });
    expect(JSON.stringify(first)).not.toContain(code);
    expect(await h.store.ceremonies.get(ceremony.id)).toMatchObject({
      attempts: 1,
      state: 'pending',
    });
    // A later right code still works.
    const done = await h.store.ceremonies.complete(ceremony.id, code);
    expect(done.ceremony).toMatchObject({ state: 'completed', attempts: 2 });
  });

  it('fails the ceremony when the attempts run out, even for the right code after', async () => {
    const { ceremony, code } = await start({ maxAttempts: 2 });
    await rejection(h.store.ceremonies.complete(ceremony.id, wrong(code)));
    const last = await rejection(h.store.ceremonies.complete(ceremony.id, wrong(code)));
    expect(last.code).toBe('permission_denied');
    expect(last.message).toBe(
      `the code for ceremony ${ceremony.id} is wrong and that was the last of 2 attempts; the ` +
        'ceremony has failed, start a new one',
    );
    expect(await h.store.ceremonies.get(ceremony.id)).toMatchObject({
      state: 'failed',
      attempts: 2,
      failureReason: 'too many wrong codes',
    });
    const late = await rejection(h.store.ceremonies.complete(ceremony.id, code));
    expect(late.code).toBe('failed_precondition');
    expect(late.message).toBe(
      `ceremony ${ceremony.id} is failed, not pending; start a new ceremony`,
    );
    expect(await h.store.personas.findByIdentity('slack:T1:U1')).toBeUndefined();
  });

  it('refuses the right code after expiry and records the ceremony as expired', async () => {
    const { ceremony, code } = await start({ ttlMs: 60_000 });
    h.clock.advance(60_000);
    // Reads report the lapse before anyone writes it.
    expect((await h.store.ceremonies.get(ceremony.id)).state).toBe('expired');
    const error = await rejection(h.store.ceremonies.complete(ceremony.id, code));
    expect(error.code).toBe('failed_precondition');
    expect(error.message).toBe(
      `ceremony ${ceremony.id} expired at 2026-09-01T12:01:00.000Z; start a new ceremony to ` +
        'get a new code',
    );
    expect(await h.store.ceremonies.get(ceremony.id)).toMatchObject({
      state: 'expired',
      attempts: 0,
      endedAtMs: ceremony.expiresAtMs,
      failureReason: 'expired before completion',
    });
    expect(await h.store.personas.findByIdentity('slack:T1:U1')).toBeUndefined();
  });

  it('does not count a malformed code, and changes nothing', async () => {
    const { ceremony } = await start();
    const before = await h.rawRecords();
    for (const bad of ['', '1234567', '123456789', 'abcdefgh', ' 12345678']) {
      const error = await rejection(h.store.ceremonies.complete(ceremony.id, bad));
      expect(error.code).toBe('invalid_argument');
      expect(error.message).toBe(
        `the code for ceremony ${ceremony.id} must be 8 digits; check what was typed`,
      );
    }
    expect(await h.rawRecords()).toEqual(before);
  });

  it('fails when the identity was linked to another persona meanwhile', async () => {
    const { ceremony, code } = await start();
    const eve = await h.store.personas.create({ displayName: 'Eve', identities: ['slack:T1:U1'] });
    const error = await rejection(h.store.ceremonies.complete(ceremony.id, code));
    expect(error.code).toBe('already_exists');
    expect(await h.store.ceremonies.get(ceremony.id)).toMatchObject({
      state: 'failed',
      failureReason: 'link failed: already_exists',
    });
    expect((await h.store.personas.findByIdentity('slack:T1:U1'))?.id).toBe(eve.id);
  });

  it('lets one of two concurrent completions with the right code win', async () => {
    const { ceremony, code } = await start();
    const results = await Promise.allSettled([
      h.store.ceremonies.complete(ceremony.id, code),
      h.store.ceremonies.complete(ceremony.id, code),
    ]);
    expect(results.map((r) => r.status).sort()).toEqual(['fulfilled', 'rejected']);
    expect((await h.store.personas.get(personaId)).version).toBe(2);
  });

  it('finds and completes a ceremony after the database is reopened', async () => {
    const { ceremony, code } = await start();
    await h.reopen();
    expect(await h.store.ceremonies.get(ceremony.id)).toEqual(ceremony);
    expect((await h.store.ceremonies.complete(ceremony.id, code)).ceremony.state).toBe('completed');
  });
});
