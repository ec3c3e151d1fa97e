import { afterEach, beforeEach, describe, expect, it } from '@jest/globals';

import { decodePayload, encodePayload, EventKind } from '../../common/event-kinds';
import { isAppError } from '../../common/errors';
import { toHex } from '../journal/hex';
import { LeafHasher } from '../journal/leaf-digest';
import { nodeSha256 } from '../journal/node-sha256';
import { JournalStore } from './journal-store';
import type { AppendEvent } from './journal-store-types';
import { collect, message, tempDir, testSigner } from './testdata/fixtures';

/*
 * A person's memory clear (docs/state-plane.md, "Memory clears") against the real LevelDB.
 * The journal: [message_received, memory_set city=Lisbon] + root (0-2), then
 * [memory_set city=Porto, memory_set food=fish] + root (3-5); the head is 6.
 */

const key = testSigner(0);
const P = 'conv-memory-clear';
const leaves = new LeafHasher(nodeSha256);
const NOW = 1_700_000_000_000;

function memorySet(k: string, value: string): AppendEvent {
  return {
    kind: EventKind.MemorySet,
    payload: encodePayload(EventKind.MemorySet, {
      key: k,
      value,
      attribution: { caller: 'alice', participants: [], persona: '', session: '' },
      turnId: `turn-${k}`,
      toolCallId: 'call-1',
      setAtMs: 1,
    }),
  };
}

/** A person's clear of `k` (empty: all) naming `setPositions`. */
function cleared(k: string, setPositions: number[], caller = 'kubernetes:dave'): Uint8Array {
  return encodePayload(EventKind.MemoryCleared, {
    key: k,
    attribution: { caller, participants: [], persona: '', session: '' },
    clearedAtMs: NOW,
    setPositions,
    turnId: '',
    toolCallId: '',
  });
}

let dir: { path: string; remove: () => Promise<void> };
let store: JournalStore;

beforeEach(async () => {
  dir = await tempDir();
  store = new JournalStore({ location: dir.path, signer: key });
  await store.open();
  await store.append(P, 0, [message('remember where I live'), memorySet('city', 'Lisbon')]);
  await store.append(P, 3, [memorySet('city', 'Porto'), memorySet('food', 'fish')]);
});

afterEach(async () => {
  await store.close();
  await dir.remove();
});

async function refusal(work: Promise<unknown>): Promise<{ code: string; message: string }> {
  try {
    await work;
  } catch (error) {
    if (isAppError(error)) return { code: error.code, message: error.message };
    throw error;
  }
  throw new Error('the call did not fail');
}

async function exportText(): Promise<string> {
  return Buffer.concat(await collect(store.export(P))).toString('utf8');
}

describe('clearMemory', () => {
  it('commits the clear and erases the memory_set events of its key in one batch: records say who and why, the journal verifies, the values are gone', async () => {
    const before = await collect(store.read(P));
    const exportedBefore = await exportText();
    const lisbonLeaf = leaves.digest(1, before[1]!.kind, before[1]!.payload);
    const result = await store.clearMemory(P, 6, cleared('city', [1, 3]), { now: () => NOW });
    // memory_cleared at 6, the two records at 7 and 8, the signed root at 9.
    expect(result).toMatchObject({ firstPosition: 6, head: 10 });
    expect(result.erased.map((e) => [e.position, e.kind, e.turnId])).toEqual([
      [1, EventKind.MemorySet, 'turn-city'],
      [3, EventKind.MemorySet, 'turn-city'],
    ]);
    expect(await store.verify(P)).toMatchObject({ ok: true, erased: [1, 3], leafCount: 10 });
    const events = await collect(store.read(P));
    expect(events[6]!.kind).toBe(EventKind.MemoryCleared);
    expect(decodePayload(EventKind.MemoryCleared, events[6]!.payload).setPositions).toEqual([1, 3]);
    expect(toHex(events[1]!.excisedLeaf!)).toBe(toHex(lisbonLeaf));
    expect(decodePayload(EventKind.Excision, events[7]!.payload)).toEqual({
      position: 1,
      leafDigest: Buffer.from(lisbonLeaf),
      actor: 'kubernetes:dave',
      reason: 'memory clear of "city"',
      excisedAtMs: NOW,
      problem: '',
      erased: true,
      erasedKind: EventKind.MemorySet,
      turnId: 'turn-city',
    });
    const text = await exportText();
    for (const gone of ['Lisbon', 'Porto']) {
      expect(exportedBefore).toContain(toHex(memorySet('city', gone).payload));
      expect(text).not.toContain(toHex(memorySet('city', gone).payload));
      expect(text).not.toContain(toHex(Buffer.from(gone)));
    }
    // The other key and the message stay.
    expect(events[4]!.kind).toBe(EventKind.MemorySet);
    expect(events[0]!.kind).toBe(EventKind.MessageReceived);
  });

  it('a clear of all erases the memory_set events of every key', async () => {
    const result = await store.clearMemory(P, 6, cleared('', [1, 3, 4]));
    expect(result.erased.map((e) => e.position)).toEqual([1, 3, 4]);
    expect(await store.verify(P)).toMatchObject({ ok: true, erased: [1, 3, 4] });
  });

  it('refuses a clear that names a message, another key or a signed root: nothing is written', async () => {
    const head = store.head(P).head;
    for (const [k, positions, what] of [
      ['city', [1, 0], 'position 0: it is a "message_received" entry'],
      ['city', [1, 4], 'position 4: it sets "food", not "city"'],
      ['', [2], 'position 2: it is a "signed_root" entry'],
      ['city', [1, 99], 'position 99: there is no entry there'],
    ] as const) {
      const refused = await refusal(store.clearMemory(P, head, cleared(k, [...positions])));
      expect(refused.code).toBe('permission_denied');
      expect(refused.message).toContain(what);
      expect(refused.message).toContain('nothing was written');
    }
    expect(store.head(P).head).toBe(head);
    const events = await collect(store.read(P));
    expect(events.filter((e) => e.excisedLeaf !== undefined)).toEqual([]);
    expect(await store.verify(P)).toMatchObject({ ok: true, excised: [] });
  });

  it('refuses a memory_set erased already, a stale head, a lower fencing token and a clear by nobody', async () => {
    await store.erase(P, { positions: [1], actor: 'admin', reason: 'request 1', fencingToken: 2 });
    const head = store.head(P).head;
    expect(
      (await refusal(store.clearMemory(P, head, cleared('city', [1, 3]), { fencingToken: 2 })))
        .message,
    ).toContain('position 1: it is excised already');
    expect(
      (await refusal(store.clearMemory(P, 6, cleared('city', [3]), { fencingToken: 2 }))).code,
    ).toBe('conflict');
    expect(
      (await refusal(store.clearMemory(P, head, cleared('city', [3]), { fencingToken: 1 }))).code,
    ).toBe('fenced');
    expect(
      (await refusal(store.clearMemory(P, head, cleared('city', [3], ''), { fencingToken: 2 })))
        .code,
    ).toBe('invalid_argument');
    expect(
      (await refusal(store.clearMemory(P, head, cleared('city', []), { fencingToken: 2 }))).code,
    ).toBe('invalid_argument');
    expect(store.head(P).head).toBe(head);
  });
});
