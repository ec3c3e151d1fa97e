import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';

import { deriveRecordsKey, loadRecordsKey } from './records-key';
import { rejection, testKey, testKeyBytes } from './testdata/fixtures';

let dir: string;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'polychrome-records-key-'));
});

afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe('deriveRecordsKey', () => {
  it('derives distinct subkeys and a pinned key id', () => {
    const key = testKey(0);
    // Pinned: changing the derivation would orphan every sealed credential.
    expect(key.keyId).toBe('33bcea766743900e');
    expect(key.sealKey).toHaveLength(32);
    expect(Buffer.from(key.sealKey).equals(Buffer.from(key.codeKey))).toBe(false);
    expect(Buffer.from(key.sealKey).equals(Buffer.from(testKeyBytes(0)))).toBe(false);
    expect(testKey(1).keyId).not.toBe(key.keyId);
  });

  it('refuses a key that is not 32 bytes', () => {
    expect(() => deriveRecordsKey(new Uint8Array(16))).toThrow(
      'the records key is 16 bytes; it must be exactly 32 random bytes (e.g. `openssl rand 32`)',
    );
  });
});

describe('loadRecordsKey', () => {
  const bytes = Buffer.from(testKeyBytes(0));
  it.each([
    ['raw bytes', bytes],
    ['hex', Buffer.from(bytes.toString('hex'))],
    ['hex with a newline', Buffer.from(`${bytes.toString('hex')}\n`)],
    ['base64', Buffer.from(bytes.toString('base64'))],
    ['base64url with a CRLF', Buffer.from(`${bytes.toString('base64url')}\r\n`)],
  ])('reads a key file of %s', async (name, content) => {
    const path = join(dir, name.replace(/ /g, '-'));
    await writeFile(path, content);
    expect((await loadRecordsKey(path)).keyId).toBe(testKey(0).keyId);
  });

  it('refuses a file that holds no 32-byte key, without quoting it', async () => {
    const path = join(dir, 'short');
    await writeFile(path, 'hunter2-is-not-a-key\n');
    const error = await rejection(loadRecordsKey(path));
    expect(error.code).toBe('invalid_argument');
    expect(error.message).toBe(
      `the records key file ${path} holds 21 bytes that are not a 32-byte key: write 32 raw ` +
        'random bytes, or them as 64 hex digits or base64',
    );
    expect(JSON.stringify(error)).not.toContain('hunter2');
  });

  it('names a missing file', async () => {
    const path = join(dir, 'missing');
    const error = await rejection(loadRecordsKey(path));
    expect(error.code).toBe('failed_precondition');
    expect(error.message).toBe(
      `cannot read the records key file ${path}; mount the records key Secret there`,
    );
  });
});
