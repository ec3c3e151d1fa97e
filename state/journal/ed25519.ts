/**
 * The signing side, injected so the journal core holds no key material and no key store:
 * the server passes a node:crypto signer built from the Secret, tests a fixed test seed.
 */
export interface Ed25519Signer {
  /** Raw 32-byte ed25519 public key. */
  readonly publicKey: Uint8Array;
  /** RFC 8032 ed25519 signature (64 bytes) over `message`. */
  sign(message: Uint8Array): Uint8Array;
}

/** The verifying side: node:crypto on the server, @noble/curves where node:crypto is absent. */
export interface Ed25519Verifier {
  /**
   * True when `signature` is a valid ed25519 signature by `publicKey` (raw 32 bytes) over
   * `message`. Returns false, never throws, for malformed keys or signatures.
   */
  verify(publicKey: Uint8Array, message: Uint8Array, signature: Uint8Array): boolean;
}

/** Length of a raw ed25519 public key and of a seed (private key). */
export const ED25519_KEY_BYTES = 32;
/** Length of an ed25519 signature. */
export const ED25519_SIGNATURE_BYTES = 64;
