import { afterEach, beforeEach, describe, expect, it } from '@jest/globals';

import { AppError } from '../../common/errors';
import { toHex } from '../journal/hex';
import { JournalStore } from './journal-store';
import { encodeFence, fenceKey } from './store-keys';
import {
  collect,
  editRaw,
  instrumentedKv,
  message,
  tempDir,
  testSigner,
  type InstrumentedKv,
} from './testdata/fixtures';

// The fencing mark on real LevelDB: an append whose fencing token is lower than the
// highest one the partition accepted is refused before anything is written.

const P = 'conv-0b6c1f5e-7d2a-4c3e-9a8b-5f1e2d3c4b5a';
const keyA = testSigner(0);
const keyB = testSigner(1);

let dir: { path: string; remove: () => Promise<void> };
let kv: InstrumentedKv;
let store: JournalStore;

async function openStore(): Promise<JournalStore> {
  kv = instrumentedKv(dir.path);
  store = new JournalStore({ location: dir.path, signer: keyA, previousSigners: [keyB], kv });
  await store.open();
  return store;
}

async function reopen(): Promise<JournalStore> {
  await store.close();
  return openStore();
}

async function rejection(promise: Promise<unknown>): Promise<AppError> {
  try {
    await promise;
  } catch (error) {
    if (error instanceof AppError) return error;
    throw error;
  }
  throw new Error('expected a rejection');
}

/** Head, every event and the number of writes: what a refused append must leave alone. */
async function observed(partition: string): Promise<unknown> {
  return {
    head: store.head(partition),
    events: (await collect(store.read(partition))).map((e) => [
      e.position,
      e.kind,
      toHex(e.payload),
    ]),
    writes: kv.writes.length,
  };
}

beforeEach(async () => {
  dir = await tempDir();
});

afterEach(async () => {
  await store.close();
  await dir.remove();
});

describe('fencing', () => {
  it('refuses a lower token with `fenced`, naming the partition and both tokens, and writes nothing', async () => {
    await openStore();
    await store.append(P, 0, [message('holder 7')], { fencingToken: 7 });
    const before = await observed(P);
    // At the current head: the compare-and-swap alone would let this append through.
    const error = await rejection(
      store.append(P, 2, [message('stale holder')], { fencingToken: 6 }),
    );
    expect(error.code).toBe('fenced');
    expect(error.details).toEqual({ partition: P, fencingToken: 6, highestFencingToken: 7 });
    expect(error.message).toContain(P);
    expect(error.message).toContain('fencing token 6');
    expect(error.message).toContain('token 7 has already written');
    expect(error.message).toContain(
      "this writer lost the conversation's lease; a newer holder has written",
    );
    expect(await observed(P)).toEqual(before);
  });

  it('answers a stale token at a stale head with `fenced`, not a conflict to retry', async () => {
    await openStore();
    await store.append(P, 0, [message('old holder')], { fencingToken: 1 });
    await store.append(P, 2, [message('new holder')], { fencingToken: 2 });
    const error = await rejection(store.append(P, 2, [message('late')], { fencingToken: 1 }));
    expect(error.code).toBe('fenced');
    expect(store.head(P).head).toBe(4);
  });

  it('accepts an equal token, and a higher one raises the mark for everyone after', async () => {
    await openStore();
    await store.append(P, 0, [message('a')], { fencingToken: 3 });
    expect((await store.append(P, 2, [message('b')], { fencingToken: 3 })).head).toBe(4);
    expect((await store.append(P, 4, [message('c')], { fencingToken: 5 })).head).toBe(6);
    expect((await rejection(store.append(P, 6, [message('d')], { fencingToken: 3 }))).code).toBe(
      'fenced',
    );
    expect((await store.append(P, 6, [message('e')], { fencingToken: 5 })).head).toBe(8);
  });

  it('writes the raised mark in the batch that raised it, and only then', async () => {
    await openStore();
    const fence = toHex(fenceKey(P));
    const keysOfLastWrite = (): string[] => kv.writes.at(-1)!.ops.map((op) => toHex(op.key));
    await store.append(P, 0, [message('a')], { fencingToken: 4 });
    const raising = kv.writes.at(-1)!;
    expect(raising.sync).toBe(true);
    const put = raising.ops.find((op) => toHex(op.key) === fence);
    expect(put?.type === 'put' && toHex(put.value)).toBe(toHex(encodeFence(4)));
    await store.append(P, 2, [message('b')], { fencingToken: 4 });
    expect(keysOfLastWrite()).not.toContain(fence);
    // The mark is not an event: reads and verification see only the journal.
    expect((await collect(store.read(P))).map((e) => e.position)).toEqual([0, 1, 2, 3]);
    expect((await store.verify(P)).ok).toBe(true);
  });

  it('treats 0 (no token) as the lowest: accepted while the mark is 0, refused after', async () => {
    await openStore();
    await store.append(P, 0, [message('first lease')]);
    await store.append(P, 2, [message('first lease again')], { fencingToken: 0 });
    await store.append(P, 4, [message('taken over')], { fencingToken: 1 });
    const error = await rejection(store.append(P, 6, [message('old client')]));
    expect(error.code).toBe('fenced');
    expect(error.details).toMatchObject({ fencingToken: 0, highestFencingToken: 1 });
  });

  it('keeps the mark across a restart', async () => {
    await openStore();
    await store.append(P, 0, [message('a')], { fencingToken: 9 });
    await store.append('conv-other', 0, [message('b')]);
    await reopen();
    const before = await observed(P);
    expect((await rejection(store.append(P, 2, [message('x')], { fencingToken: 8 }))).code).toBe(
      'fenced',
    );
    expect(await observed(P)).toEqual(before);
    expect((await store.append(P, 2, [message('y')], { fencingToken: 9 })).head).toBe(4);
    // Another partition has its own mark.
    expect((await store.append('conv-other', 2, [message('z')])).head).toBe(4);
  });

  it('does not raise the mark when the durable write fails, in memory or on disk', async () => {
    await openStore();
    await store.append(P, 0, [message('a')], { fencingToken: 1 });
    kv.failNext = () => {
      throw new Error('disk on fire');
    };
    expect((await rejection(store.append(P, 2, [message('b')], { fencingToken: 5 }))).code).toBe(
      'unavailable',
    );
    // The holder with token 1 was never fenced: nothing with 5 became durable.
    expect((await store.append(P, 2, [message('c')], { fencingToken: 1 })).head).toBe(4);
    await reopen();
    expect((await store.append(P, 4, [message('d')], { fencingToken: 1 })).head).toBe(6);
  });

  it('keeps the mark through a key hand-over, which carries no token', async () => {
    await openStore();
    await store.append(P, 0, [message('a')], { fencingToken: 2 });
    const rotated = await store.rotateKey(P, keyB);
    expect(rotated?.head).toBe(4);
    await reopen();
    expect((await rejection(store.append(P, 4, [message('x')], { fencingToken: 1 }))).code).toBe(
      'fenced',
    );
  });

  it('refuses one fenced append of a group commit and writes the others together', async () => {
    await openStore();
    const others = ['conv-g1', 'conv-g2', 'conv-g3'];
    await store.append(P, 0, [message('setup')], { fencingToken: 2 });
    const before = store.stats();
    const outcomes = await Promise.allSettled([
      store.append(P, 2, [message('stale')], { fencingToken: 1 }),
      ...others.map((p) => store.append(p, 0, [message(p)], { fencingToken: 1 })),
    ]);
    const [fenced, ...rest] = outcomes;
    expect(fenced?.status === 'rejected' && (fenced.reason as AppError).code).toBe('fenced');
    expect(rest.map((o) => o.status === 'fulfilled' && o.value.head)).toEqual([2, 2, 2]);
    const stats = store.stats();
    // The three survivors shared one durable write; the refused one never reached it.
    expect(stats.durableWrites - before.durableWrites).toBe(1);
    expect(stats.commits - before.commits).toBe(3);
    expect(store.head(P).head).toBe(2);
  });

  it('refuses a token that is not a non-negative integer, before anything is written', async () => {
    await openStore();
    for (const token of [-1, 1.5, Number.NaN, 2 ** 53]) {
      const error = await rejection(store.append(P, 0, [message('x')], { fencingToken: token }));
      expect(error.code).toBe('invalid_argument');
      expect(error.message).toContain('fencing token must be a non-negative integer');
    }
    expect(store.head(P).head).toBe(0);
  });

  it('refuses a partition whose stored mark is damaged, and opens the others', async () => {
    await openStore();
    await store.append(P, 0, [message('a')], { fencingToken: 3 });
    await store.append('conv-fine', 0, [message('b')], { fencingToken: 3 });
    await store.close();
    await editRaw(dir.path, (db) => db.put(fenceKey(P), Uint8Array.of(3)));
    const report = await openStore().then((s) => s.open());
    expect(report.refused).toHaveLength(1);
    expect(report.refused[0]!.partition).toBe(P);
    expect(report.refused[0]!.problem).toContain('fencing mark is 1 bytes, not 8');
    expect((await rejection(store.append(P, 2, [message('x')], { fencingToken: 3 }))).code).toBe(
      'data_loss',
    );
    expect((await store.append('conv-fine', 2, [message('c')], { fencingToken: 3 })).head).toBe(4);
  });
});
