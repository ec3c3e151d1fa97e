import { AppError } from '../../common/errors';
import { leafNodePosition, peaksForLeafCount, mmrSize, type Peak } from './mmr-layout';
import { fetchNode, mmrRoot, parentDigest, type NodeFetcher } from './mmr-root';
import { DIGEST_BYTES, type Sha256 } from './sha256';
import { isU64 } from './u64';
import { bytesEqual, toHex } from './hex';

/**
 * Proof that leaf `leafIndex` is in the MMR of the first `leafCount` leaves
 * (docs/journal-format.md, "Inclusion proofs"). `digests` holds, in this order:
 *
 * 1. the siblings on the path from the leaf up to the peak that holds it, lowest first;
 * 2. the other peaks of the MMR, leftmost first, skipping that peak.
 *
 * Its length is therefore fixed by `(leafIndex, leafCount)`: the height of the leaf's
 * peak plus popcount(leafCount) − 1, at most 2·log2(leafCount).
 */
export interface InclusionProof {
  readonly leafIndex: number;
  readonly leafCount: number;
  readonly digests: readonly Uint8Array[];
}

interface ProofShape {
  readonly peaks: Peak[];
  readonly peakIndex: number;
  readonly peak: Peak;
}

function proofShape(leafIndex: number, leafCount: number): ProofShape {
  if (!isU64(leafIndex) || !isU64(leafCount) || leafIndex >= leafCount) {
    throw new AppError(
      'invalid_argument',
      `no leaf ${String(leafIndex)} in an MMR of ${String(leafCount)} leaves: ` +
        'the index must be a non-negative integer below the leaf count',
      { details: { leafIndex, leafCount } },
    );
  }
  const peaks = peaksForLeafCount(leafCount);
  const peakIndex = peaks.findIndex((p) => leafIndex < p.firstLeaf + 2 ** p.height);
  const peak = peaks[peakIndex];
  if (peak === undefined) throw new Error('unreachable: leafIndex < leafCount lies under a peak');
  return { peaks, peakIndex, peak };
}

/** One step up from a node of `height` at `position`; `isRight` says which child it is. */
function siblingAndParent(
  position: number,
  height: number,
  isRight: boolean,
): { sibling: number; parent: number } {
  const subtree = 2 ** (height + 1) - 1;
  return isRight
    ? { sibling: position - subtree, parent: position + 1 }
    : { sibling: position + subtree, parent: position + subtree + 1 };
}

/**
 * Node positions a store must fetch to prove leaf `leafIndex` against the root of
 * `leafCount` leaves, in proof order (siblings lowest first, then the other peaks).
 *
 * @throws AppError `invalid_argument` when `leafIndex >= leafCount`.
 */
export function inclusionProofPositions(leafIndex: number, leafCount: number): number[] {
  const { peaks, peakIndex, peak } = proofShape(leafIndex, leafCount);
  const out: number[] = [];
  const local = leafIndex - peak.firstLeaf;
  let position = leafNodePosition(leafIndex);
  for (let h = 0; h < peak.height; h++) {
    const step = siblingAndParent(position, h, Math.floor(local / 2 ** h) % 2 === 1);
    out.push(step.sibling);
    position = step.parent;
  }
  peaks.forEach((p, i) => {
    if (i !== peakIndex) out.push(p.position);
  });
  return out;
}

/**
 * Builds the inclusion proof of leaf `leafIndex` against the root of the first `leafCount`
 * leaves, reading nodes through `getNode`.
 *
 * @throws AppError `invalid_argument` when `leafIndex >= leafCount`; `data_loss` when the
 *   store lacks a node the proof needs.
 */
export function buildInclusionProof(
  leafIndex: number,
  leafCount: number,
  getNode: NodeFetcher,
): InclusionProof {
  const digests = inclusionProofPositions(leafIndex, leafCount).map((p) => fetchNode(getNode, p));
  return { leafIndex, leafCount, digests };
}

/**
 * The root that `proof` and the leaf digest `leaf` imply. Compare it with a trusted root,
 * or use {@link verifyInclusion}, which does.
 *
 * @throws AppError `invalid_argument` when the proof is malformed: index out of range, a
 *   digest not 32 bytes, or the wrong number of digests for `(leafIndex, leafCount)`.
 */
export function rootFromInclusionProof(
  hash: Sha256,
  proof: InclusionProof,
  leaf: Uint8Array,
): Uint8Array {
  const { leafIndex, leafCount, digests } = proof;
  const { peaks, peakIndex, peak } = proofShape(leafIndex, leafCount);
  const want = peak.height + peaks.length - 1;
  if (digests.length !== want) {
    throw new AppError(
      'invalid_argument',
      `inclusion proof for leaf ${String(leafIndex)} of ${String(leafCount)} must hold ${String(want)} ` +
        `digests, got ${String(digests.length)}: the proof is truncated or padded`,
      { details: { leafIndex, leafCount, want, got: digests.length } },
    );
  }
  const bad = [leaf, ...digests].findIndex((d) => d.length !== DIGEST_BYTES);
  if (bad !== -1) {
    throw new AppError(
      'invalid_argument',
      `inclusion proof for leaf ${String(leafIndex)}: ${bad === 0 ? 'the leaf digest' : `digest ${String(bad - 1)}`} is not 32 bytes`,
      { details: { leafIndex, leafCount } },
    );
  }
  const local = leafIndex - peak.firstLeaf;
  let position = leafNodePosition(leafIndex);
  let node = leaf;
  for (let h = 0; h < peak.height; h++) {
    const isRight = Math.floor(local / 2 ** h) % 2 === 1;
    const sibling = digests[h];
    if (sibling === undefined) throw new Error('unreachable: length checked above');
    const step = siblingAndParent(position, h, isRight);
    node = isRight
      ? parentDigest(hash, step.parent, sibling, node)
      : parentDigest(hash, step.parent, node, sibling);
    position = step.parent;
  }
  const others = digests.slice(peak.height);
  const allPeaks = [...others.slice(0, peakIndex), node, ...others.slice(peakIndex)];
  return mmrRoot(hash, mmrSize(leafCount), allPeaks);
}

/**
 * Checks that `leaf` is leaf `proof.leafIndex` of the MMR whose root over
 * `proof.leafCount` leaves is `trustedRoot`. O(log n) hashes; no replay.
 *
 * @throws AppError `invalid_argument` for a malformed proof (see
 *   {@link rootFromInclusionProof}); `data_loss` when the proof is well formed but leads
 *   to a different root (wrong leaf, wrong index, altered digest, or another tree's root).
 */
export function verifyInclusion(
  hash: Sha256,
  proof: InclusionProof,
  leaf: Uint8Array,
  trustedRoot: Uint8Array,
): void {
  const computed = rootFromInclusionProof(hash, proof, leaf);
  if (!bytesEqual(computed, trustedRoot)) {
    throw new AppError(
      'data_loss',
      `inclusion proof for leaf ${String(proof.leafIndex)} of ${String(proof.leafCount)} does not match ` +
        `the trusted root: computed ${toHex(computed)}, trusted ${toHex(trustedRoot)}; ` +
        'the event, the proof or the root is not the one the journal signed',
      {
        details: {
          leafIndex: proof.leafIndex,
          leafCount: proof.leafCount,
          computedRoot: toHex(computed),
          trustedRoot: toHex(trustedRoot),
        },
      },
    );
  }
}
