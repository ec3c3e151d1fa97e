import { afterEach, beforeEach, describe, expect, it } from '@jest/globals';

import { decodePayload, encodePayload, EventKind } from '../../common/event-kinds';
import { isAppError } from '../../common/errors';
import { toHex } from '../journal/hex';
import { verifyInclusion } from '../journal/inclusion-proof';
import { LeafHasher } from '../journal/leaf-digest';
import { nodeSha256 } from '../journal/node-sha256';
import { JournalStore } from './journal-store';
import type { AppendEvent } from './journal-store-types';
import { eventKey } from './store-keys';
import { collect, editRaw, message, tempDir, testSigner } from './testdata/fixtures';

/*
 * Erasure (docs/state-plane.md, "Erasure"; docs/journal-format.md, "Erasure") against the
 * real LevelDB. The journal: 3 batches of [message_received, tool_result] + signed_root,
 * so roots sit at 2, 5 and 8 and the head is 9; every payload is real protobuf.
 */

const key = testSigner(0);
const P = 'conv-erase';
const leaves = new LeafHasher(nodeSha256);

function toolResult(n: number): AppendEvent {
  return {
    kind: EventKind.ToolResult,
    payload: encodePayload(EventKind.ToolResult, {
      turnId: `turn-${String(n)}`,
      toolCallId: `call-${String(n)}`,
      content: `the secret result ${String(n)}`,
      isError: false,
      denied: false,
      thread: '',
      delegate: '',
    }),
  };
}

let dir: { path: string; remove: () => Promise<void> };
let store: JournalStore;
const asAdmin = { actor: 'admin@example.com', reason: 'erasure request 7 (GDPR art. 17)' };

beforeEach(async () => {
  dir = await tempDir();
  store = new JournalStore({ location: dir.path, signer: key });
  await store.open();
  let head = 0;
  for (let b = 0; b < 3; b++) {
    head = (await store.append(P, head, [message(`personal ${String(b)}`), toolResult(b)])).head;
  }
  expect(head).toBe(9);
});

afterEach(async () => {
  await store.close();
  await dir.remove();
});

async function reopen(): Promise<void> {
  await store.close();
  store = new JournalStore({ location: dir.path, signer: key });
  await store.open();
}

/** The AppError a call fails with. */
async function refusal(work: Promise<unknown>): Promise<{ code: string; message: string }> {
  try {
    await work;
  } catch (error) {
    if (isAppError(error)) return { code: error.code, message: error.message };
    throw error;
  }
  throw new Error('the call did not fail');
}

describe('erase', () => {
  it('erases a message and a tool result: they read as excised, every root and proof still verifies, the record says who, why, when and what', async () => {
    const before = await collect(store.read(P));
    const messageLeaf = leaves.digest(3, before[3]!.kind, before[3]!.payload);
    const resultLeaf = leaves.digest(1, before[1]!.kind, before[1]!.payload);
    const oldRoot = (await store.proof(P, 3, 5)).signedRoot;

    const result = await store.erase(P, {
      ...asAdmin,
      positions: [3, 1],
      now: () => 1_700_000_000_000,
    });
    expect(result).toMatchObject({ dryRun: false, head: 12 });
    expect(result.erased.map((e) => [e.position, e.kind, e.turnId, toHex(e.leaf)])).toEqual([
      [1, EventKind.ToolResult, 'turn-0', toHex(resultLeaf)],
      [3, EventKind.MessageReceived, 't', toHex(messageLeaf)],
    ]);
    expect(result.signedRoot).toMatchObject({ position: 11, version: 2, partition: P });

    await reopen();
    expect(await store.verify(P)).toMatchObject({
      ok: true,
      excised: [1, 3],
      erased: [1, 3],
      leafCount: 12,
    });
    const events = await collect(store.read(P));
    expect(events[3]).toMatchObject({ kind: '', payload: new Uint8Array(0) });
    expect(toHex(events[3]!.excisedLeaf!)).toBe(toHex(messageLeaf));
    expect(events[1]!.excisedLeaf).toBeDefined();
    // Nothing of the erased content is left in the store's bytes of those entries.
    const raw = Buffer.concat(await collect(store.export(P))).toString('utf8');
    expect(raw).not.toContain(Buffer.from('personal 1').toString('base64'));
    expect(decodePayload(EventKind.Excision, events[10]!.payload)).toEqual({
      position: 3,
      leafDigest: Buffer.from(messageLeaf),
      actor: asAdmin.actor,
      reason: asAdmin.reason,
      excisedAtMs: 1_700_000_000_000,
      problem: '',
      erased: true,
      erasedKind: EventKind.MessageReceived,
      turnId: 't',
    });
    // The root signed before the erasure still proves the erased position.
    const proof = await store.proof(P, 3, 5);
    expect(toHex(proof.signedRoot.root)).toBe(toHex(oldRoot.root));
    expect(toHex(proof.leaf)).toBe(toHex(messageLeaf));
    expect(() =>
      verifyInclusion(nodeSha256, proof.proof, messageLeaf, proof.signedRoot.root),
    ).not.toThrow();
    // The conversation goes on.
    expect((await store.append(P, 12, [message('after')])).head).toBe(14);
    expect(await store.verify(P)).toMatchObject({ ok: true, erased: [1, 3] });
  });

  it('takes every summary that covers an erased message with it, and leaves the others', async () => {
    const summary = (from: number, text: string): AppendEvent => ({
      kind: EventKind.Summary,
      payload: encodePayload(EventKind.Summary, {
        fromPosition: from,
        toPosition: from,
        previousPosition: 0,
        model: 'm',
        maxTokens: 64,
        requestSha256: Buffer.alloc(32),
        text,
        inputTokens: 1,
        outputTokens: 1,
        createdAtMs: 1,
      }),
    });
    // 9: covers 0..8; 11: covers 3..10; 13: covers 6..12, so not position 3.
    let head = (await store.append(P, 9, [summary(0, 'all of it')])).head;
    head = (await store.append(P, head, [summary(3, 'from the second')])).head;
    head = (await store.append(P, head, [summary(6, 'from the third')])).head;
    expect(head).toBe(15);
    // A tool result is not what a summary is made of (the user's text and the reply): it
    // takes no summary with it.
    const toolResult = await store.erase(P, { ...asAdmin, positions: [1] });
    expect(toolResult.erased.map((e) => e.position)).toEqual([1]);
    const result = await store.erase(P, { ...asAdmin, positions: [3] });
    expect(result.erased.map((e) => [e.position, e.kind])).toEqual([
      [3, EventKind.MessageReceived],
      [9, EventKind.Summary],
      [11, EventKind.Summary],
    ]);
    expect(await store.verify(P)).toMatchObject({ ok: true, erased: [1, 3, 9, 11] });
    const events = await collect(store.read(P));
    expect(events[13]?.kind).toBe(EventKind.Summary);
    const raw = Buffer.concat(await collect(store.export(P))).toString('utf8');
    expect(raw).not.toContain(Buffer.from('from the second').toString('base64'));
  });

  it('a dry run checks and writes nothing', async () => {
    const dry = await store.erase(P, { ...asAdmin, positions: [4], dryRun: true });
    expect(dry).toMatchObject({ dryRun: true, head: 9 });
    expect(dry.erased.map((e) => e.position)).toEqual([4]);
    expect(dry.message).toContain('nothing was written');
    expect(store.head(P).head).toBe(9);
    expect((await collect(store.read(P, 4, 1)))[0]!.kind).toBe(EventKind.ToolResult);
  });

  it.each([
    ['a signed_root', [2], /position 2 cannot be erased: it is a "signed_root" entry/u],
    ['a position at the head', [9], /position 9 is not below the head/u],
    ['a position far beyond the head', [1000], /position 1000 is not below the head/u],
  ])('refuses %s and writes nothing', async (_name, positions, pattern) => {
    const got = await refusal(store.erase(P, { ...asAdmin, positions }));
    expect(got.message).toMatch(pattern);
    expect(store.head(P).head).toBe(9);
  });

  it('refuses the whole call when one position may not be erased, naming each refused one', async () => {
    const got = await refusal(store.erase(P, { ...asAdmin, positions: [0, 2, 5] }));
    expect(got.code).toBe('failed_precondition');
    expect(got.message).toContain('position 2 cannot be erased');
    expect(got.message).toContain('position 5 cannot be erased');
    expect(got.message).not.toContain('position 0 cannot');
    expect(store.head(P).head).toBe(9);
    expect((await collect(store.read(P, 0, 1)))[0]!.kind).toBe(EventKind.MessageReceived);
  });

  it('refuses an entry already erased, and an excision record', async () => {
    await store.erase(P, { ...asAdmin, positions: [0] });
    const again = await refusal(store.erase(P, { ...asAdmin, positions: [0] }));
    expect(again.message).toContain('position 0 cannot be erased: it is already excised');
    const record = await refusal(store.erase(P, { ...asAdmin, positions: [9] }));
    expect(record.message).toContain('it is a "excision" entry');
    expect(store.head(P).head).toBe(11);
  });

  it.each([
    ['no positions', { positions: [] }, /at least one position/u],
    ['a repeated position', { positions: [1, 1] }, /names 1 twice/u],
    ['a negative position', { positions: [-1] }, /non-negative integer/u],
    ['no actor', { positions: [1], actor: ' ' }, /an erasure needs an actor/u],
    ['no reason', { positions: [1], reason: '' }, /an erasure needs a reason/u],
  ])('refuses %s as invalid_argument', async (_name, options, pattern) => {
    const got = await refusal(store.erase(P, { ...asAdmin, ...options }));
    expect(got).toMatchObject({ code: 'invalid_argument' });
    expect(got.message).toMatch(pattern);
    expect(store.head(P).head).toBe(9);
  });

  it('refuses an unreadable entry (repair is for those) and a stale fencing token', async () => {
    await store.append(P, 9, [message('m')], { fencingToken: 5 });
    const fenced = await refusal(store.erase(P, { ...asAdmin, positions: [0], fencingToken: 4 }));
    expect(fenced.code).toBe('fenced');
    await store.close();
    await editRaw(dir.path, async (db) => {
      const value = (await db.get(eventKey(P, 1)))!;
      await db.put(eventKey(P, 1), value.slice(0, value.length - 3));
    });
    store = new JournalStore({ location: dir.path, signer: key });
    await store.open();
    const got = await refusal(store.erase(P, { ...asAdmin, positions: [1], fencingToken: 5 }));
    expect(got.message).toContain('position 1 cannot be erased: it is unreadable');
  });

  it('refuses when the rest of the journal does not verify: nothing is written', async () => {
    await store.close();
    await editRaw(dir.path, async (db) => {
      const value = (await db.get(eventKey(P, 4)))!;
      await db.put(eventKey(P, 4), value.slice(0, value.length - 3));
    });
    store = new JournalStore({ location: dir.path, signer: key });
    await store.open();
    const got = await refusal(store.erase(P, { ...asAdmin, positions: [0] }));
    expect(got.code).toBe('data_loss');
    expect(got.message).toContain('erasing 0 would not leave a journal that verifies');
    expect(store.head(P).head).toBe(9);
  });
});
