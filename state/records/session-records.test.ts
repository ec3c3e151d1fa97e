import { createHash } from 'node:crypto';
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';

import { afterEach, beforeEach, describe, expect, it } from '@jest/globals';

import { AppError } from '../../common/errors';
import { DEFAULT_SESSION_TTL_MS, MAX_SESSION_TTL_MS } from './session-records';
import { openHarness, rejection, type Harness } from './testdata/fixtures';

/** The identity recorded as minter or role setter in these tests. */
const MINTER = 'test:minter';

let h: Harness;
let personaId: string;

beforeEach(async () => {
  h = await openHarness();
  personaId = (await h.store.personas.create({ displayName: 'Ada', identities: ['email:ada'] })).id;
});

afterEach(async () => {
  await h.close();
});

/** Every file of the database directory, concatenated: what an attacker with the volume sees. */
async function rawVolume(): Promise<Buffer> {
  const files = await readdir(h.path);
  return Buffer.concat(await Promise.all(files.map((f) => readFile(join(h.path, f)))));
}

describe('SessionRecords.create', () => {
  it('returns a 256-bit base64url token once and stores only its SHA-256', async () => {
    const { session, token } = await h.store.sessions.create(personaId, { mintedBy: MINTER });
    expect(token).toMatch(/^pcs_[A-Za-z0-9_-]{43}$/);
    expect(Buffer.from(token.slice(4), 'base64url')).toHaveLength(32);
    const start = h.clock.nowMs();
    expect(session).toEqual({
      id: 'id-0002',
      personaId,
      createdAtMs: start,
      expiresAtMs: start + DEFAULT_SESSION_TTL_MS,
      revokedAtMs: null,
      mintedBy: MINTER,
    });
    expect(Object.keys(session)).not.toContain('tokenHash');

    const hash = createHash('sha256').update(token).digest('hex');
    const secretPart = token.slice(4);
    // Closed, so every write is in the files; no compaction has run yet, so the log holds
    // the values uncompressed and the positive control (the hash) must be found.
    await h.db.close();
    const volume = await rawVolume();
    expect(volume.includes(hash)).toBe(true);
    expect(volume.includes(token)).toBe(false);
    expect(volume.includes(secretPart)).toBe(false);
    expect(volume.includes(Buffer.from(secretPart, 'base64url'))).toBe(false);
    await h.reopen();
    const raw = JSON.stringify(await h.rawRecords());
    expect(raw).not.toContain(secretPart);
    expect(raw).toContain(`session-token:${hash}`);
  });

  it('issues a different token every time', async () => {
    const tokens = new Set<string>();
    for (let i = 0; i < 20; i++)
      tokens.add((await h.store.sessions.create(personaId, { mintedBy: MINTER })).token);
    expect(tokens.size).toBe(20);
  });

  it('rejects a bad ttl or an unknown persona and writes nothing', async () => {
    const before = await h.rawRecords();
    const ttl = await rejection(
      h.store.sessions.create(personaId, { ttlMs: MAX_SESSION_TTL_MS + 1, mintedBy: MINTER }),
    );
    expect(ttl.code).toBe('invalid_argument');
    expect(ttl.message).toBe(
      `session ttlMs ${String(MAX_SESSION_TTL_MS + 1)} is not valid: give a whole number of ` +
        `milliseconds from 1 to ${String(MAX_SESSION_TTL_MS)}, or omit it for ` +
        `${String(DEFAULT_SESSION_TTL_MS)}`,
    );
    const missing = await rejection(h.store.sessions.create('nobody', { mintedBy: MINTER }));
    expect(missing.code).toBe('not_found');
    expect(await h.rawRecords()).toEqual(before);
  });
});

describe('SessionRecords.authenticate', () => {
  it('finds the session and persona of a live token', async () => {
    const { session, token } = await h.store.sessions.create(personaId, {
      ttlMs: 60_000,
      mintedBy: MINTER,
    });
    const found = await h.store.sessions.authenticate(token);
    expect(found.session).toEqual(session);
    expect(found.persona.identities).toEqual(['email:ada']);
  });

  it.each([
    [
      'a malformed token',
      'Bearer abc',
      'the bearer token is malformed (expected "pcs_" and 43 more characters)',
    ],
    [
      'an unknown token',
      `pcs_${'A'.repeat(43)}`,
      'the bearer token is unknown (never issued, or its persona was deleted)',
    ],
  ])('refuses %s without quoting it', async (_case, token, problem) => {
    const error = await rejection(h.store.sessions.authenticate(token));
    expect(error.code).toBe('unauthenticated');
    expect(error.message).toBe(`${problem}; sign in again to get a new token`);
    expect(JSON.stringify(error)).not.toContain(token.slice(4));
  });

  it('refuses an expired token from the moment it expires', async () => {
    const { session, token } = await h.store.sessions.create(personaId, {
      ttlMs: 60_000,
      mintedBy: MINTER,
    });
    h.clock.advance(59_999);
    await h.store.sessions.authenticate(token);
    h.clock.advance(1);
    const error = await rejection(h.store.sessions.authenticate(token));
    expect(error.code).toBe('unauthenticated');
    expect(error.message).toBe(
      `session ${session.id} expired at 2026-09-01T12:01:00.000Z; sign in again to get a new token`,
    );
    expect(error.details).toEqual({ record: 'session', sessionId: session.id, personaId });
    expect(JSON.stringify(error)).not.toContain(token.slice(4));
  });

  it('refuses a revoked token, and revoking twice changes nothing', async () => {
    const { session, token } = await h.store.sessions.create(personaId, { mintedBy: MINTER });
    h.clock.advance(5000);
    const revoked = await h.store.sessions.revoke(session.id);
    expect(revoked.revokedAtMs).toBe(session.createdAtMs + 5000);
    const before = await h.rawRecords();
    h.clock.advance(5000);
    expect(await h.store.sessions.revoke(session.id)).toEqual(revoked);
    expect(await h.rawRecords()).toEqual(before);
    const error = await rejection(h.store.sessions.authenticate(token));
    expect(error.message).toBe(
      `session ${session.id} was revoked at 2026-09-01T12:00:05.000Z; sign in again to get a ` +
        'new token',
    );
  });

  it('reports a token index that points at the wrong session as data loss', async () => {
    const { token } = await h.store.sessions.create(personaId, { mintedBy: MINTER });
    const other = await h.store.sessions.create(personaId, { mintedBy: MINTER });
    const hash = createHash('sha256').update(token).digest('hex');
    await h.putRaw(`session-token:${hash}`, JSON.stringify(other.session.id));
    const error = await rejection(h.store.sessions.authenticate(token));
    expect(error.code).toBe('data_loss');
    expect(error.message).not.toContain(hash);
  });
});

describe('SessionRecords.listByPersona and prune', () => {
  it('lists a persona’s sessions without hashes and prunes ended ones', async () => {
    const a = await h.store.sessions.create(personaId, { ttlMs: 1000, mintedBy: MINTER });
    const b = await h.store.sessions.create(personaId, { ttlMs: 10_000, mintedBy: MINTER });
    const c = await h.store.sessions.create(personaId, { ttlMs: 10_000, mintedBy: MINTER });
    await h.store.sessions.revoke(c.session.id);
    const listed = await h.store.sessions.listByPersona(personaId);
    expect(listed.map((s) => s.id)).toEqual([a.session.id, b.session.id, c.session.id]);
    expect(JSON.stringify(listed)).not.toMatch(/[0-9a-f]{64}/);

    h.clock.advance(2000);
    expect(await h.store.sessions.prune()).toBe(2);
    expect((await h.store.sessions.listByPersona(personaId)).map((s) => s.id)).toEqual([
      b.session.id,
    ]);
    expect((await rejection(h.store.sessions.authenticate(a.token))).message).toContain('unknown');
    await h.store.sessions.authenticate(b.token);
  });

  it('never mistakes a concurrent delete for a corrupt index', async () => {
    // Lookups run back to back while the persona is deleted, so the deleting batch lands
    // between some lookup's index read and record read: each lookup must still see the
    // session whole or not at all (snapshot reads), never a dangling index.
    const outcomes: string[] = [];
    for (let round = 0; round < 5; round++) {
      const persona = await h.store.personas.create({ displayName: `R${String(round)}` });
      const tokens: string[] = [];
      for (let i = 0; i < 5; i++)
        tokens.push((await h.store.sessions.create(persona.id, { mintedBy: MINTER })).token);
      let deleted = false;
      const deletion = h.store.personas.delete(persona.id).then(() => {
        deleted = true;
      });
      const lookups = tokens.map(async (token) => {
        // Each loop ends with one lookup that starts after the delete resolved.
        for (let last = false; !last;) {
          last = deleted;
          const result = await h.store.sessions.authenticate(token).then(
            () => 'ok',
            (error: unknown) => (error instanceof AppError ? error.code : 'other'),
          );
          outcomes.push(result);
        }
      });
      await Promise.all([deletion, ...lookups]);
    }
    expect(outcomes.filter((o) => o !== 'ok' && o !== 'unauthenticated')).toEqual([]);
    // Both sides of the race were seen, or the test proved nothing.
    expect(outcomes).toContain('ok');
    expect(outcomes).toContain('unauthenticated');
  });

  it('finds sessions again after the database is reopened', async () => {
    const { session, token } = await h.store.sessions.create(personaId, { mintedBy: MINTER });
    await h.reopen();
    expect((await h.store.sessions.authenticate(token)).session).toEqual(session);
    expect(await h.store.sessions.listByPersona(personaId)).toEqual([session]);
  });
});
