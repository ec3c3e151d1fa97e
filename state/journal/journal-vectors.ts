import { CompactMmr } from './compact-mmr';
import { fromHex, toHex } from './hex';
import { buildInclusionProof } from './inclusion-proof';
import { buildErasureVectors, type ErasureVectors } from './journal-vectors-erasure';
import { buildSummaryVectors, type SummaryVectors } from './journal-vectors-summary';
import { buildV2Vectors, type V2Vectors } from './journal-vectors-v2';
import { buildRetirementVector, type RetirementVector } from './journal-vectors-retirement';
import { LeafHasher } from './leaf-digest';
import { keyIdOf } from './signed-root';
import { vectorKeySeed, type VectorCrypto } from './vector-bytes';
import { vectorEvents, type KeyRotationVector, type SignedRootVector } from './vector-events';
import type { JournalEvent } from './verification-types';

/**
 * The pinned test vectors of docs/journal-vectors.json (docs/journal-format.md, "Test
 * vectors"). Built here, not in hack/, so a unit test can rebuild them in memory and
 * compare with the committed file byte for byte.
 */
export interface JournalVectors {
  readonly description: string;
  readonly keys: readonly {
    readonly note: string;
    readonly seedHex: string;
    readonly publicKeyHex: string;
    readonly keyId: string;
  }[];
  readonly leaves: readonly {
    readonly position: number;
    readonly kind: string;
    readonly payloadHex: string;
    readonly leafHex: string;
  }[];
  readonly roots: readonly {
    readonly leafCount: number;
    readonly sizeNodes: number;
    readonly rootHex: string;
  }[];
  readonly nodesHex: readonly string[];
  readonly signedRoots: readonly SignedRootVector[];
  readonly keyRotations: readonly KeyRotationVector[];
  readonly inclusionProofs: readonly {
    readonly leafIndex: number;
    readonly leafCount: number;
    readonly leafHex: string;
    readonly proofHex: readonly string[];
    readonly rootHex: string;
  }[];
  /** Version-2 roots and an excision (docs/journal-format.md, sections 6 and 10). */
  readonly version2: V2Vectors;
  readonly retirement: RetirementVector;
  /** An erased readable entry (docs/journal-format.md, "Erasure"). */
  readonly erasure: ErasureVectors;
  /** Summaries, their request bytes and a dispatch given one (docs/journal-format.md, "Summaries"). */
  readonly summary: SummaryVectors;
}

/**
 * Builds the vectors: a 200-event journal of batches each closed by a `signed_root`, with
 * one key rotation in the middle, plus every root, node, signed root and a few inclusion
 * proofs. Pure and deterministic: ed25519 signatures are deterministic (RFC 8032).
 */
export function buildJournalVectors(crypto: VectorCrypto): JournalVectors {
  const { hash } = crypto;
  const signers = [
    crypto.createSigner(vectorKeySeed(hash, 1)),
    crypto.createSigner(vectorKeySeed(hash, 2)),
  ];
  const [first, second] = signers;
  if (first === undefined || second === undefined) throw new Error('unreachable: two signers');
  const events = vectorEvents(crypto, first, second);

  const leafHasher = new LeafHasher(hash);
  const mmr = new CompactMmr(hash);
  const nodes: Uint8Array[] = [];
  const leaves: JournalVectors['leaves'][number][] = [];
  const roots: JournalVectors['roots'][number][] = [];
  for (const event of events) {
    roots.push({ leafCount: mmr.leafCount, sizeNodes: mmr.size, rootHex: toHex(mmr.root()) });
    const leaf = leafHasher.digest(event.position, event.kind, event.payload);
    mmr.append(leaf, (position, digest) => {
      nodes[position] = digest;
    });
    leaves.push({
      position: event.position,
      kind: event.kind,
      payloadHex: toHex(event.payload),
      leafHex: toHex(leaf),
    });
  }
  roots.push({ leafCount: mmr.leafCount, sizeNodes: mmr.size, rootHex: toHex(mmr.root()) });

  const signedRoots = events.flatMap((event) => event.signedRoot ?? []);
  const keyRotations = events.flatMap((event) => event.rotation ?? []);
  const proofCases: readonly (readonly [number, number])[] = [
    [0, 1],
    [2, 3],
    [5, 11],
    [100, 200],
    [199, 200],
  ];
  const inclusionProofs = proofCases.map(([leafIndex, leafCount]) => {
    const proof = buildInclusionProof(leafIndex, leafCount, (p) => nodes[p]);
    const root = roots[leafCount]?.rootHex ?? '';
    return {
      leafIndex,
      leafCount,
      leafHex: leaves[leafIndex]?.leafHex ?? '',
      proofHex: proof.digests.map(toHex),
      rootHex: root,
    };
  });

  const version2 = buildV2Vectors(hash, first);
  return {
    description:
      'Polychrome journal integrity vectors; see docs/journal-format.md. Regenerate with ' +
      '`npx tsx hack/gen-journal-vectors.ts`. The keys are TEST ONLY (their seeds are published here).',
    keys: signers.map((signer, i) => ({
      note: `test-only seed: SHA-256 of UTF-8 "polychrome/test-only/journal-key/${String(i + 1)}"`,
      seedHex: toHex(vectorKeySeed(hash, i === 0 ? 1 : 2)),
      publicKeyHex: toHex(signer.publicKey),
      keyId: keyIdOf(hash, signer.publicKey),
    })),
    leaves,
    roots,
    nodesHex: nodes.map(toHex),
    signedRoots,
    keyRotations,
    inclusionProofs,
    version2,
    retirement: buildRetirementVector(hash, first, version2),
    erasure: buildErasureVectors(hash, first),
    summary: buildSummaryVectors(hash, first),
  };
}

/** The events of a vectors file, as a verifier reads them. */
export function vectorJournalEvents(vectors: JournalVectors): JournalEvent[] {
  return vectors.leaves.map((leaf) => ({
    position: leaf.position,
    kind: leaf.kind,
    payload: fromHex(leaf.payloadHex, `payloadHex of leaf ${String(leaf.position)}`),
  }));
}

/** The exact text of docs/journal-vectors.json: two-space JSON and a final newline. */
export function serializeJournalVectors(vectors: JournalVectors): string {
  return `${JSON.stringify(vectors, null, 2)}\n`;
}
