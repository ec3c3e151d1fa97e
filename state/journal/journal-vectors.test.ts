import { readFileSync } from 'node:fs';
import { join } from 'node:path';

import { beforeAll, describe, expect, it } from '@jest/globals';

import { payloadCodecs } from '../../common/event-kinds';
import { SUMMARY_INSTRUCTIONS as summaryInstructions } from '../../common/model/summary-request';
import { CompactMmr } from './compact-mmr';
import { fromHex, toHex } from './hex';
import { rootFromInclusionProof } from './inclusion-proof';
import {
  buildJournalVectors,
  serializeJournalVectors,
  vectorJournalEvents,
  type JournalVectors,
} from './journal-vectors';
import { isJournalVectors } from './journal-vectors-shape';
import { v2JournalEvents } from './journal-vectors-v2';
import { LeafHasher } from './leaf-digest';
import { loadNobleCrypto, type NobleJournalCrypto } from './noble-crypto';
import { createNodeEd25519Signer } from './node-ed25519';
import { nodeSha256 } from './node-sha256';
import { buildReferenceMmr, referenceLeafDigest } from './reference-mmr';
import { verifyJournal } from './verify-journal';

const committedText = readFileSync(
  join(__dirname, '..', '..', 'docs', 'journal-vectors.json'),
  'utf8',
);
const parsed: unknown = JSON.parse(committedText);
if (!isJournalVectors(parsed))
  throw new Error('docs/journal-vectors.json does not have the vectors shape');
const vectors: JournalVectors = parsed;

let noble: NobleJournalCrypto;
beforeAll(async () => {
  noble = await loadNobleCrypto();
});

const utf8 = new TextEncoder();
function u64Hex(value: number): string {
  return value.toString(16).padStart(16, '0');
}

describe('docs/journal-vectors.json', () => {
  it('is exactly what hack/gen-journal-vectors.ts writes (node:crypto)', () => {
    const rebuilt = serializeJournalVectors(
      buildJournalVectors({ hash: nodeSha256, createSigner: createNodeEd25519Signer }),
    );
    // On failure: run `npx tsx hack/gen-journal-vectors.ts` only if the format change is
    // intended; the vectors are a contract with third-party verifiers.
    expect(rebuilt === committedText).toBe(true);
  });

  it('is rebuilt byte for byte by @noble alone, without node:crypto', () => {
    const rebuilt = serializeJournalVectors(
      buildJournalVectors({ hash: noble.sha256, createSigner: noble.createSigner }),
    );
    expect(rebuilt === committedText).toBe(true);
  });

  it('covers 200 events with varied kinds and payload sizes, and roots for 0..200', () => {
    expect(vectors.leaves.map((l) => l.position)).toEqual(Array.from({ length: 200 }, (_, i) => i));
    expect(new Set(vectors.leaves.map((l) => l.kind)).size).toBeGreaterThanOrEqual(20);
    const sizes = vectors.leaves.map((l) => l.payloadHex.length / 2);
    expect(sizes).toContain(0);
    expect(Math.max(...sizes)).toBeGreaterThan(4096);
    expect(vectors.roots.map((r) => r.leafCount)).toEqual(Array.from({ length: 201 }, (_, i) => i));
    expect(vectors.signedRoots.length).toBeGreaterThanOrEqual(5);
    expect(vectors.keyRotations.length).toBe(1);
  });

  it('has leaf digests that the spec formula gives with @noble SHA-256', () => {
    for (const leaf of vectors.leaves) {
      const digest = referenceLeafDigest(
        noble.sha256,
        leaf.position,
        leaf.kind,
        fromHex(leaf.payloadHex),
      );
      expect(toHex(digest)).toBe(leaf.leafHex);
    }
  });

  it('pins the root and size of every leaf count 0..200 (reference MMR, @noble SHA-256)', () => {
    const leaves = vectors.leaves.map((l) => fromHex(l.leafHex));
    for (const pinned of vectors.roots) {
      const reference = buildReferenceMmr(noble.sha256, leaves.slice(0, pinned.leafCount));
      expect({ n: pinned.leafCount, size: reference.size, root: toHex(reference.root) }).toEqual({
        n: pinned.leafCount,
        size: pinned.sizeNodes,
        root: pinned.rootHex,
      });
    }
    expect(buildReferenceMmr(noble.sha256, leaves).nodes.map(toHex)).toEqual(vectors.nodesHex);
  });

  it('pins the fast MMR: CompactMmr reproduces every pinned root', () => {
    const mmr = new CompactMmr(nodeSha256);
    const hasher = new LeafHasher(nodeSha256);
    const got = [toHex(mmr.root())];
    for (const leaf of vectors.leaves) {
      mmr.append(hasher.digest(leaf.position, leaf.kind, fromHex(leaf.payloadHex)));
      got.push(toHex(mmr.root()));
    }
    expect(got).toEqual(vectors.roots.map((r) => r.rootHex));
  });

  it('has signed roots whose messages, key ids and signatures check out with @noble', () => {
    for (const s of vectors.signedRoots) {
      const message =
        toHex(utf8.encode('polychrome/journal-root/v1')) + u64Hex(s.leafCount) + s.rootHex;
      expect(s.messageHex).toBe(message);
      expect(s.rootHex).toBe(vectors.roots[s.leafCount]?.rootHex);
      expect(s.leafCount).toBe(s.position);
      expect(s.keyId).toBe(toHex(noble.sha256(fromHex(s.publicKeyHex)).subarray(0, 16)));
      const ok = noble.verifier.verify(
        fromHex(s.publicKeyHex),
        fromHex(message),
        fromHex(s.signatureHex),
      );
      expect(ok).toBe(true);
    }
  });

  it('has a key rotation signed by the old key over the new one', () => {
    for (const r of vectors.keyRotations) {
      expect(r.messageHex).toBe(
        toHex(utf8.encode('polychrome/key-rotation/v1')) + r.newPublicKeyHex,
      );
      const ok = noble.verifier.verify(
        fromHex(r.oldPublicKeyHex),
        fromHex(r.messageHex),
        fromHex(r.signatureHex),
      );
      expect(ok).toBe(true);
    }
  });

  it('has inclusion proofs that lead to the pinned roots', () => {
    for (const p of vectors.inclusionProofs) {
      const proof = {
        leafIndex: p.leafIndex,
        leafCount: p.leafCount,
        digests: p.proofHex.map((d) => fromHex(d)),
      };
      expect(toHex(rootFromInclusionProof(noble.sha256, proof, fromHex(p.leafHex)))).toBe(
        p.rootHex,
      );
    }
  });

  it('verifies as a whole journal with @noble only, following the rotation', () => {
    const first = vectors.keys[0];
    if (first === undefined) throw new Error('vectors name no key');
    const result = verifyJournal(vectorJournalEvents(vectors), {
      hash: noble.sha256,
      verifier: noble.verifier,
      trustedPublicKeys: [fromHex(first.publicKeyHex)],
    });
    expect(result).toMatchObject({
      ok: true,
      leafCount: 200,
      signedRootCount: vectors.signedRoots.length,
      verifiedLeafCount: 199,
      rootHex: vectors.roots[200]?.rootHex,
      unsealed: { fromPosition: 200, count: 0 },
    });
  });

  it('has version-2 root messages that the spec formula gives, signed by key 1 (@noble)', () => {
    const v2 = vectors.version2;
    const key = vectors.keys[0]!;
    const name = toHex(utf8.encode(v2.partition));
    expect(v2.signedRoots.map((r) => r.position)).toEqual([2, 4]);
    for (const root of v2.signedRoots) {
      // UTF-8 domain ‖ u64 len(partition) ‖ partition ‖ u64 leafCount ‖ root
      const expected =
        toHex(utf8.encode('polychrome/journal-root/v2')) +
        u64Hex(v2.partition.length) +
        name +
        u64Hex(root.leafCount) +
        root.rootHex;
      expect(root.messageHex).toBe(expected);
      expect(root.keyId).toBe(key.keyId);
      expect(
        noble.verifier.verify(
          fromHex(key.publicKeyHex),
          fromHex(root.messageHex),
          fromHex(root.signatureHex),
        ),
      ).toBe(true);
    }
  });

  it('verifies the repaired version-2 journal with @noble, excised entry included, only as its own partition', () => {
    const v2 = vectors.version2;
    const options = {
      hash: noble.sha256,
      verifier: noble.verifier,
      trustedPublicKeys: [fromHex(vectors.keys[0]!.publicKeyHex)],
    };
    const events = v2JournalEvents(v2);
    expect(verifyJournal(events, { ...options, partition: v2.partition })).toMatchObject({
      ok: true,
      leafCount: 5,
      signedRootCount: 2,
      excised: v2.excised,
    });
    const other = verifyJournal(events, { ...options, partition: v2.otherPartition.partition });
    expect(other.failure).toMatchObject({
      position: v2.otherPartition.position,
      reason: 'wrong_partition',
    });
    // Every stored leaf is what the spec formula gives; the excised one is the kept digest.
    for (const leaf of v2.leaves) {
      if ('excised' in leaf) continue;
      expect(
        toHex(
          referenceLeafDigest(noble.sha256, leaf.position, leaf.kind, fromHex(leaf.payloadHex)),
        ),
      ).toBe(leaf.leafHex);
    }
  });

  it('has a retirement record of the version-2 journal: the spec message, its root over every entry, signed by key 1 (@noble)', () => {
    const { retirement, version2: v2 } = vectors;
    const key = vectors.keys[0]!;
    // UTF-8 domain ‖ u64 len(partition) ‖ partition ‖ u64 head ‖ root ‖ u64 retiredAtMs
    expect(retirement.messageHex).toBe(
      toHex(utf8.encode('polychrome/journal-retired/v1')) +
        u64Hex(v2.partition.length) +
        toHex(utf8.encode(v2.partition)) +
        u64Hex(retirement.head) +
        retirement.rootHex +
        u64Hex(retirement.retiredAtMs),
    );
    expect(retirement).toMatchObject({ partition: v2.partition, head: 5, keyId: key.keyId });
    const mmr = buildReferenceMmr(
      noble.sha256,
      v2.leaves.map((l) => fromHex(l.leafHex)),
    );
    expect(toHex(mmr.root)).toBe(retirement.rootHex);
    const check = (message: string) =>
      noble.verifier.verify(
        fromHex(key.publicKeyHex),
        fromHex(message),
        fromHex(retirement.signatureHex),
      );
    expect(check(retirement.messageHex)).toBe(true);
    // Moved to another partition, the same signature means nothing.
    expect(
      check(
        retirement.messageHex.replace(
          toHex(utf8.encode(v2.partition)),
          toHex(utf8.encode(v2.otherPartition.partition)),
        ),
      ),
    ).toBe(false);
  });

  it('verifies the erasure journal with @noble: the erased entry keeps its leaf, the record is the spec bytes', () => {
    const erasure = vectors.erasure;
    const trusted = [fromHex(vectors.keys[0]!.publicKeyHex)];
    const options = { hash: noble.sha256, verifier: noble.verifier, trustedPublicKeys: trusted };
    const events = v2JournalEvents(erasure);
    expect(verifyJournal(events, { ...options, partition: erasure.partition })).toMatchObject({
      ok: true,
      leafCount: 5,
      signedRootCount: 2,
      excised: erasure.excised,
      erased: erasure.erased,
    });
    // The record's payload is the protobuf of its fields (docs/journal-format.md, "Erasure").
    const { fields } = erasure.record;
    const record = payloadCodecs.excision.decode(fromHex(erasure.record.payloadHex));
    expect({ ...record, leafDigest: toHex(record.leafDigest) }).toEqual({
      ...fields,
      leafDigestHex: undefined,
      leafDigest: fields.leafDigestHex,
    });
    const stored = erasure.leaves[erasure.record.position]!;
    expect('payloadHex' in stored && stored.payloadHex).toBe(erasure.record.payloadHex);
    // The kept digest is the spec's leaf of the entry as it was: the roots signed before still hold.
    expect(erasure.leaves[0]!.leafHex).toBe(fields.leafDigestHex);
    for (const leaf of erasure.leaves) {
      if ('excised' in leaf) continue;
      expect(
        toHex(
          referenceLeafDigest(noble.sha256, leaf.position, leaf.kind, fromHex(leaf.payloadHex)),
        ),
      ).toBe(leaf.leafHex);
    }
    // Dropping the record (and the root after it) leaves an excision nothing records.
    const cut = verifyJournal(events.slice(0, 3), { ...options, partition: erasure.partition });
    expect(cut.failure).toMatchObject({ position: 0, reason: 'unrecorded_excision' });
  });

  it('verifies the summary journal with @noble: each summary is the spec bytes, its request digest the spec request', () => {
    const summary = vectors.summary;
    const trusted = [fromHex(vectors.keys[0]!.publicKeyHex)];
    const options = { hash: noble.sha256, verifier: noble.verifier, trustedPublicKeys: trusted };
    expect(
      verifyJournal(v2JournalEvents(summary), { ...options, partition: summary.partition }),
    ).toMatchObject({ ok: true, leafCount: 12, signedRootCount: 4, excised: [] });
    expect(summary.summaries.map((v) => v.position)).toEqual([4, 10]);
    for (const v of summary.summaries) {
      const stored = summary.leaves[v.position]!;
      expect('kind' in stored && [stored.kind, stored.payloadHex]).toEqual([
        'summary',
        v.payloadHex,
      ]);
      const decoded = payloadCodecs.summary.decode(fromHex(v.payloadHex));
      const { requestSha256Hex, ...fields } = v.fields;
      expect({ ...decoded, requestSha256: toHex(decoded.requestSha256) }).toEqual({
        ...fields,
        requestSha256: requestSha256Hex,
      });
      // The request, rebuilt from docs/journal-format.md "Summary requests" alone.
      const { previous, turns } = v.request;
      const lines = [
        ...(previous === null ? [] : ['Previous summary:', '<<<', previous, '>>>']),
        'Turns to add, one JSON object per line, oldest first:',
        ...turns.map(
          (t) => `{"assistant":${JSON.stringify(t.assistant)},"user":${JSON.stringify(t.user)}}`,
        ),
      ];
      const json =
        `{"max_tokens":${String(v.fields.maxTokens)},"messages":[{"content":[{"text":` +
        `${JSON.stringify(lines.join('\n'))},"type":"text"}],"role":"user"}],` +
        `"model":${JSON.stringify(v.fields.model)},"system":${JSON.stringify(summaryInstructions)},"version":1}`;
      expect(v.request.json).toBe(json);
      expect(toHex(noble.sha256(utf8.encode(json)))).toBe(v.request.sha256Hex);
      expect(v.request.sha256Hex).toBe(requestSha256Hex);
    }
    // The summary at 10 carries the text of the one at 4, and keeps its from_position.
    const [first, second] = summary.summaries;
    expect(second?.request.previous).toBe(first?.fields.text);
    expect(second?.fields).toMatchObject({ previousPosition: 4, fromPosition: 0, toPosition: 6 });
    // turn_dispatched.summary_position is field 10, a varint: tag 0x50.
    const { dispatch } = summary;
    expect(summary.leaves[dispatch.position]).toMatchObject({
      kind: 'turn_dispatched',
      payloadHex: dispatch.payloadHex,
    });
    expect(payloadCodecs.turn_dispatched.decode(fromHex(dispatch.payloadHex))).toMatchObject(
      dispatch.fields,
    );
    expect(dispatch.payloadHex.endsWith('5004')).toBe(true);
  });

  it('pins the example of docs/journal-format.md section 15: the request, its digest, the payload and leaf', () => {
    const doc = readFileSync(join(__dirname, '..', '..', 'docs', 'journal-format.md'), 'utf8');
    const section = doc.slice(doc.indexOf('## 15. Summaries'));
    const first = vectors.summary.summaries[0]!;
    expect(section).toContain(`\n${first.request.json}\nsha256 ${first.request.sha256Hex}\n`);
    expect(section).toContain(`\n${summaryInstructions}\n`);
    const match = /payload = ([0-9a-f\s]+?)\n\s+leaf {4}= ([0-9a-f]{64})/u.exec(section);
    expect(match?.[1]?.replace(/\s+/gu, '')).toBe(first.payloadHex);
    expect(match?.[2]).toBe(vectors.summary.leaves[first.position]!.leafHex);
    expect(
      toHex(
        referenceLeafDigest(noble.sha256, first.position, 'summary', fromHex(first.payloadHex)),
      ),
    ).toBe(match?.[2]);
  });

  it('accepts only the vectors shape in its type guard', () => {
    expect(isJournalVectors(vectors)).toBe(true);
    expect(
      isJournalVectors({ ...vectors, roots: [{ leafCount: '0', sizeNodes: 0, rootHex: '' }] }),
    ).toBe(false);
    expect(
      isJournalVectors({
        ...vectors,
        inclusionProofs: [{ ...vectors.inclusionProofs[0], proofHex: [1] }],
      }),
    ).toBe(false);
    expect(isJournalVectors([])).toBe(false);
  });
});
