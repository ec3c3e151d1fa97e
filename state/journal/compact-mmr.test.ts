import { describe, expect, it } from '@jest/globals';

import { AppError } from '../../common/errors';
import { CompactMmr } from './compact-mmr';
import { toHex } from './hex';
import { leafDigest } from './leaf-digest';
import { peaksForLeafCount } from './mmr-layout';
import { emptyMmrRoot, mmrRoot, rootAtLeafCount } from './mmr-root';
import { nodeSha256 } from './node-sha256';
import { buildReferenceMmr } from './reference-mmr';

const leafOf = (i: number): Uint8Array =>
  leafDigest(nodeSha256, i, 'model_call', Uint8Array.of(i & 0xff));
const leaves = Array.from({ length: 140 }, (_, i) => leafOf(i));

describe('CompactMmr', () => {
  it('has the empty root SHA-256(u64 0)', () => {
    // printf '\0\0\0\0\0\0\0\0' | sha256sum
    const empty = 'af5570f5a1810b7af78caf4bc70a660f0df51e42baf91d4de5b2328de0e83dfc';
    expect(toHex(new CompactMmr(nodeSha256).root())).toBe(empty);
    expect(toHex(emptyMmrRoot(nodeSha256))).toBe(empty);
  });

  it('matches the worked example of docs/journal-format.md (3 and 4 leaves)', () => {
    // Leaves L0..L3 = leaf digests of (i, "model_call", [i]). Recompute in Python with
    //   u=lambda n:struct.pack('>Q',n); H=lambda b:hashlib.sha256(b).digest()
    //   n2=H(u(2)+L0+L1); root3=H(u(4)+n2+L2); n5=H(u(5)+L2+L3); n6=H(u(6)+n2+n5); root4=H(u(7)+n6)
    const mmr = new CompactMmr(nodeSha256);
    const seen: number[] = [];
    const record = (position: number): void => {
      seen.push(position);
    };
    for (let i = 0; i < 3; i++) mmr.append(leaves[i]!, record);
    expect(seen).toEqual([0, 1, 2, 3]);
    expect(mmr.size).toBe(4);
    expect(toHex(mmr.peaks()[0]!)).toBe(
      '054e6b121dab609d42f4b3a9be9677fcca74d3e43b6064f10fdcdb6489e37171',
    );
    expect(toHex(mmr.root())).toBe(
      'f92a0149ce827b099ec9126099b2cd6c202940170e85f9b3fd83feb76270b2fc',
    );
    expect(mmr.append(leaves[3]!, record)).toBe(4);
    expect(seen).toEqual([0, 1, 2, 3, 4, 5, 6]);
    expect(toHex(mmr.root())).toBe(
      'b3c13ed0411144b1557d04f2af0e05a9fad81ce496b4ad9add15d598d24719c5',
    );
  });

  it('emits every node of the reference MMR, in order, and the same root at every count', () => {
    const mmr = new CompactMmr(nodeSha256);
    const nodes: Uint8Array[] = [];
    for (let n = 0; n <= leaves.length; n++) {
      const reference = buildReferenceMmr(nodeSha256, leaves.slice(0, n));
      expect(mmr.size).toBe(reference.size);
      expect(nodes.map(toHex)).toEqual(reference.nodes.map(toHex));
      expect(mmr.peaks().map(toHex)).toEqual(
        reference.peaks.map((p) => toHex(reference.nodes[p]!)),
      );
      expect(toHex(mmr.root())).toBe(toHex(reference.root));
      expect(toHex(rootAtLeafCount(nodeSha256, n, (p) => nodes[p]))).toBe(toHex(reference.root));
      const leaf = leaves[n];
      if (leaf !== undefined) {
        mmr.append(leaf, (position, digest) => {
          expect(position).toBe(nodes.length);
          nodes.push(digest);
        });
      }
    }
  });

  it('resumes from persisted peaks or nodes and goes on to the same roots', () => {
    const full = new CompactMmr(nodeSha256);
    const nodes: Uint8Array[] = [];
    for (const leaf of leaves.slice(0, 77)) full.append(leaf, (_, d) => nodes.push(d));
    const fromPeaks = CompactMmr.fromPeaks(nodeSha256, 77, full.peaks());
    const fromNodes = CompactMmr.fromNodes(nodeSha256, 77, (p) => nodes[p]);
    const copy = full.clone();
    for (const leaf of leaves.slice(77)) {
      full.append(leaf);
      fromPeaks.append(leaf);
      fromNodes.append(leaf);
    }
    expect(toHex(fromPeaks.root())).toBe(toHex(full.root()));
    expect(toHex(fromNodes.root())).toBe(toHex(full.root()));
    expect(copy.leafCount).toBe(77);
    expect(toHex(copy.root())).not.toBe(toHex(full.root()));
  });

  it('keeps the root right past eight peaks, where its preimage buffer grows', () => {
    const mmr = new CompactMmr(nodeSha256);
    for (let i = 0; i < 2047; i++) {
      mmr.append(leafOf(i));
      expect(toHex(mmr.root())).toBe(toHex(mmrRoot(nodeSha256, mmr.size, mmr.peaks())));
    }
    expect(mmr.peaks()).toHaveLength(11);
  });

  it('refuses a peak list that does not fit the leaf count', () => {
    const peaks = [leaves[0]!, leaves[1]!];
    expect(() => CompactMmr.fromPeaks(nodeSha256, 4, peaks)).toThrow(
      'an MMR of 4 leaves has 1 peaks of 32 bytes; got 2 (lengths 32,32); pass the digests at peaksForLeafCount(leafCount)',
    );
  });

  it('names a missing node when resuming from an incomplete store', () => {
    const run = (): CompactMmr => CompactMmr.fromNodes(nodeSha256, 3, () => undefined);
    expect(run).toThrow(AppError);
    expect(run).toThrow(
      'MMR node 2 is missing; the node store is incomplete: rebuild it by replaying the journal',
    );
    expect(peaksForLeafCount(3).map((p) => p.position)).toEqual([2, 3]);
  });

  it('rejects a leaf digest that is not 32 bytes', () => {
    expect(() => new CompactMmr(nodeSha256).append(new Uint8Array(31))).toThrow(
      'a leaf digest is 32 bytes, got 31; hash the event with LeafHasher first',
    );
  });
});
