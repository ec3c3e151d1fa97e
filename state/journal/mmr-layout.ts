import { AppError } from '../../common/errors';
import { assertU64 } from './u64';

/*
 * Node numbering of the Merkle Mountain Range (docs/journal-format.md, "Node numbering").
 * Nodes are numbered 0, 1, 2, ... in post-order: a parent comes right after its right
 * child, so the nodes of a smaller MMR are a prefix of every larger one and a node, once
 * written, never moves. Values stay below 2^53 and are plain numbers; bit operators are
 * avoided because they truncate to 32 bits.
 */

const TWO_32 = 2 ** 32;
/** Heights 0..52 cover every leaf count below 2^53. */
const MAX_HEIGHT = 52;

/** Number of set bits in a non-negative safe integer. */
export function popcount(value: number): number {
  const hi = Math.floor(value / TWO_32);
  return popcount32(hi) + popcount32(value - hi * TWO_32);
}

function popcount32(value: number): number {
  let v = value >>> 0;
  v = v - ((v >>> 1) & 0x55555555);
  v = (v & 0x33333333) + ((v >>> 2) & 0x33333333);
  return (Math.imul((v + (v >>> 4)) & 0x0f0f0f0f, 0x01010101) >>> 24) & 0xff;
}

/**
 * Node position of leaf `leafIndex`: 2i − popcount(i).
 *
 * @throws AppError `invalid_argument` when `leafIndex` is not a non-negative safe integer.
 */
export function leafNodePosition(leafIndex: number): number {
  assertU64(leafIndex, 'leaf index');
  return 2 * leafIndex - popcount(leafIndex);
}

/**
 * Number of nodes in an MMR of `leafCount` leaves: 2n − popcount(n). It is also the
 * position the next leaf will take.
 *
 * @throws AppError `invalid_argument` when `leafCount` is not a non-negative safe integer.
 */
export function mmrSize(leafCount: number): number {
  assertU64(leafCount, 'leaf count');
  return 2 * leafCount - popcount(leafCount);
}

/**
 * Leaf count of an MMR with `size` nodes, or `undefined` when no MMR has that many nodes
 * (for example 2: a second leaf always brings its parent).
 */
export function leafCountForSize(size: number): number | undefined {
  if (!Number.isSafeInteger(size) || size < 0) return undefined;
  let rest = size;
  let leaves = 0;
  for (let h = MAX_HEIGHT; h >= 0; h--) {
    const treeNodes = 2 ** (h + 1) - 1;
    if (rest >= treeNodes) {
      rest -= treeNodes;
      leaves += 2 ** h;
    }
  }
  return rest === 0 ? leaves : undefined;
}

/** One peak: a perfect subtree that no later leaf will extend. */
export interface Peak {
  /** Node position of the peak. */
  readonly position: number;
  /** 0 for a lone leaf; the subtree holds 2^height leaves. */
  readonly height: number;
  /** Index of the first leaf under this peak. */
  readonly firstLeaf: number;
}

/**
 * The peaks of an MMR of `leafCount` leaves, leftmost (tallest) first: one per set bit of
 * the leaf count, from the high bit down.
 *
 * @throws AppError `invalid_argument` when `leafCount` is not a non-negative safe integer.
 */
export function peaksForLeafCount(leafCount: number): Peak[] {
  assertU64(leafCount, 'leaf count');
  const peaks: Peak[] = [];
  let nodeOffset = 0;
  let leafOffset = 0;
  for (let h = MAX_HEIGHT; h >= 0; h--) {
    const leaves = 2 ** h;
    if (Math.floor(leafCount / leaves) % 2 === 1) {
      const treeNodes = 2 * leaves - 1;
      peaks.push({ position: nodeOffset + treeNodes - 1, height: h, firstLeaf: leafOffset });
      nodeOffset += treeNodes;
      leafOffset += leaves;
    }
  }
  return peaks;
}

/**
 * Node positions of the peaks of an MMR with `size` nodes, left to right.
 *
 * @throws AppError `invalid_argument` when `size` is not the size of any MMR.
 */
export function peakPositions(size: number): number[] {
  const leafCount = leafCountForSize(size);
  if (leafCount === undefined) {
    throw new AppError(
      'invalid_argument',
      `${String(size)} is not a valid MMR size (node count); use mmrSize(leafCount) to get one`,
      { details: { size } },
    );
  }
  return peaksForLeafCount(leafCount).map((p) => p.position);
}
