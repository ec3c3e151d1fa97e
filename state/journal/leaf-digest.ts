import { assertU64, writeU64 } from './u64';
import type { Sha256 } from './sha256';

const utf8 = new TextEncoder();

/**
 * Hashes events into leaf digests (docs/journal-format.md, "Leaf digest"):
 *
 *     SHA-256( u64 position ‖ u64 len(kind) ‖ kind UTF-8 ‖ u64 len(payload) ‖ payload )
 *
 * The preimage is built in one reused scratch buffer and hashed with one call, because
 * per-call overhead, not bytes, dominates for the small events a journal mostly holds.
 * The position prefix is what keeps a leaf preimage apart from a parent preimage
 * (`u64 node position ‖ 64 bytes`): a 72-byte leaf would need a kind length equal to the
 * first 8 bytes of a digest, far above the input length.
 *
 * Not safe to share between concurrent callers (one scratch buffer); create one per loop.
 */
export class LeafHasher {
  private scratch = new Uint8Array(1024);
  private readonly kindBytes = new Map<string, Uint8Array>();

  constructor(private readonly hash: Sha256) {}

  /**
   * The leaf digest of the event `(position, kind, payload)`.
   *
   * @throws AppError `invalid_argument` when `position` is not a non-negative safe integer.
   */
  digest(position: number, kind: string, payload: Uint8Array): Uint8Array {
    assertU64(position, 'event position');
    const kindBytes = this.encodeKind(kind);
    const length = 24 + kindBytes.length + payload.length;
    if (this.scratch.length < length) {
      this.scratch = new Uint8Array(Math.max(length, this.scratch.length * 2));
    }
    const s = this.scratch;
    writeU64(s, 0, position);
    writeU64(s, 8, kindBytes.length);
    s.set(kindBytes, 16);
    writeU64(s, 16 + kindBytes.length, payload.length);
    s.set(payload, 24 + kindBytes.length);
    return this.hash(s.subarray(0, length));
  }

  private encodeKind(kind: string): Uint8Array {
    let bytes = this.kindBytes.get(kind);
    if (bytes === undefined) {
      bytes = utf8.encode(kind);
      // Kinds form a small closed set; the cap only guards against a hostile input stream.
      if (this.kindBytes.size < 256) this.kindBytes.set(kind, bytes);
    }
    return bytes;
  }
}

/**
 * The leaf digest of one event; see {@link LeafHasher} for the bytes. Use a `LeafHasher`
 * in loops: it reuses its buffer.
 *
 * @example
 * import { nodeSha256 } from './node-sha256';
 * const digest: Uint8Array = leafDigest(nodeSha256, 0, 'message_received', new Uint8Array());
 *
 * @throws AppError `invalid_argument` when `position` is not a non-negative safe integer.
 */
export function leafDigest(
  hash: Sha256,
  position: number,
  kind: string,
  payload: Uint8Array,
): Uint8Array {
  return new LeafHasher(hash).digest(position, kind, payload);
}
