import { AppError } from '../../common/errors';
import { peaksForLeafCount, mmrSize } from './mmr-layout';
import { DIGEST_BYTES, type Sha256 } from './sha256';
import { writeU64 } from './u64';

/**
 * Digest of the parent at node position `position`:
 * SHA-256( u64 position ‖ left ‖ right ). Binding the position makes every inner node's
 * preimage unique to its place in the tree.
 */
export function parentDigest(
  hash: Sha256,
  position: number,
  left: Uint8Array,
  right: Uint8Array,
): Uint8Array {
  const buf = new Uint8Array(8 + 2 * DIGEST_BYTES);
  writeU64(buf, 0, position);
  buf.set(left, 8);
  buf.set(right, 8 + DIGEST_BYTES);
  return hash(buf);
}

/**
 * Root of an MMR with `size` nodes whose peak digests, leftmost first, are `peaks`:
 * SHA-256( u64 size ‖ peak₀ ‖ peak₁ ‖ ... ). With no peaks this is SHA-256( u64 0 ), the
 * empty root. The caller supplies peaks that belong to `size`; nothing here can check it.
 */
export function mmrRoot(hash: Sha256, size: number, peaks: readonly Uint8Array[]): Uint8Array {
  const buf = new Uint8Array(8 + DIGEST_BYTES * peaks.length);
  writeU64(buf, 0, size);
  peaks.forEach((peak, i) => buf.set(peak, 8 + DIGEST_BYTES * i));
  return hash(buf);
}

/** Root of the empty MMR: SHA-256 of eight zero bytes. */
export function emptyMmrRoot(hash: Sha256): Uint8Array {
  return mmrRoot(hash, 0, []);
}

/**
 * Fetches the stored digest of the node at `position`. Stores implement it over whatever
 * they persisted from {@link CompactMmr.append}'s visitor; it returns `undefined` for a
 * node it does not have.
 */
export type NodeFetcher = (position: number) => Uint8Array | undefined;

/**
 * Root of the first `leafCount` leaves of a stored MMR, read from its peak nodes. Works for
 * any earlier leaf count too, because a smaller MMR's nodes are a prefix of a larger one's.
 *
 * @throws AppError `data_loss` when `getNode` lacks a peak or returns a digest that is not
 *   32 bytes; `invalid_argument` when `leafCount` is not a non-negative safe integer.
 */
export function rootAtLeafCount(hash: Sha256, leafCount: number, getNode: NodeFetcher): Uint8Array {
  const peaks = peaksForLeafCount(leafCount).map((peak) => fetchNode(getNode, peak.position));
  return mmrRoot(hash, mmrSize(leafCount), peaks);
}

/**
 * `getNode(position)`, checked to be a 32-byte digest.
 *
 * @throws AppError `data_loss` naming the missing or malformed node.
 */
export function fetchNode(getNode: NodeFetcher, position: number): Uint8Array {
  const digest = getNode(position);
  if (digest === undefined || digest.length !== DIGEST_BYTES) {
    throw new AppError(
      'data_loss',
      `MMR node ${String(position)} is ${digest === undefined ? 'missing' : `${String(digest.length)} bytes, not 32`}; ` +
        'the node store is incomplete: rebuild it by replaying the journal',
      { details: { nodePosition: position } },
    );
  }
  return digest;
}
