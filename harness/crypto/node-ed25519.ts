import { createPrivateKey, createPublicKey, sign, verify, type KeyObject } from 'node:crypto';
import type { ApprovalSigner, SignatureVerifier } from '../turn/approval-token';

/** ed25519 through node:crypto, for the pure approval checks in `harness/turn`. */

// DER prefixes that wrap a raw 32-byte key as SPKI / PKCS#8 (RFC 8410).
const SPKI_PREFIX = Buffer.from('302a300506032b6570032100', 'hex');
const PKCS8_PREFIX = Buffer.from('302e020100300506032b657004220420', 'hex');

function publicKeyObject(raw: Uint8Array): KeyObject {
  return createPublicKey({
    key: Buffer.concat([SPKI_PREFIX, raw]),
    format: 'der',
    type: 'spki',
  });
}

/** Verifies with a raw 32-byte public key; false for a key or signature of the wrong size. */
export const nodeEd25519Verifier: SignatureVerifier = {
  verify(message, signature, publicKey) {
    if (publicKey.length !== 32 || signature.length !== 64) return false;
    return verify(null, message, publicKeyObject(publicKey), signature);
  },
};

/**
 * A signer from a raw 32-byte ed25519 seed (tests and the local dev control plane; a
 * cluster keeps its key in a Secret).
 *
 * @throws Error from node:crypto when the seed is not 32 bytes.
 */
export function nodeEd25519Signer(seed: Uint8Array): ApprovalSigner {
  const privateKey = createPrivateKey({
    key: Buffer.concat([PKCS8_PREFIX, seed]),
    format: 'der',
    type: 'pkcs8',
  });
  const spki = createPublicKey(privateKey).export({ format: 'der', type: 'spki' });
  return {
    publicKey: new Uint8Array(spki.subarray(SPKI_PREFIX.length)),
    sign: (message) => new Uint8Array(sign(null, message, privateKey)),
  };
}
