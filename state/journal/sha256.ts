/**
 * A SHA-256 function: the 32-byte digest of `data`.
 *
 * The journal core never picks an implementation itself, so the same code runs on the
 * server (node:crypto, see `node-sha256.ts`) and in a browser verifier (@noble/hashes, see
 * `noble-crypto.ts`). Callers reuse scratch buffers: an implementation must not keep
 * `data` after it returns, and must return a fresh array the caller may keep.
 */
export type Sha256 = (data: Uint8Array) => Uint8Array;

/** Length of a SHA-256 digest, and so of every leaf, node, peak and root digest. */
export const DIGEST_BYTES = 32;
