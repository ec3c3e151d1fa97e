import { describe, expect, it } from '@jest/globals';
import fc from 'fast-check';

import {
  leafCountForSize,
  leafNodePosition,
  mmrSize,
  peakPositions,
  peaksForLeafCount,
  popcount,
} from './mmr-layout';

// Post-order numbering of the first 11 leaves (docs/journal-format.md, "Node numbering"):
//
//                14
//              /    \
//             6      13             21
//            / \    /  \           /  \
//           2   5  9    12       17    20
//          / \ / \ / \ / \      / \   / \
//          0 1 3 4 7 8 10 11   15 16 18 19   22
const leafPositions = [0, 1, 3, 4, 7, 8, 10, 11, 15, 16, 18, 19, 22];

function popcountBig(value: number): number {
  return BigInt(value).toString(2).replaceAll('0', '').length;
}

describe('MMR layout', () => {
  it('places leaf i at 2i − popcount(i)', () => {
    expect(leafPositions.map((_, i) => leafNodePosition(i))).toEqual(leafPositions);
  });

  it('gives the size for each leaf count', () => {
    expect([0, 1, 2, 3, 4, 5, 6, 7, 8, 11, 13].map(mmrSize)).toEqual([
      0, 1, 3, 4, 7, 8, 10, 11, 15, 19, 23,
    ]);
  });

  it('names the peaks of 13 leaves: 14, 21, 22', () => {
    expect(peaksForLeafCount(13)).toEqual([
      { position: 14, height: 3, firstLeaf: 0 },
      { position: 21, height: 2, firstLeaf: 8 },
      { position: 22, height: 0, firstLeaf: 12 },
    ]);
    expect(peakPositions(23)).toEqual([14, 21, 22]);
    expect(peakPositions(0)).toEqual([]);
  });

  it('maps sizes back to leaf counts and rejects sizes no MMR has', () => {
    const valid = new Map<number, number>();
    for (let n = 0; n <= 64; n++) valid.set(mmrSize(n), n);
    for (let size = 0; size <= mmrSize(64); size++) {
      expect(leafCountForSize(size)).toBe(valid.get(size));
    }
    expect(leafCountForSize(2)).toBeUndefined();
    expect(leafCountForSize(-1)).toBeUndefined();
    expect(() => peakPositions(2)).toThrow(
      '2 is not a valid MMR size (node count); use mmrSize(leafCount) to get one',
    );
  });

  it('agrees with bigint arithmetic beyond 32 bits', () => {
    fc.assert(
      // Leaf counts up to 2^52 keep the size (about 2n) a safe integer.
      fc.property(fc.maxSafeNat(), (n) => {
        const leafCount = n % (2 ** 52 + 1);
        expect(popcount(leafCount)).toBe(popcountBig(leafCount));
        expect(mmrSize(leafCount)).toBe(
          Number(2n * BigInt(leafCount) - BigInt(popcountBig(leafCount))),
        );
        expect(leafCountForSize(mmrSize(leafCount))).toBe(leafCount);
      }),
    );
    expect(popcount(2 ** 52 + 2 ** 33 + 1)).toBe(3);
  });
});
