import { createPrivateKey, createPublicKey, sign, verify, type KeyObject } from 'node:crypto';

import { AppError } from '../../common/errors';
import { ED25519_KEY_BYTES, type Ed25519Signer, type Ed25519Verifier } from './ed25519';
import { toHex } from './hex';

// node:crypto takes ed25519 keys only as KeyObjects; raw keys are wrapped in the fixed
// DER headers of RFC 8410 (PKCS#8 for the seed, SubjectPublicKeyInfo for the public key).
const PKCS8_ED25519_PREFIX = Uint8Array.from([
  0x30, 0x2e, 0x02, 0x01, 0x00, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x04, 0x22, 0x04, 0x20,
]);
const SPKI_ED25519_PREFIX = Uint8Array.from([
  0x30, 0x2a, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x03, 0x21, 0x00,
]);

function withPrefix(prefix: Uint8Array, key: Uint8Array): Buffer {
  const der = Buffer.alloc(prefix.length + key.length);
  der.set(prefix, 0);
  der.set(key, prefix.length);
  return der;
}

function assertKeyLength(key: Uint8Array, what: string): void {
  if (key.length !== ED25519_KEY_BYTES) {
    throw new AppError(
      'invalid_argument',
      `${what} must be 32 raw bytes, got ${String(key.length)}; pass the raw key, not PEM or DER`,
      { details: { field: what, length: key.length } },
    );
  }
}

/**
 * A node:crypto KeyObject for a raw 32-byte ed25519 public key.
 *
 * @throws AppError `invalid_argument` when the key is not 32 bytes or not a curve point.
 */
export function nodeEd25519PublicKey(publicKey: Uint8Array): KeyObject {
  assertKeyLength(publicKey, 'ed25519 public key');
  try {
    return createPublicKey({
      key: withPrefix(SPKI_ED25519_PREFIX, publicKey),
      format: 'der',
      type: 'spki',
    });
  } catch (cause) {
    throw new AppError('invalid_argument', `ed25519 public key ${toHex(publicKey)} is not valid`, {
      cause,
    });
  }
}

/**
 * A node:crypto signer from a raw 32-byte ed25519 seed (the RFC 8032 private key).
 *
 * @throws AppError `invalid_argument` when the seed is not 32 bytes.
 */
export function createNodeEd25519Signer(seed: Uint8Array): Ed25519Signer {
  assertKeyLength(seed, 'ed25519 seed');
  const privateKey = createPrivateKey({
    key: withPrefix(PKCS8_ED25519_PREFIX, seed),
    format: 'der',
    type: 'pkcs8',
  });
  const jwk = createPublicKey(privateKey).export({ format: 'jwk' });
  if (typeof jwk.x !== 'string') throw new Error('unreachable: ed25519 JWK has x');
  const publicKey = new Uint8Array(Buffer.from(jwk.x, 'base64url'));
  return {
    publicKey,
    sign: (message) => new Uint8Array(sign(null, message, privateKey)),
  };
}

/**
 * A node:crypto verifier. Public keys are turned into KeyObjects once and cached by their
 * bytes (a journal uses one or two keys), since building a KeyObject costs about as much
 * as a verification.
 */
export function createNodeEd25519Verifier(): Ed25519Verifier {
  const keys = new Map<string, KeyObject | null>();
  return {
    verify(publicKey, message, signature) {
      const id = toHex(publicKey);
      let key = keys.get(id);
      if (key === undefined) {
        try {
          key = nodeEd25519PublicKey(publicKey);
        } catch {
          key = null;
        }
        if (keys.size < 1024) keys.set(id, key);
      }
      if (key === null) return false;
      try {
        return verify(null, message, key, signature);
      } catch {
        return false;
      }
    },
  };
}
