/**
 * The browser verifier in Node, with the @noble crypto the browser uses, over the committed
 * journal vectors (docs/journal-vectors.json) written as export files with the project's
 * own writer (common/journal-export-format.ts).
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

import { beforeAll, describe, expect, it } from '@jest/globals';

import { formatExportEvent, formatExportHeader } from '../../common/journal-export-format';
import { fromHex } from '../../state/journal/hex';
import { isJournalVectors } from '../../state/journal/journal-vectors-shape';
import { v2JournalEvents } from '../../state/journal/journal-vectors-v2';
import { vectorJournalEvents, type JournalVectors } from '../../state/journal/journal-vectors';
import { loadNobleCrypto, type NobleJournalCrypto } from '../../state/journal/noble-crypto';
import type { JournalEvent } from '../../state/journal/verification-types';
import {
  checkInclusion,
  parsePublicKey,
  statusJournalCheckpoint,
  verifyExportText,
} from './browser-verify';

const parsed: unknown = JSON.parse(
  readFileSync(join(__dirname, '..', '..', 'docs', 'journal-vectors.json'), 'utf8'),
);
if (!isJournalVectors(parsed)) throw new Error('docs/journal-vectors.json has another shape');
const vectors: JournalVectors = parsed;
const key0 = fromHex(vectors.keys[0]!.publicKeyHex);
const key1 = fromHex(vectors.keys[1]!.publicKeyHex);
const v2 = vectors.version2;

let noble: NobleJournalCrypto;
beforeAll(async () => {
  noble = await loadNobleCrypto();
});

function exportText(
  partition: string,
  events: readonly JournalEvent[],
  keys: Uint8Array[],
): string {
  return (
    formatExportHeader(
      partition,
      keys.map((publicKey, i) => ({ keyId: vectors.keys[i]!.keyId, publicKey })),
    ) + events.map((e) => formatExportEvent(e)).join('')
  );
}

/** The status.journal a controller would write after the last signed root. */
function statusOf(signedRoots: readonly { position: number; rootHex: string; keyId: string }[]) {
  const last = signedRoots[signedRoots.length - 1]!;
  return { head: last.position + 1, lastSignedRoot: last.rootHex, keyId: last.keyId };
}

function checkpoint(journal: unknown) {
  const read = statusJournalCheckpoint(journal);
  if (typeof read === 'string' || read === undefined)
    throw new Error(`no checkpoint: ${String(read)}`);
  return read;
}

const v1Events = (): JournalEvent[] => vectorJournalEvents(vectors);
const v1Text = (): string => exportText('conv-vectors', v1Events(), [key0]);

describe('verifyExportText', () => {
  it('verifies every event of a signed export against the pinned key and the status checkpoint', () => {
    const got = verifyExportText(v1Text(), noble, {
      pinnedKey: key0,
      checkpoint: checkpoint(statusOf(vectors.signedRoots)),
      source: 'the export',
    });
    expect(got.failure).toBeUndefined();
    expect(got.ok).toBe(true);
    expect(got.result.trust).toBe('pinned');
    expect(got.result.events).toBe(v1Events().length);
    expect(got.result.signedRoots).toBe(vectors.signedRoots.length);
    expect(got.trustedKeys[0]!.keyId).toBe(vectors.keys[0]!.keyId);
    expect(got.headerKeys[0]!.fingerprint).toMatch(/^([0-9a-f]{4} ){15}[0-9a-f]{4}$/u);
    // Leaves recomputed here are the spec's.
    expect(got.events.map((e) => e.leafHex)).toEqual(vectors.leaves.map((l) => l.leafHex));
    const sealed = got.events.filter((e) => e.sealed).length;
    expect(sealed).toBe(got.result.verifiedLeafCount);
    expect(sealed).toBeGreaterThan(0);
    // The payload is decoded here, from the bytes.
    expect(got.events.find((e) => e.kind === 'signed_root')?.payload).toMatchObject({
      leafCount: vectors.signedRoots[0]!.leafCount,
    });
  });

  it('checks any sealed event inclusion proof, and refuses one past the last verified root', () => {
    const got = verifyExportText(v1Text(), noble, {
      pinnedKey: key0,
      checkpoint: checkpoint(statusOf(vectors.signedRoots)),
      source: 'the export',
    });
    for (const position of [0, 1, 7, 100, got.result.verifiedLeafCount - 1]) {
      const proof = checkInclusion(got, position, noble.sha256);
      expect(proof).toMatchObject({ ok: true, position });
      expect(proof.leafCount).toBeGreaterThan(position);
    }
    // A node altered after replay: the proof no longer reaches the signed root.
    const nodes = [...got.nodes];
    nodes[1] = new Uint8Array(32).fill(7);
    expect(checkInclusion({ ...got, nodes }, 0, noble.sha256)).toMatchObject({ ok: false });
    expect(checkInclusion(got, got.result.events + 5, noble.sha256).ok).toBe(false);
  });

  it('fails at the tampered event when one payload byte changes', () => {
    const events = v1Events();
    const victim = 5;
    const payload = events[victim]!.payload.slice();
    payload[payload.length - 1] = (payload[payload.length - 1] ?? 0) ^ 0x01;
    events[victim] = { ...events[victim]!, payload };
    const got = verifyExportText(exportText('conv-vectors', events, [key0]), noble, {
      pinnedKey: key0,
      checkpoint: checkpoint(statusOf(vectors.signedRoots)),
      source: 'the export',
    });
    expect(got.ok).toBe(false);
    expect(got.failure).toMatchObject({ reason: 'event_changed' });
    // The first root over the changed leaf is the one that fails; nothing after it is sealed.
    const firstRoot = vectors.signedRoots.find((r) => r.leafCount > victim)!;
    expect(got.failure?.position).toBe(firstRoot.position);
    expect(got.events.filter((e) => e.sealed).every((e) => e.position < victim)).toBe(true);
  });

  it('accepts only the pinned key: another key fails wrong_key, the header key is said to be unpinned', () => {
    const wrong = verifyExportText(v1Text(), noble, {
      pinnedKey: key1,
      checkpoint: checkpoint(statusOf(vectors.signedRoots)),
      source: 'the export',
    });
    expect(wrong.failure).toMatchObject({
      reason: 'wrong_key',
      position: vectors.signedRoots[0]!.position,
    });
    const unpinned = verifyExportText(v1Text(), noble, {
      checkpoint: checkpoint(statusOf(vectors.signedRoots)),
      source: 'the export',
    });
    expect(unpinned.ok).toBe(true);
    expect(unpinned.result.trust).toBe('export-header');
  });

  it('fails an export cut short or rolled back against the status checkpoint, and one with no checkpoint', () => {
    const events = v1Events();
    const cut = events.slice(0, vectors.signedRoots[2]!.position + 1);
    const short = verifyExportText(exportText('conv-vectors', cut, [key0]), noble, {
      pinnedKey: key0,
      checkpoint: checkpoint(statusOf(vectors.signedRoots)),
      source: 'the export',
    });
    expect(short.failure).toMatchObject({ reason: 'rolled_back' });
    const none = verifyExportText(v1Text(), noble, { pinnedKey: key0, source: 'the export' });
    expect(none.failure).toMatchObject({ reason: 'no_checkpoint' });
  });

  it('names the line that cannot be read', () => {
    const lines = v1Text().split('\n');
    lines[4] = '{"position": 3, "kind": "tool_call", "payload": "**"}';
    const got = verifyExportText(lines.join('\n'), noble, {
      pinnedKey: key0,
      source: 'the export',
    });
    expect(got.failure).toMatchObject({ reason: 'malformed', position: 3 });
    expect(got.failure?.message).toContain('line 5');
  });

  it('shows an excised entry by its kept leaf, and checks the partition of version-2 roots', () => {
    const events = v2JournalEvents(v2);
    const good = verifyExportText(exportText(v2.partition, events, [key0]), noble, {
      pinnedKey: key0,
      checkpoint: checkpoint(statusOf(v2.signedRoots)),
      source: 'the export',
    });
    expect(good.ok).toBe(true);
    expect(good.events.filter((e) => e.excised).map((e) => e.position)).toEqual(v2.excised);
    expect(checkInclusion(good, v2.excised[0]!, noble.sha256).ok).toBe(true);
    const moved = verifyExportText(exportText('conv-elsewhere', events, [key0]), noble, {
      pinnedKey: key0,
      checkpoint: checkpoint(statusOf(v2.signedRoots)),
      source: 'the export',
    });
    expect(moved.failure).toMatchObject({ reason: 'wrong_partition' });
  });

  it('verifies an export with an erased readable entry, lists it as erased, and proves its position', () => {
    const erasure = vectors.erasure;
    const events = v2JournalEvents(erasure);
    const got = verifyExportText(exportText(erasure.partition, events, [key0]), noble, {
      pinnedKey: key0,
      checkpoint: checkpoint(statusOf(erasure.signedRoots)),
      source: 'the export',
    });
    expect(got.failure).toBeUndefined();
    expect(got.result).toMatchObject({ ok: true, excised: [0], erased: erasure.erased });
    expect(got.events.filter((e) => e.excised).map((e) => e.position)).toEqual([0]);
    expect(checkInclusion(got, 0, noble.sha256).ok).toBe(true);
    // The record sealed with it is what makes the marker count: without it, the export fails.
    const unrecorded = events.filter((e) => e.position < 3);
    const cut = verifyExportText(exportText(erasure.partition, unrecorded, [key0]), noble, {
      pinnedKey: key0,
      source: 'the export',
    });
    expect(cut.failure).toMatchObject({ reason: 'unrecorded_excision', position: 0 });
  });

  it('verifies an export with summaries and shows each summary decoded from its bytes', () => {
    const summary = vectors.summary;
    const events = v2JournalEvents(summary);
    const got = verifyExportText(exportText(summary.partition, events, [key0]), noble, {
      pinnedKey: key0,
      checkpoint: checkpoint(statusOf(summary.signedRoots)),
      source: 'the export',
    });
    expect(got.failure).toBeUndefined();
    expect(got.result).toMatchObject({ ok: true, events: 12 });
    const shown = got.events.filter((e) => e.kind === 'summary');
    expect(shown.map((e) => e.position)).toEqual(summary.summaries.map((v) => v.position));
    expect(shown[1]?.payload).toMatchObject({
      previousPosition: 4,
      toPosition: 6,
      text: summary.summaries[1]!.fields.text,
    });
    expect(got.events[summary.dispatch.position]?.payload).toMatchObject({ summaryPosition: 4 });
  });

  it('refuses text that is no export, naming it', () => {
    expect(() => verifyExportText('<html>', noble, { source: 'the export of hello' })).toThrow(
      'the export of hello is not a journal export',
    );
  });
});

describe('what the user types', () => {
  it('reads a public key as base64 or hex, and says what a key is otherwise', () => {
    const base64 = Buffer.from(key0).toString('base64');
    expect(parsePublicKey(base64)).toEqual(key0);
    expect(parsePublicKey(` ${vectors.keys[0]!.publicKeyHex} `)).toEqual(key0);
    expect(parsePublicKey('abcd')).toMatch(/32 bytes/u);
  });

  it('reads status.journal, and names what is wrong with it', () => {
    expect(statusJournalCheckpoint(undefined)).toBeUndefined();
    expect(statusJournalCheckpoint({ head: 3 })).toBeUndefined();
    expect(statusJournalCheckpoint({ head: 3, lastSignedRoot: 'zz' })).toMatch(
      /^status.journal does not read/u,
    );
  });
});
