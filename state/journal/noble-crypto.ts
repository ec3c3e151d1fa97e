import { AppError } from '../../common/errors';
import { ED25519_KEY_BYTES, type Ed25519Signer, type Ed25519Verifier } from './ed25519';
import type { Sha256 } from './sha256';

/** Journal crypto in pure JavaScript, for places without node:crypto (browser verifier). */
export interface NobleJournalCrypto {
  /** SHA-256 from @noble/hashes. */
  readonly sha256: Sha256;
  /** Ed25519 verification from @noble/curves, RFC 8032 strict (no ZIP-215 leniency). */
  readonly verifier: Ed25519Verifier;
  /**
   * A signer from a raw 32-byte seed; for tests and tools, the server signs with node:crypto.
   *
   * @throws AppError `invalid_argument` when the seed is not 32 bytes.
   */
  createSigner(seed: Uint8Array): Ed25519Signer;
}

/**
 * Loads the @noble implementations. Asynchronous because @noble/* 2.x ship as ES modules
 * only and this project compiles to CommonJS: a dynamic `import()` is the one form that
 * loads them there (bundlers for the browser resolve it statically).
 *
 * @example
 * async function check(pub: Uint8Array, msg: Uint8Array, sig: Uint8Array): Promise<boolean> {
 *   const noble = await loadNobleCrypto();
 *   return noble.verifier.verify(pub, msg, sig);
 * }
 */
export async function loadNobleCrypto(): Promise<NobleJournalCrypto> {
  const [{ ed25519 }, { sha256 }] = await Promise.all([
    import('@noble/curves/ed25519.js'),
    import('@noble/hashes/sha2.js'),
  ]);
  // Strict RFC 8032 decoding, the rule node:crypto (OpenSSL) applies, so a signature is
  // valid in the browser exactly when it is valid on the server.
  const strict = { zip215: false } as const;
  return {
    sha256: (data) => sha256(data),
    verifier: {
      verify(publicKey, message, signature) {
        try {
          return ed25519.verify(signature, message, publicKey, strict);
        } catch {
          return false;
        }
      },
    },
    createSigner(seed) {
      if (seed.length !== ED25519_KEY_BYTES) {
        throw new AppError(
          'invalid_argument',
          `ed25519 seed must be 32 raw bytes, got ${String(seed.length)}`,
          { details: { length: seed.length } },
        );
      }
      const secret = seed.slice();
      return {
        publicKey: ed25519.getPublicKey(secret),
        sign: (message) => ed25519.sign(message, secret),
      };
    },
  };
}
