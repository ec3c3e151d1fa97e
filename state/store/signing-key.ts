import { createPrivateKey } from 'node:crypto';
import { readFile } from 'node:fs/promises';

import { AppError, isAppError } from '../../common/errors';
import { ED25519_KEY_BYTES, type Ed25519Signer } from '../journal/ed25519';
import { createNodeEd25519Signer } from '../journal/node-ed25519';
import { nodeSha256 } from '../journal/node-sha256';
import { keyIdOf } from '../journal/signed-root';

/** A journal signing key ready for the store. */
export interface SigningKey {
  readonly signer: Ed25519Signer;
  /** First 16 bytes of SHA-256 of the raw public key, lowercase hex (docs/design.md). */
  readonly keyId: string;
}

const PEM_HEADER = '-----BEGIN PRIVATE KEY-----';

function hasErrorCode(value: unknown): value is { code: string } {
  return (
    typeof value === 'object' && value !== null && 'code' in value && typeof value.code === 'string'
  );
}

/**
 * Builds a signing key from the bytes of a key file: either exactly 32 bytes, the raw
 * ed25519 seed (RFC 8032 private key), or a PKCS#8 PEM (`-----BEGIN PRIVATE KEY-----`, as
 * `openssl genpkey -algorithm ed25519` writes it). `source` names the file in errors;
 * key bytes never appear in a message.
 *
 * @throws AppError `invalid_argument` for any other content, or a PEM key that is not
 *   ed25519.
 */
export function parseSigningKey(bytes: Uint8Array, source: string): SigningKey {
  let seed: Uint8Array;
  if (bytes.length === ED25519_KEY_BYTES) {
    seed = bytes;
  } else {
    const text = Buffer.from(bytes).toString('latin1');
    if (!text.trimStart().startsWith(PEM_HEADER)) {
      throw new AppError(
        'invalid_argument',
        `signing key file ${source} holds ${String(bytes.length)} bytes that are neither a raw ` +
          `32-byte ed25519 seed nor a PKCS#8 PEM ("${PEM_HEADER}"); write the seed with no ` +
          'trailing newline, or the PEM from `openssl genpkey -algorithm ed25519`',
        { details: { source, length: bytes.length } },
      );
    }
    seed = seedFromPem(text, source);
  }
  const signer = createNodeEd25519Signer(seed.slice());
  return { signer, keyId: keyIdOf(nodeSha256, signer.publicKey) };
}

function seedFromPem(pem: string, source: string): Uint8Array {
  const invalid = (why: string, cause?: unknown): AppError =>
    new AppError(
      'invalid_argument',
      `signing key file ${source} is a PEM but ${why}; generate one with ` +
        '`openssl genpkey -algorithm ed25519`',
      { details: { source }, cause },
    );
  let key;
  try {
    key = createPrivateKey({ key: pem, format: 'pem' });
  } catch (cause) {
    throw invalid('not a readable unencrypted PKCS#8 private key', cause);
  }
  if (key.asymmetricKeyType !== 'ed25519') {
    throw invalid(`holds a ${key.asymmetricKeyType ?? 'unknown'} key, not ed25519`);
  }
  const jwk = key.export({ format: 'jwk' });
  if (typeof jwk.d !== 'string') throw invalid('exports no private scalar');
  return new Uint8Array(Buffer.from(jwk.d, 'base64url'));
}

/**
 * Loads the journal signing key from a file: a mounted Kubernetes Secret in a cluster, a
 * local file in development. See {@link parseSigningKey} for the accepted contents.
 *
 * @throws AppError `not_found` when the file does not exist; `permission_denied` when it
 *   cannot be read; `invalid_argument` when its content is not an ed25519 key.
 */
export async function loadSigningKey(path: string): Promise<SigningKey> {
  let bytes: Uint8Array;
  try {
    bytes = await readFile(path);
  } catch (cause) {
    if (isAppError(cause)) throw cause;
    const code = hasErrorCode(cause) ? cause.code : '';
    if (code === 'ENOENT') {
      throw new AppError(
        'not_found',
        `signing key file ${path} does not exist; mount the signing-key Secret there or point ` +
          'the state plane at the right file',
        { details: { source: path }, cause },
      );
    }
    throw new AppError(
      code === 'EACCES' || code === 'EPERM' ? 'permission_denied' : 'invalid_argument',
      `signing key file ${path} cannot be read (${code || 'unknown error'}); check that it is ` +
        'a readable file',
      { details: { source: path }, cause },
    );
  }
  return parseSigningKey(bytes, path);
}
