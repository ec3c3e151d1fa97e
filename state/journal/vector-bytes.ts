import type { Ed25519Signer } from './ed25519';
import type { Sha256 } from './sha256';
import { encodeU64 } from './u64';

/*
 * The deterministic inputs of the test vectors (docs/journal-format.md, "Test vectors"):
 * the crypto they are built with, the two test-only key seeds and the filler payloads.
 */

/** Crypto the vectors are built with; node:crypto and @noble must give the same bytes. */
export interface VectorCrypto {
  readonly hash: Sha256;
  readonly createSigner: (seed: Uint8Array) => Ed25519Signer;
}

const utf8 = new TextEncoder();

/**
 * Seeds of the two vector keys: SHA-256 of a fixed label. TEST ONLY: anyone can derive
 * them, so nothing signed with them proves anything.
 */
export function vectorKeySeed(hash: Sha256, index: 1 | 2): Uint8Array {
  return hash(utf8.encode(`polychrome/test-only/journal-key/${String(index)}`));
}

/** Deterministic filler: SHA-256( label ‖ u64 block ) blocks, cut to `length` bytes. */
export function fillerBytes(hash: Sha256, label: string, length: number): Uint8Array {
  const out = new Uint8Array(length);
  const labelBytes = utf8.encode(label);
  for (let block = 0; block * 32 < length; block++) {
    const input = new Uint8Array(labelBytes.length + 8);
    input.set(labelBytes, 0);
    input.set(encodeU64(block), labelBytes.length);
    out.set(hash(input).subarray(0, Math.min(32, length - block * 32)), block * 32);
  }
  return out;
}

// Batches of a plausible conversation; each is followed by a signed_root. Payload sizes
// hit SHA-256 padding edges (55/56/64 bytes of preimage and payload) and the empty and
