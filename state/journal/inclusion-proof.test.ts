import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

import { describe, expect, it } from '@jest/globals';
import fc from 'fast-check';

import type { AppError } from '../../common/errors';
import { isAppError } from '../../common/errors';
import { CompactMmr } from './compact-mmr';
import { fromHex, toHex } from './hex';
import {
  buildInclusionProof,
  inclusionProofPositions,
  rootFromInclusionProof,
  verifyInclusion,
  type InclusionProof,
} from './inclusion-proof';
import { leafDigest } from './leaf-digest';
import { nodeSha256 } from './node-sha256';
import { buildReferenceMmr } from './reference-mmr';

const LEAVES = 300;
const leaves = Array.from({ length: LEAVES }, (_, i) =>
  leafDigest(nodeSha256, i, 'tool_result', Uint8Array.of(i & 0xff, i >> 8)),
);
const nodes: Uint8Array[] = [];
const roots: Uint8Array[] = [];
{
  const mmr = new CompactMmr(nodeSha256);
  for (const leaf of leaves) {
    roots.push(mmr.root());
    mmr.append(leaf, (_, d) => nodes.push(d));
  }
  roots.push(mmr.root());
}
const getNode = (p: number): Uint8Array | undefined => nodes[p];

function errorOf(run: () => unknown): AppError {
  try {
    run();
  } catch (e) {
    if (isAppError(e)) return e;
    throw e;
  }
  throw new Error('expected an AppError, nothing was thrown');
}

const caseArb = fc
  .integer({ min: 1, max: LEAVES })
  .chain((leafCount) =>
    fc.tuple(fc.integer({ min: 0, max: leafCount - 1 }), fc.constant(leafCount)),
  );

describe('inclusion proofs', () => {
  it('names the nodes to fetch: path siblings lowest first, then the other peaks', () => {
    // Leaf 2 of 3 is a peak itself (node 3): the proof is the other peak, node 2.
    expect(inclusionProofPositions(2, 3)).toEqual([2]);
    expect(inclusionProofPositions(0, 4)).toEqual([1, 5]);
    // 11 leaves = peaks 14 (8 leaves), 17 (2), 18 (1). Leaf 5 is node 8: siblings 7, 12, 6.
    expect(inclusionProofPositions(5, 11)).toEqual([7, 12, 6, 17, 18]);
  });

  it('verifies every proof against the reference root (exhaustive up to 70 leaves)', () => {
    for (let n = 1; n <= 70; n++) {
      const reference = buildReferenceMmr(nodeSha256, leaves.slice(0, n));
      for (let i = 0; i < n; i++) {
        const proof = buildInclusionProof(i, n, getNode);
        expect(toHex(rootFromInclusionProof(nodeSha256, proof, leaves[i]!))).toBe(
          toHex(reference.root),
        );
      }
    }
  });

  it('keeps proofs O(log n): at most 2·log2(n) digests', () => {
    fc.assert(
      fc.property(caseArb, ([i, n]) => {
        expect(buildInclusionProof(i, n, getNode).digests.length).toBeLessThanOrEqual(
          2 * Math.ceil(Math.log2(n)),
        );
      }),
    );
  });

  it('verifies every proof for random sizes (property)', () => {
    fc.assert(
      fc.property(caseArb, ([i, n]) => {
        verifyInclusion(nodeSha256, buildInclusionProof(i, n, getNode), leaves[i]!, roots[n]!);
      }),
    );
  });

  it('fails with data_loss when any bit of the leaf or any proof digest flips (property)', () => {
    fc.assert(
      fc.property(caseArb, fc.nat(), fc.integer({ min: 0, max: 255 }), ([i, n], which, bit) => {
        const proof = buildInclusionProof(i, n, getNode);
        const targets = [leaves[i]!, ...proof.digests];
        const t = which % targets.length;
        const flipped = targets.map((d, k) => {
          const copy = d.slice();
          if (k === t) copy[bit >> 3]! ^= 1 << (bit & 7);
          return copy;
        });
        const [leaf, ...digests] = flipped;
        const err = errorOf(() =>
          verifyInclusion(nodeSha256, { leafIndex: i, leafCount: n, digests }, leaf!, roots[n]!),
        );
        expect(err.code).toBe('data_loss');
      }),
    );
  });

  it('fails against the root of any other size (property)', () => {
    fc.assert(
      fc.property(caseArb, fc.integer({ min: 0, max: LEAVES }), ([i, n], other) => {
        fc.pre(other !== n);
        const proof = buildInclusionProof(i, n, getNode);
        expect(
          errorOf(() => verifyInclusion(nodeSha256, proof, leaves[i]!, roots[other]!)).code,
        ).toBe('data_loss');
      }),
    );
  });

  it('names a node the store lacks', () => {
    expect(() => buildInclusionProof(3, 8, (p) => (p === 2 ? undefined : nodes[p]))).toThrow(
      'MMR node 2 is missing; the node store is incomplete: rebuild it by replaying the journal',
    );
  });
});

/** A probe file: cases read by this test (format in testdata/README.md). */
interface ProbeCase {
  readonly description: string;
  readonly leafIndex: number;
  readonly leafCount: number;
  readonly leafHex: string;
  readonly proofHex: readonly string[];
  readonly rootHex: string;
  readonly wantError: { readonly code: string; readonly messageIncludes: string } | null;
}

function isProbeCase(value: unknown): value is ProbeCase {
  if (typeof value !== 'object' || value === null) return false;
  const v = value as Record<string, unknown>;
  const want = v.wantError;
  return (
    typeof v.description === 'string' &&
    typeof v.leafIndex === 'number' &&
    typeof v.leafCount === 'number' &&
    typeof v.leafHex === 'string' &&
    typeof v.rootHex === 'string' &&
    Array.isArray(v.proofHex) &&
    v.proofHex.every((d) => typeof d === 'string') &&
    (want === null ||
      (typeof want === 'object' &&
        typeof (want as Record<string, unknown>).code === 'string' &&
        typeof (want as Record<string, unknown>).messageIncludes === 'string'))
  );
}

const testdata = join(__dirname, 'testdata');
const probeFiles = readdirSync(testdata).filter((f) => f.endsWith('.json'));
const probes = probeFiles.flatMap((file) => {
  const parsed: unknown = JSON.parse(readFileSync(join(testdata, file), 'utf8'));
  if (!Array.isArray(parsed)) throw new Error(`${file}: expected an array of probe cases`);
  return parsed.map((c: unknown, k) => {
    if (!isProbeCase(c)) throw new Error(`${file}[${String(k)}] is not a probe case`);
    return { file, ...c };
  });
});

describe('inclusion proof probes (testdata/*.json)', () => {
  it('has the probe kinds the format promises, with failing cases in each bad-proof file', () => {
    expect(probeFiles.sort()).toEqual([
      'flipped-bit.json',
      'swapped-peaks.json',
      'swapped-roots.json',
      'truncated.json',
      'valid.json',
      'wrong-index.json',
      'wrong-leaf.json',
    ]);
    for (const file of probeFiles) {
      const cases = probes.filter((p) => p.file === file);
      expect(cases.length).toBeGreaterThan(0);
      expect(cases.every((c) => (c.wantError === null) === (file === 'valid.json'))).toBe(true);
    }
  });

  it('accepts the type guard only for well-formed cases', () => {
    expect(isProbeCase(probes[0])).toBe(true);
    expect(isProbeCase({ ...probes[0], proofHex: [1] })).toBe(false);
    expect(isProbeCase({ ...probes[0], wantError: { code: 1 } })).toBe(false);
    expect(isProbeCase(null)).toBe(false);
  });

  it.each(probes)('$file: $description', (probe) => {
    const proof: InclusionProof = {
      leafIndex: probe.leafIndex,
      leafCount: probe.leafCount,
      digests: probe.proofHex.map((d) => fromHex(d)),
    };
    const run = (): void =>
      verifyInclusion(nodeSha256, proof, fromHex(probe.leafHex), fromHex(probe.rootHex));
    if (probe.wantError === null) {
      expect(run()).toBeUndefined();
      return;
    }
    const err = errorOf(run);
    expect(err.code).toBe(probe.wantError.code);
    expect(err.message).toContain(probe.wantError.messageIncludes);
  });
});
