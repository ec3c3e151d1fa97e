import { afterEach, beforeEach, describe, expect, it } from '@jest/globals';

import { MAX_CREDENTIAL_SECRET_BYTES } from './credential-records';
import { credentialAad, openSealed, sealSecret } from './credential-seal';
import { openHarness, rejection, testKey, type Harness } from './testdata/fixtures';

const SECRET = 'sk-test-0123456789abcdefghijklmnopqrstuvwxyz';

let h: Harness;
let personaId: string;

beforeEach(async () => {
  h = await openHarness();
  personaId = (await h.store.personas.create({ displayName: 'Ada' })).id;
});

afterEach(async () => {
  await h.close();
});

/** Rewrites the stored JSON of `key` through `change`. */
async function editRecord(
  key: string,
  change: (record: Record<string, unknown>) => void,
): Promise<void> {
  const entry = (await h.rawRecords()).find(([k]) => k === key);
  if (entry === undefined) throw new Error(`no raw record ${key}`);
  const parsed: unknown = JSON.parse(entry[1]);
  if (typeof parsed !== 'object' || parsed === null) throw new Error(`${key} is not an object`);
  const record: Record<string, unknown> = { ...parsed };
  change(record);
  await h.putRaw(key, JSON.stringify(record));
}

describe('CredentialRecords', () => {
  it('stores metadata in the clear and reveals the secret only on request', async () => {
    const created = await h.store.credentials.create({
      personaId,
      kind: 'api-key',
      label: 'GitHub token for CI',
      secret: SECRET,
    });
    expect(created).toEqual({
      id: 'id-0002',
      personaId,
      kind: 'api-key',
      label: 'GitHub token for CI',
      createdAtMs: h.clock.nowMs(),
      keyId: testKey(0).keyId,
    });
    expect(await h.store.credentials.get(created.id)).toEqual(created);
    expect(await h.store.credentials.listByPersona(personaId)).toEqual([created]);
    expect(JSON.stringify(await h.rawRecords())).not.toContain(SECRET);

    const revealed = await h.store.credentials.reveal(created.id);
    expect(revealed.credential).toEqual(created);
    expect(Buffer.from(revealed.secret).toString('utf8')).toBe(SECRET);
  });

  it('round-trips binary secrets, and reveals after a reopen', async () => {
    const bytes = Uint8Array.from({ length: 300 }, (_, i) => (i * 7) & 0xff);
    const c = await h.store.credentials.create({
      personaId,
      kind: 'ssh-key',
      label: 'deploy',
      secret: bytes,
    });
    await h.reopen();
    expect((await h.store.credentials.reveal(c.id)).secret).toEqual(bytes);
  });

  it('reports one changed ciphertext byte as data loss', async () => {
    const c = await h.store.credentials.create({
      personaId,
      kind: 'api-key',
      label: 'k',
      secret: SECRET,
    });
    await editRecord(`credential:${c.id}`, (record) => {
      const sealed = Buffer.from(String(record.sealed), 'base64url');
      sealed[20] = (sealed[20] ?? 0) ^ 0x01; // inside the ciphertext (after version and nonce)
      record.sealed = sealed.toString('base64url');
    });
    const error = await rejection(h.store.credentials.reveal(c.id));
    expect(error.code).toBe('data_loss');
    expect(error.message).toBe(
      `credential ${c.id} of persona ${personaId}: the sealed value fails authentication: it ` +
        'was changed, or sealed under another records key; restore it from a backup or store ' +
        'the credential again',
    );
    // Metadata stays readable; only the secret is lost.
    expect((await h.store.credentials.get(c.id)).label).toBe('k');
  });

  it('reports a value moved to another persona as data loss', async () => {
    const other = await h.store.personas.create({ displayName: 'Eve' });
    const c = await h.store.credentials.create({
      personaId,
      kind: 'api-key',
      label: 'k',
      secret: SECRET,
    });
    await editRecord(`credential:${c.id}`, (record) => {
      record.personaId = other.id;
    });
    expect((await rejection(h.store.credentials.reveal(c.id))).code).toBe('data_loss');
  });

  it('reports a value sealed under another key as data loss', async () => {
    const c = await h.store.credentials.create({
      personaId,
      kind: 'api-key',
      label: 'k',
      secret: SECRET,
    });
    await h.reopen(testKey(1));
    const error = await rejection(h.store.credentials.reveal(c.id));
    expect(error.code).toBe('data_loss');
    expect(error.message).toBe(
      `credential ${c.id} of persona ${personaId} was sealed under records key ` +
        `${testKey(0).keyId}, but this state plane holds key ${testKey(1).keyId}; mount the ` +
        'key it was sealed with, or store the credential again',
    );
    // Even with the key id forged to match, the other key cannot open it.
    await editRecord(`credential:${c.id}`, (record) => {
      record.keyId = testKey(1).keyId;
    });
    const forged = await rejection(h.store.credentials.reveal(c.id));
    expect(forged.code).toBe('data_loss');
    expect(forged.message).toContain('fails authentication');
  });

  it.each<[string, object, string]>([
    [
      'kind',
      { kind: 'API Key' },
      'credential kind "API Key" is not valid: use a lower-case slug of up to 63 characters ' +
        'such as "api-key" (a-z, 0-9 and "-", starting with a letter)',
    ],
    ['label', { label: '' }, 'credential label "" is empty; give 1 to 128 characters'],
    ['empty secret', { secret: '' }, 'credential secret is 0 bytes; give 1 to 65536 bytes'],
    [
      'oversized secret',
      { secret: new Uint8Array(MAX_CREDENTIAL_SECRET_BYTES + 1) },
      'credential secret is 65537 bytes; give 1 to 65536 bytes',
    ],
    ['secret of the wrong type', { secret: 42 }, 'credential secret must be bytes or text'],
    [
      'persona id',
      { personaId: '' },
      'persona id "" is not valid: use 1 to 64 characters of A-Z, a-z, 0-9, "_" and "-"',
    ],
  ])('rejects a bad %s and writes nothing', async (_case, change, message) => {
    const before = await h.rawRecords();
    const input = Object.assign({ personaId, kind: 'api-key', label: 'k', secret: SECRET }, change);
    const error = await rejection(h.store.credentials.create(input));
    expect(error.code).toBe('invalid_argument');
    expect(error.message).toBe(message);
    expect(await h.rawRecords()).toEqual(before);
  });

  it('deletes a credential and its index entry', async () => {
    const before = await h.rawRecords();
    const c = await h.store.credentials.create({
      personaId,
      kind: 'api-key',
      label: 'k',
      secret: SECRET,
    });
    await h.store.credentials.delete(c.id);
    expect(await h.rawRecords()).toEqual(before);
    expect((await rejection(h.store.credentials.reveal(c.id))).code).toBe('not_found');
  });
});

describe('credential-seal', () => {
  const key = testKey(0).sealKey;
  const aad = credentialAad('c1', 'p1');
  const plaintext = new Uint8Array(Buffer.from('hello'));

  it('uses a fresh nonce per seal and opens what it sealed', () => {
    const a = sealSecret(key, plaintext, aad);
    const b = sealSecret(key, plaintext, aad);
    expect(a).not.toBe(b);
    // version 1 + 12-byte nonce + 5 bytes of ciphertext + 16-byte tag
    expect(Buffer.from(a, 'base64url')).toHaveLength(1 + 12 + 5 + 16);
    expect(openSealed(key, a, aad, 'c1')).toEqual(plaintext);
  });

  it.each([
    ['a flipped version byte', 0],
    ['a flipped nonce byte', 5],
    ['a flipped ciphertext byte', 14],
    ['a flipped tag byte', 30],
  ])('refuses %s', (_case, index) => {
    const sealed = Buffer.from(sealSecret(key, plaintext, aad), 'base64url');
    sealed[index] = (sealed[index] ?? 0) ^ 0x80;
    expect(() => openSealed(key, sealed.toString('base64url'), aad, 'c1')).toThrow(
      expect.objectContaining({ code: 'data_loss' }),
    );
  });

  it('refuses other associated data and truncated values', () => {
    const sealed = sealSecret(key, plaintext, aad);
    expect(() => openSealed(key, sealed, credentialAad('c1', 'p2'), 'c1')).toThrow(
      'fails authentication',
    );
    expect(() => openSealed(key, sealed.slice(0, 20), aad, 'c1')).toThrow(
      'c1: the sealed value is malformed or of an unknown format; restore it from a backup or ' +
        'store the credential again',
    );
  });
});
