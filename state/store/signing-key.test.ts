import { generateKeyPairSync } from 'node:crypto';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';

import { afterEach, beforeEach, describe, expect, it } from '@jest/globals';

import { AppError } from '../../common/errors';
import { toHex } from '../journal/hex';
import { createNodeEd25519Signer, createNodeEd25519Verifier } from '../journal/node-ed25519';
import { nodeSha256 } from '../journal/node-sha256';
import { keyIdOf } from '../journal/signed-root';
import { loadSigningKey, parseSigningKey } from './signing-key';
import { tempDir } from './testdata/fixtures';

let dir: { path: string; remove: () => Promise<void> };
beforeEach(async () => {
  dir = await tempDir();
});
afterEach(async () => {
  await dir.remove();
});

async function failure(promise: Promise<unknown>): Promise<AppError> {
  try {
    await promise;
  } catch (error) {
    if (error instanceof AppError) return error;
    throw error;
  }
  throw new Error('expected a rejection');
}

const seed = Uint8Array.from({ length: 32 }, (_, i) => i + 1);

describe('loadSigningKey', () => {
  it('loads a raw 32-byte seed and computes the key id as docs/design.md says', async () => {
    const path = join(dir.path, 'seed');
    await writeFile(path, seed);
    const key = await loadSigningKey(path);
    const expected = createNodeEd25519Signer(seed);
    expect(toHex(key.signer.publicKey)).toBe(toHex(expected.publicKey));
    expect(key.keyId).toBe(toHex(nodeSha256(expected.publicKey).subarray(0, 16)));
    expect(key.keyId).toHaveLength(32);
    const message = new TextEncoder().encode('m');
    expect(
      createNodeEd25519Verifier().verify(expected.publicKey, message, key.signer.sign(message)),
    ).toBe(true);
  });

  it('loads a PKCS#8 PEM as openssl writes it, and signs with the same key', async () => {
    const { privateKey, publicKey } = generateKeyPairSync('ed25519');
    const path = join(dir.path, 'key.pem');
    await writeFile(path, privateKey.export({ format: 'pem', type: 'pkcs8' }));
    const key = await loadSigningKey(path);
    const jwk = publicKey.export({ format: 'jwk' });
    const raw = new Uint8Array(Buffer.from(String(jwk.x), 'base64url'));
    expect(toHex(key.signer.publicKey)).toBe(toHex(raw));
    expect(key.keyId).toBe(keyIdOf(nodeSha256, raw));
  });

  const bad: [string, Uint8Array | string, string][] = [
    [
      'a seed with a trailing newline',
      Buffer.concat([seed, Buffer.from('\n')]),
      'holds 33 bytes that are neither',
    ],
    ['a hex seed', Buffer.from(seed).toString('hex'), 'holds 64 bytes that are neither'],
    ['an empty file', '', 'holds 0 bytes'],
    [
      'an RSA key',
      generateKeyPairSync('rsa', { modulusLength: 1024 })
        .privateKey.export({ format: 'pem', type: 'pkcs8' })
        .toString(),
      'holds a rsa key, not ed25519',
    ],
    [
      'a broken PEM',
      '-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n',
      'not a readable unencrypted PKCS#8',
    ],
  ];
  it.each(bad)(
    'rejects %s with a clear message that names the file',
    async (_name, content, text) => {
      const path = join(dir.path, 'key');
      await writeFile(path, content);
      const error = await failure(loadSigningKey(path));
      expect(error.code).toBe('invalid_argument');
      expect(error.message).toContain(text);
      expect(error.message).toContain(path);
      expect(error.message).not.toMatch(/[0-9a-f]{40}/);
    },
  );

  it('reports a missing file as not_found', async () => {
    const error = await failure(loadSigningKey(join(dir.path, 'absent')));
    expect(error.code).toBe('not_found');
    expect(error.message).toContain('mount the signing-key Secret');
  });

  it('reports a path that is not a readable file', async () => {
    const error = await failure(loadSigningKey(dir.path));
    expect(error.code).toBe('invalid_argument');
    expect(error.message).toContain('cannot be read (EISDIR)');
  });

  it('parses bytes without a file', () => {
    expect(parseSigningKey(seed, 'inline').keyId).toBe(
      keyIdOf(nodeSha256, createNodeEd25519Signer(seed).publicKey),
    );
  });
});
