import { afterEach, beforeEach, describe, expect, it } from '@jest/globals';

import { decodePayload, encodePayload, EventKind } from '../../common/event-kinds';
import { toHex } from '../journal/hex';
import { LeafHasher } from '../journal/leaf-digest';
import { leafNodePosition } from '../journal/mmr-layout';
import { nodeSha256 } from '../journal/node-sha256';
import { JournalStore } from './journal-store';
import type { AppendEvent } from './journal-store-types';
import { eventKey, nodeKey } from './store-keys';
import { collect, editRaw, message, tempDir, testSigner } from './testdata/fixtures';

/*
 * Repair (docs/journal-format.md, "Excision"; docs/state-plane.md, "Repair") against the
 * real LevelDB: bytes are corrupted on disk with the store closed, as a bad disk or a
 * careless hand would, then the reopened store finds, excises and records them. The
 * journal: 4 batches of [message_received, tool_call] + signed_root, so roots sit at 2, 5,
 * 8 and 11 and the head is 12; every payload is real protobuf.
 */

const key = testSigner(0);
const P = 'conv-repair';
const leaves = new LeafHasher(nodeSha256);

function toolCall(n: number): AppendEvent {
  return {
    kind: EventKind.ToolCall,
    payload: encodePayload(EventKind.ToolCall, {
      turnId: 't',
      step: n,
      toolCallId: `call-${String(n)}`,
      toolName: 'calculator',
      argsJson: `{"expression":"${String(n)} + ${String(n)}"}`,
      effect: 0,
      approvalRequestId: '',
      agent: '',
      thread: '',
      depth: 0,
    }),
  };
}

let dir: { path: string; remove: () => Promise<void> };
let store: JournalStore;

beforeEach(async () => {
  dir = await tempDir();
  store = new JournalStore({ location: dir.path, signer: key });
  await store.open();
  let head = 0;
  for (let b = 0; b < 4; b++) {
    head = (await store.append(P, head, [message(`m${String(b)}`), toolCall(b)])).head;
  }
  expect(head).toBe(12);
  await store.close();
});

afterEach(async () => {
  await store.close();
  await dir.remove();
});

async function reopen(edit?: Parameters<typeof editRaw>[1]): Promise<JournalStore> {
  await store.close();
  if (edit !== undefined) await editRaw(dir.path, edit);
  store = new JournalStore({ location: dir.path, signer: key });
  await store.open();
  return store;
}

/** Truncates the payload of the event at `position`, so it no longer decodes. */
function breakPayload(position: number): Parameters<typeof editRaw>[1] {
  return async (db) => {
    const value = (await db.get(eventKey(P, position)))!;
    await db.put(eventKey(P, position), value.slice(0, value.length - 3));
  };
}

const repairAs = { actor: 'admin@example.com', reason: 'disk corruption, ticket 42' };

describe('repair', () => {
  it('excises an entry whose payload no longer decodes; verify, reads and appends then work', async () => {
    await reopen(breakPayload(4));
    const before = await store.verify(P);
    expect(before.failure).toMatchObject({ position: 5, reason: 'event_changed' });
    const signedLeaf = (await collect(store.read(P, 4, 1)))[0]!;
    expect(() => decodePayload(EventKind.ToolCall, signedLeaf.payload)).toThrow();

    const dry = await store.repair(P, { ...repairAs, dryRun: true });
    expect(dry).toMatchObject({ dryRun: true, head: 12 });
    expect(dry.excised.map((e) => [e.position, e.problem])).toEqual([
      [4, 'its payload does not decode as tool_call'],
    ]);
    expect(dry.message).toContain('nothing was written');
    expect(store.head(P).head).toBe(12);
    expect((await store.verify(P)).ok).toBe(false);

    const result = await store.repair(P, { ...repairAs, now: () => 1_700_000_000_000 });
    expect(result).toMatchObject({ dryRun: false, head: 14 });
    expect(result.excised).toHaveLength(1);
    expect(result.signedRoot).toMatchObject({ position: 13, version: 2, partition: P });

    // Survives a restart: the batch is durable and the partition opens.
    await reopen();
    const after = await store.verify(P);
    expect(after).toMatchObject({ ok: true, excised: [4], leafCount: 14 });
    const events = await collect(store.read(P));
    expect(events[4]).toMatchObject({
      position: 4,
      kind: '',
      excisedLeaf: result.excised[0]!.leaf,
    });
    expect(events[12]!.kind).toBe(EventKind.Excision);
    expect(decodePayload(EventKind.Excision, events[12]!.payload)).toEqual({
      position: 4,
      leafDigest: Buffer.from(result.excised[0]!.leaf),
      actor: repairAs.actor,
      reason: repairAs.reason,
      excisedAtMs: 1_700_000_000_000,
      problem: 'its payload does not decode as tool_call',
      erased: false,
      erasedKind: '',
      turnId: '',
    });
    // The kept digest is the one the roots were signed over: a proof of 4 still holds.
    const proof = await store.proof(P, 4, 5);
    expect(toHex(proof.leaf)).toBe(toHex(result.excised[0]!.leaf));

    const next = await store.append(P, 14, [message('after repair')]);
    expect(next.head).toBe(16);
    expect(await store.verify(P)).toMatchObject({ ok: true, excised: [4], leafCount: 16 });

    // The export carries the excised entry as such.
    const lines = Buffer.concat(await collect(store.export(P)))
      .toString('utf8')
      .trimEnd()
      .split('\n')
      .map((l): unknown => JSON.parse(l));
    expect(lines[5]).toEqual({
      position: 4,
      excised: true,
      leafHex: toHex(result.excised[0]!.leaf),
    });
  });

  it('excises an entry that still decodes but no longer hashes to its signed leaf', async () => {
    await reopen(async (db) => {
      const value = (await db.get(eventKey(P, 3)))!.slice();
      // A byte inside the message text: still valid protobuf, another leaf digest.
      value[value.length - 2]! ^= 0x01;
      await db.put(eventKey(P, 3), value);
    });
    const result = await store.repair(P, repairAs);
    expect(result.excised.map((e) => [e.position, e.problem])).toEqual([
      [3, 'its bytes no longer hash to the leaf digest that was signed'],
    ]);
    expect(await store.verify(P)).toMatchObject({ ok: true, excised: [3] });
  });

  it('excises several damaged entries, a deleted one included, in one batch', async () => {
    await reopen(async (db) => {
      await breakPayload(1)(db);
      await db.del(eventKey(P, 7));
    });
    const result = await store.repair(P, repairAs);
    expect(result.excised.map((e) => e.position)).toEqual([1, 7]);
    expect(result.excised[1]!.problem).toBe('the entry is missing from the store');
    expect(result.head).toBe(15);
    expect(await store.verify(P)).toMatchObject({ ok: true, excised: [1, 7] });
  });

  it('is a no-op that says so on an undamaged partition', async () => {
    await reopen();
    const result = await store.repair(P, repairAs);
    expect(result).toMatchObject({ excised: [], head: 12 });
    expect(result.message).toContain('nothing to repair');
    expect(store.head(P).head).toBe(12);
  });

  it('writes nothing when the damage is not confined to entries (a changed MMR leaf node)', async () => {
    await reopen(async (db) => {
      await breakPayload(4)(db);
      await db.put(nodeKey(P, leafNodePosition(4)), new Uint8Array(32).fill(9));
    });
    await expect(store.repair(P, repairAs)).rejects.toMatchObject({
      code: 'data_loss',
      message: expect.stringContaining('would not leave a journal that verifies'),
    });
    expect(store.head(P).head).toBe(12);
    const stored = (await collect(store.read(P, 4, 1)))[0]!;
    expect(stored.excisedLeaf).toBeUndefined();
  });

  it('is fenced like an append, and needs an actor and a reason', async () => {
    await reopen(breakPayload(4));
    await store.append(P, 12, [message('lease 3')], { fencingToken: 3 });
    await expect(store.repair(P, { ...repairAs, fencingToken: 2 })).rejects.toMatchObject({
      code: 'fenced',
      details: { fencingToken: 2, highestFencingToken: 3 },
    });
    await expect(store.repair(P, { ...repairAs, actor: ' ' })).rejects.toMatchObject({
      code: 'invalid_argument',
      details: { field: 'an actor' },
    });
    await expect(store.repair(P, { ...repairAs, reason: '' })).rejects.toMatchObject({
      code: 'invalid_argument',
    });
    expect(store.head(P).head).toBe(14);
    const result = await store.repair(P, { ...repairAs, fencingToken: 3 });
    expect(result.excised.map((e) => e.position)).toEqual([4]);
  });

  it('refuses an excision marker written by hand: verify names it unrecorded', async () => {
    // Someone with the volume hides entry 4 behind its own, correct leaf digest.
    await reopen(async (db) => {
      const value = (await db.get(eventKey(P, 4)))!;
      const kindLength = value[0]!;
      const kind = Buffer.from(value.subarray(1, 1 + kindLength)).toString('utf8');
      const leaf = leaves.digest(4, kind, value.subarray(1 + kindLength));
      await db.put(eventKey(P, 4), Uint8Array.from([0, ...leaf]));
    });
    const result = await store.verify(P);
    expect(result.failure).toMatchObject({ position: 4, reason: 'unrecorded_excision' });
  });

  it('refuses appends of excision events by any caller', async () => {
    await reopen();
    await expect(
      store.append(P, 12, [{ kind: EventKind.Excision, payload: new Uint8Array(0) }]),
    ).rejects.toMatchObject({ code: 'invalid_argument' });
  });
});

describe('verify with a checkpoint', () => {
  it('fails a journal rolled back below a checkpoint taken earlier, and passes without one', async () => {
    await reopen();
    const checkpoint = store.head(P);
    await store.close();
    // Roll back: cut the last batch (events 9 to 11), as restoring an old backup would,
    // and rewrite the tail so the partition opens.
    const old = dir;
    dir = await tempDir();
    store = new JournalStore({ location: dir.path, signer: key });
    await store.open();
    let head = 0;
    for (let b = 0; b < 3; b++) {
      head = (await store.append(P, head, [message(`m${String(b)}`), toolCall(b)])).head;
    }
    await old.remove();
    const trusted = {
      head: checkpoint.head,
      root: checkpoint.signedRoot!.root,
      keyId: checkpoint.signedRoot!.keyId,
    };
    expect(await store.verify(P)).toMatchObject({ ok: true, checkpointChecked: false });
    const result = await store.verify(P, { checkpoint: trusted });
    expect(result).toMatchObject({ ok: false, checkpointChecked: true });
    expect(result.failure).toMatchObject({ position: 9, reason: 'rolled_back' });
    expect(result.failure?.message).toContain('had 12 entries');
    expect(result.failure?.message).toContain('it has 9');
  });
});
