import { afterEach, beforeEach, describe, expect, it } from '@jest/globals';

import { AppError } from '../../common/errors';
import { decodePayload, EventKind } from '../../common/event-kinds';
import { toHex } from '../journal/hex';
import { verifyInclusion } from '../journal/inclusion-proof';
import { createNodeEd25519Verifier } from '../journal/node-ed25519';
import { nodeSha256 } from '../journal/node-sha256';
import { keyIdOf, signedRootMessageV2 } from '../journal/signed-root';
import { JournalStore } from './journal-store';
import type { JournalStoreOptions } from './journal-store-types';
import { mmrSize } from '../journal/mmr-layout';
import { eventKey, headKey, nodeKey } from './store-keys';
import {
  collect,
  editRaw,
  filler,
  instrumentedKv,
  message,
  tempDir,
  testSigner,
  type InstrumentedKv,
} from './testdata/fixtures';

const keyA = testSigner(0);
const keyB = testSigner(1);
const keyC = testSigner(2);
const idA = keyIdOf(nodeSha256, keyA.publicKey);
const idB = keyIdOf(nodeSha256, keyB.publicKey);
const verifier = createNodeEd25519Verifier();
const P = 'conv-3f2a9c1e-8b4d-4e0a-9c6f-2d7e5b1a0c93';

let dir: { path: string; remove: () => Promise<void> };
let kv: InstrumentedKv;
let store: JournalStore;

async function openStore(options: Partial<JournalStoreOptions> = {}): Promise<JournalStore> {
  // Only one LevelDB handle per directory: abstract-level opens a database as soon as it
  // is constructed, so an unused second handle could take the directory's lock first.
  if (options.kv === undefined) kv = instrumentedKv(dir.path);
  store = new JournalStore({ location: dir.path, signer: keyA, kv, ...options });
  await store.open();
  return store;
}

async function reopen(options: Partial<JournalStoreOptions> = {}): Promise<JournalStore> {
  await store.close();
  return openStore(options);
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

/** Everything observable about the store, to show a failed call changed nothing. */
interface Snapshot {
  readonly partitions: unknown[];
  readonly contents: unknown[];
  readonly writes: number;
}

async function snapshot(): Promise<Snapshot> {
  const partitions = store.listPartitions();
  const contents = await Promise.all(
    partitions
      .filter((p) => p.status === 'ok')
      .map(async (p) => ({
        head: store.head(p.partition),
        events: (await collect(store.read(p.partition))).map((e) => [
          e.position,
          e.kind,
          toHex(e.payload),
        ]),
      })),
  );
  return { partitions, contents, writes: kv.writes.length };
}

beforeEach(async () => {
  dir = await tempDir();
});

/** The last signed root of the same partition in another store holding `events`. */
async function openOther(events: Parameters<JournalStore['append']>[2]): Promise<Uint8Array> {
  const other = await tempDir();
  const elsewhere = new JournalStore({ location: other.path, signer: keyA });
  try {
    await elsewhere.open();
    return (await elsewhere.append(P, 0, events)).signedRoot.root;
  } finally {
    await elsewhere.close();
    await other.remove();
  }
}

afterEach(async () => {
  await store.close();
  await dir.remove();
});

describe('append', () => {
  it('appends a batch closed by a signed_root over every event before it', async () => {
    await openStore();
    const result = await store.append(P, 0, [
      message('hello'),
      filler(EventKind.TurnDispatched, 40),
    ]);
    expect(result).toMatchObject({ partition: P, firstPosition: 0, head: 3 });
    expect(result.signedRoot).toMatchObject({
      position: 2,
      leafCount: 2,
      keyId: idA,
      version: 2,
      partition: P,
    });
    expect(
      verifier.verify(
        keyA.publicKey,
        signedRootMessageV2(P, 2, result.signedRoot.root),
        result.signedRoot.signature,
      ),
    ).toBe(true);
    const events = await collect(store.read(P));
    expect(events.map((e) => [e.position, e.kind])).toEqual([
      [0, EventKind.MessageReceived],
      [1, EventKind.TurnDispatched],
      [2, EventKind.SignedRoot],
    ]);
    const last = events[2]!;
    const fields = decodePayload(EventKind.SignedRoot, last.payload);
    expect(fields.leafCount).toBe(2);
    expect(toHex(fields.root)).toBe(toHex(result.signedRoot.root));

    const second = await store.append(P, 3, [message('again')]);
    expect(second).toMatchObject({ firstPosition: 3, head: 5 });
    expect(store.head(P)).toEqual({ partition: P, head: 5, signedRoot: second.signedRoot });
  });

  it('writes events, nodes, signed_root and head record in ONE durable batch', async () => {
    await openStore();
    const before = kv.writes.length;
    await store.append(P, 0, [message('a'), message('b'), message('c')]);
    expect(kv.writes.length).toBe(before + 1);
    const write = kv.writes.at(-1)!;
    expect(write.sync).toBe(true);
    const keys = write.ops.map((op) => toHex(op.key));
    for (let p = 0; p < 4; p++) expect(keys).toContain(toHex(eventKey(P, p)));
    for (let n = 0; n < mmrSize(4); n++) expect(keys).toContain(toHex(nodeKey(P, n)));
    expect(keys).toContain(toHex(headKey(P)));
    expect(write.ops).toHaveLength(4 + mmrSize(4) + 1);
  });

  it('rejects a stale head with a conflict carrying the current head, and changes nothing', async () => {
    await openStore();
    await store.append(P, 0, [message('first')]);
    const before = await snapshot();
    const error = await rejection(store.append(P, 0, [message('late')]));
    expect(error.code).toBe('conflict');
    expect(error.details).toEqual({ partition: P, expectedHead: 0, head: 2 });
    expect(error.message).toContain('the head moved: expected 0, the head is 2');
    expect(await snapshot()).toEqual(before);
  });

  it('lets exactly one of two racing appends on the same head win', async () => {
    await openStore();
    await store.append(P, 0, [message('first')]);
    const outcomes = await Promise.allSettled([
      store.append(P, 2, [message('x')]),
      store.append(P, 2, [message('y')]),
    ]);
    expect(outcomes.map((o) => o.status).sort()).toEqual(['fulfilled', 'rejected']);
    const lost = outcomes.find((o) => o.status === 'rejected');
    expect(lost?.status === 'rejected' && lost.reason instanceof AppError && lost.reason.code).toBe(
      'conflict',
    );
    expect(store.head(P).head).toBe(4);
  });

  it('rejects a head from the future with a clear error, and changes nothing', async () => {
    await openStore();
    await store.append(P, 0, [message('first')]);
    const before = await snapshot();
    const error = await rejection(store.append(P, 7, [message('x')]));
    expect(error.code).toBe('failed_precondition');
    expect(error.message).toContain('expected head 7 is beyond the journal');
    expect(error.details).toEqual({ partition: P, expectedHead: 7, head: 2 });
    expect(await snapshot()).toEqual(before);
  });

  it('refuses an append that saw another last root at this head, and changes nothing', async () => {
    await openStore();
    const first = await store.append(P, 0, [message('first')]);
    const seen = first.signedRoot.root;
    // Same length as what the writer saw, other content: another copy of the journal.
    const elsewhere = await openOther([message('other')]);
    const before = await snapshot();
    const error = await rejection(store.append(P, 2, [message('x')], { expectedRoot: elsewhere }));
    expect(error.code).toBe('failed_precondition');
    expect(error.message).toContain('same length but other content');
    expect(error.details).toEqual({
      partition: P,
      reason: 'root_mismatch',
      head: 2,
      root: toHex(seen),
      expectedRoot: toHex(elsewhere),
    });
    expect(await snapshot()).toEqual(before);
    // The root it holds, or none given, appends as before.
    expect((await store.append(P, 2, [message('y')], { expectedRoot: seen })).head).toBe(4);
    expect((await store.append(P, 4, [message('z')])).head).toBe(6);
  });

  const invalid: [
    string,
    () => [string, number, { kind: string; payload: Uint8Array }[]],
    string,
  ][] = [
    [
      'an upper-case partition',
      () => ['conv-ABC', 0, [message('x')]],
      'partition name "conv-ABC" is not valid',
    ],
    [
      'a partition without the prefix',
      () => ['abc', 0, [message('x')]],
      'partition name "abc" is not valid',
    ],
    [
      'an empty id',
      () => ['conv-', 0, [message('x')]],
      'expected "conv-" followed by a Kubernetes uid',
    ],
    ['a leading dash', () => ['conv--a', 0, [message('x')]], 'is not valid'],
    ['a 64-character id', () => [`conv-${'a'.repeat(64)}`, 0, [message('x')]], 'is not valid'],
    ['a NUL byte', () => ['conv-a\u0000b', 0, [message('x')]], 'is not valid'],
    ['an empty batch', () => [P, 0, []], 'an append needs at least one event'],
    ['an unknown kind', () => [P, 0, [filler('chat_message', 3)]], 'unknown kind "chat_message"'],
    [
      'a signed_root from the caller',
      () => [P, 0, [filler(EventKind.SignedRoot, 3)]],
      'which only the store writes',
    ],
    [
      'a key_rotated from the caller',
      () => [P, 0, [message('a'), filler(EventKind.KeyRotated, 3)]],
      'event 1 is a key_rotated',
    ],
    [
      'an oversized payload',
      () => [P, 0, [filler(EventKind.ToolResult, 1024 + 1)]],
      'payload of 1025 bytes; the limit is 1024',
    ],
    [
      'too many events',
      () => [P, 0, Array.from({ length: 9 }, () => message('m'))],
      'at most 8 events, got 9',
    ],
    [
      'too many bytes',
      () => [P, 0, Array.from({ length: 5 }, () => filler(EventKind.ToolResult, 1000))],
      'at most 4096 payload bytes, got 5000',
    ],
    [
      'a negative head',
      () => [P, -1, [message('x')]],
      'expected head must be a non-negative integer',
    ],
    [
      'a fractional head',
      () => [P, 1.5, [message('x')]],
      'expected head must be a non-negative integer',
    ],
  ];
  it.each(invalid)(
    'rejects %s as invalid_argument and changes nothing',
    async (_name, args, text) => {
      await openStore({
        limits: { maxPayloadBytes: 1024, maxBatchEvents: 8, maxBatchBytes: 4096 },
      });
      await store.append(P, 0, [message('first')]);
      const before = await snapshot();
      const [partition, head, events] = args();
      const error = await rejection(store.append(partition, head, events));
      expect(error.code).toBe('invalid_argument');
      expect(error.message).toContain(text);
      expect(await snapshot()).toEqual(before);
    },
  );

  it('fails every append of a failed durable write and advances nothing; a retry succeeds', async () => {
    await openStore();
    const partitions = Array.from({ length: 8 }, (_, i) => `conv-fail-${String(i)}`);
    await Promise.all(partitions.map((p) => store.append(p, 0, [message('setup')])));
    const before = await snapshot();
    // Hold one write (an append to another partition) so the eight appends queue behind
    // it and share the next batch; that batch fails.
    let release: () => void = () => undefined;
    const gate = new Promise<void>((resolve) => {
      release = resolve;
    });
    const inner = kv.write.bind(kv);
    let calls = 0;
    kv.write = async (ops, sync) => {
      calls += 1;
      if (calls === 1) await gate;
      if (calls === 2) throw new Error('disk on fire');
      return inner(ops, sync);
    };
    const gated = store.append('conv-gate', 0, [message('gate')]);
    // Let the committer take the gate's commit alone (at the end of this turn) and block.
    await new Promise((resolve) => setImmediate(resolve));
    await new Promise((resolve) => setImmediate(resolve));
    expect(calls).toBe(1);
    const outcomes = Promise.allSettled(
      partitions.map((p) => store.append(p, 2, [message('doomed')])),
    );
    await new Promise((resolve) => setImmediate(resolve));
    release();
    expect((await gated).head).toBe(2);
    const settled = await outcomes;
    expect(calls).toBe(2);
    expect(settled.every((o) => o.status === 'rejected')).toBe(true);
    for (const o of settled) {
      if (o.status !== 'rejected' || !(o.reason instanceof AppError)) {
        throw new Error('expected AppError');
      }
      expect(o.reason.code).toBe('unavailable');
      expect(o.reason.message).toContain('a batch of 8 append(s)');
    }
    for (const p of partitions) expect(store.head(p).head).toBe(2);
    const after = await snapshot();
    expect(after.contents.slice(0, 8)).toEqual(before.contents);
    expect(store.stats().failedWrites).toBeGreaterThanOrEqual(1);
    kv.write = inner;
    const retried = await Promise.all(
      partitions.map((p) => store.append(p, 2, [message('retry')])),
    );
    expect(retried.map((r) => r.head)).toEqual(partitions.map(() => 4));
    for (const p of partitions) expect((await store.verify(p)).ok).toBe(true);
  });

  it('honours an aborted signal before writing', async () => {
    await openStore();
    const controller = new AbortController();
    controller.abort(new Error('caller went away'));
    const error = await rejection(
      store.append(P, 0, [message('x')], { signal: controller.signal }),
    );
    expect(error.code).toBe('cancelled');
    expect(store.head(P).head).toBe(0);
  });
});

describe('group commit', () => {
  it('writes appends that arrive in one turn of the event loop in one durable batch', async () => {
    await openStore();
    const partitions = Array.from({ length: 16 }, (_, i) => `conv-turn-${String(i)}`);
    const before = store.stats();
    // As requests read from one socket arrive: all in the same turn, none written yet.
    const heads = await Promise.all(partitions.map((p) => store.append(p, 0, [message(p)])));
    expect(heads.map((h) => h.head)).toEqual(partitions.map(() => 2));
    const stats = store.stats();
    expect(stats.durableWrites - before.durableWrites).toBe(1);
    expect(stats.appends - before.appends).toBe(16);
  });

  it('shares durable writes between concurrent appends to 64 partitions', async () => {
    await openStore();
    const partitions = Array.from(
      { length: 64 },
      (_, i) => `conv-${String(i).padStart(4, '0')}-group`,
    );
    const rounds = 8;
    const before = store.stats();
    await Promise.all(
      partitions.map(async (p) => {
        let head = 0;
        for (let r = 0; r < rounds; r++) {
          head = (
            await store.append(p, head, [
              message(`${p}/${String(r)}`),
              filler(EventKind.ModelCall, 200, r),
            ])
          ).head;
        }
      }),
    );
    const stats = store.stats();
    const appends = stats.appends - before.appends;
    const writes = stats.durableWrites - before.durableWrites;
    expect(appends).toBe(64 * rounds);
    // Grouping must be real: far fewer fsyncs than appends.
    expect(writes).toBeLessThan(appends / 4);
    expect(stats.largestGroup).toBeGreaterThan(8);

    await reopen();
    for (const p of partitions) {
      expect(store.head(p).head).toBe(rounds * 3);
      const result = await store.verify(p);
      expect(result).toMatchObject({ ok: true, leafCount: rounds * 3, signedRootCount: rounds });
      expect(result.unsealed.count).toBe(0);
    }
  });
});

describe('reads', () => {
  it('reads a window, stops at the head, and rejects a start beyond it', async () => {
    await openStore();
    let head = 0;
    for (let i = 0; i < 5; i++)
      head = (await store.append(P, head, [message(`m${String(i)}`)])).head;
    expect((await collect(store.read(P, 3, 4))).map((e) => e.position)).toEqual([3, 4, 5, 6]);
    expect((await collect(store.read(P, 8, 100))).map((e) => e.position)).toEqual([8, 9]);
    expect(await collect(store.read(P, 10))).toEqual([]);
    const error = await rejection(collect(store.read(P, 11)));
    expect(error.code).toBe('failed_precondition');
    expect(await collect(store.read('conv-empty'))).toEqual([]);
  });

  it('stops a read when its signal fires', async () => {
    await openStore();
    await store.append(P, 0, [message('a'), message('b'), message('c')]);
    const controller = new AbortController();
    const seen: number[] = [];
    const error = await rejection(
      (async () => {
        for await (const event of store.read(P, 0, 100, { signal: controller.signal })) {
          seen.push(event.position);
          controller.abort();
        }
      })(),
    );
    expect(error.code).toBe('cancelled');
    expect(seen).toEqual([0]);
  });

  it('lists partitions sorted, and exports NDJSON a third party can check', async () => {
    await openStore();
    await store.append('conv-b', 0, [message('b')]);
    await store.append('conv-a', 0, [message('a')]);
    expect(store.listPartitions()).toEqual([
      { partition: 'conv-a', status: 'ok', head: 2 },
      { partition: 'conv-b', status: 'ok', head: 2 },
    ]);
    const text = Buffer.concat(await collect(store.export('conv-a'))).toString('utf8');
    const lines = text
      .trimEnd()
      .split('\n')
      .map((l): unknown => JSON.parse(l));
    const last = store.head('conv-a').signedRoot!;
    expect(lines[0]).toEqual({
      format: 'polychrome-journal-export/v1',
      partition: 'conv-a',
      head: 2,
      checkpoint: { head: 2, rootHex: toHex(last.root), keyId: last.keyId },
    });
    const events = await collect(store.read('conv-a'));
    expect(lines.slice(1)).toEqual(
      events.map((e) => ({ position: e.position, kind: e.kind, payloadHex: toHex(e.payload) })),
    );
  });
});

describe('commit listeners', () => {
  it('tells a listener the new head only once the batch is durable, before the append resolves', async () => {
    let release = (): void => undefined;
    const gate = new Promise<void>((resolve) => {
      release = resolve;
    });
    let writing = (): void => undefined;
    const started = new Promise<void>((resolve) => {
      writing = resolve;
    });
    const inner = instrumentedKv(dir.path);
    await openStore({
      kv: {
        ...inner,
        async write(ops, sync) {
          // Hold only the batch that carries events, not the format marker written on open.
          if (ops.length > 1) {
            writing();
            await gate;
          }
          await inner.write(ops, sync);
        },
      },
    });
    const order: string[] = [];
    const heads: number[] = [];
    const storeHeads: number[] = [];
    store.subscribe(P, (head) => {
      heads.push(head);
      order.push(`listener ${String(head)}`);
      // What a follower relies on when told: the store's head has already moved.
      storeHeads.push(store.head(P).head);
    });
    const appended = store.append(P, 0, [message('a'), message('b')]).then((r) => {
      order.push(`ack ${String(r.head)}`);
      return r;
    });
    await started;
    // The durable write is under way: nobody may see the batch yet.
    expect(heads).toEqual([]);
    expect(await collect(store.read(P))).toEqual([]);
    release();
    await appended;
    expect(order).toEqual(['listener 3', 'ack 3']);
    expect(storeHeads).toEqual([3]);
    expect((await collect(store.read(P))).map((e) => e.position)).toEqual([0, 1, 2]);
  });

  it('is not told of a batch whose durable write failed', async () => {
    await openStore();
    const heads: number[] = [];
    store.subscribe(P, (head) => heads.push(head));
    kv.failNext = () => {
      throw new Error('disk full');
    };
    expect((await rejection(store.append(P, 0, [message('lost')]))).code).toBe('unavailable');
    expect(heads).toEqual([]);
    await store.append(P, 0, [message('kept')]);
    expect(heads).toEqual([2]);
  });

  it('reports the first batch of a new partition, key hand-overs, and only its own partition', async () => {
    await openStore();
    const heads: number[] = [];
    const unsubscribe = store.subscribe(P, (head) => heads.push(head));
    await store.append('conv-other', 0, [message('elsewhere')]);
    await store.append(P, 0, [message('first')]);
    await store.rotateKey(P, keyB);
    expect(heads).toEqual([2, 4]);
    unsubscribe();
    await store.append(P, 4, [message('unheard')]);
    expect(heads).toEqual([2, 4]);
  });

  it('counts subscriptions and releases each exactly once', async () => {
    await openStore();
    const listener = (): void => undefined;
    const first = store.subscribe(P, listener);
    const second = store.subscribe(P, listener);
    const other = store.subscribe('conv-other', listener);
    expect(store.commitListenerCount(P)).toBe(2);
    expect(store.commitListenerCount()).toBe(3);
    first();
    first();
    expect(store.commitListenerCount(P)).toBe(1);
    second();
    other();
    expect(store.commitListenerCount(P)).toBe(0);
    expect(store.commitListenerCount()).toBe(0);
    expect(() => store.subscribe('Not_A_Partition', listener)).toThrow(/partition name/);
  });

  it('acknowledges a durable append even when a listener throws, and tells the others', async () => {
    await openStore();
    const heads: number[] = [];
    store.subscribe(P, () => {
      throw new Error('broken follower');
    });
    store.subscribe(P, (head) => heads.push(head));
    expect((await store.append(P, 0, [message('a')])).head).toBe(2);
    expect(heads).toEqual([2]);
  });
});

describe('verify and inclusion proofs', () => {
  it('verifies many appends and proves every event against signed roots', async () => {
    await openStore();
    let head = 0;
    const roots: number[] = [];
    for (let b = 0; b < 40; b++) {
      const size = 1 + (b % 5);
      const events = Array.from({ length: size }, (_, i) =>
        i % 2 === 0
          ? message(`b${String(b)}e${String(i)}`)
          : filler(EventKind.ToolResult, (b * 97 + i) % 3000, b),
      );
      const result = await store.append(P, head, events);
      head = result.head;
      roots.push(result.signedRoot.leafCount);
    }
    const verification = await store.verify(P);
    expect(verification).toMatchObject({
      ok: true,
      leafCount: head,
      signedRootCount: 40,
      verifiedLeafCount: head - 1,
    });
    expect(verification.unsealed).toEqual({ fromPosition: head, count: 0 });

    const events = await collect(store.read(P));
    for (const leafCount of [roots[0]!, roots[7]!, roots[20]!, roots.at(-1)!]) {
      for (let position = 0; position < leafCount; position++) {
        const proof = await store.proof(
          P,
          position,
          leafCount === roots.at(-1) ? undefined : leafCount,
        );
        expect(proof.event).toEqual(events[position]);
        expect(proof.proof.leafCount).toBe(leafCount);
        verifyInclusion(nodeSha256, proof.proof, proof.leaf, proof.signedRoot.root);
        expect(
          verifier.verify(
            keyA.publicKey,
            signedRootMessageV2(P, leafCount, proof.signedRoot.root),
            proof.signedRoot.signature,
          ),
        ).toBe(true);
      }
    }
  }, 30_000);

  it('rejects proofs against a leaf count that is not a signed root, or beyond the latest', async () => {
    await openStore();
    await store.append(P, 0, [message('a'), message('b')]);
    await store.append(P, 3, [message('c')]);
    expect((await rejection(store.proof(P, 0, 1))).message).toContain(
      'event 1 is not a signed_root',
    );
    expect((await rejection(store.proof(P, 0, 9))).code).toBe('failed_precondition');
    expect((await rejection(store.proof(P, 2, 2))).code).toBe('invalid_argument');
    expect((await rejection(store.proof('conv-none', 0))).code).toBe('not_found');
    const ok = await store.proof(P, 1, 2);
    expect(ok.signedRoot.position).toBe(2);
  });
});

describe('open and close', () => {
  it('restores heads and roots after close, and keeps appending', async () => {
    await openStore();
    const a = await store.append('conv-a', 0, [message('a')]);
    const b = await store.append('conv-b', 0, [message('b'), message('bb')]);
    await reopen();
    expect(store.head('conv-a')).toEqual({
      partition: 'conv-a',
      head: a.head,
      signedRoot: a.signedRoot,
    });
    expect(store.head('conv-b')).toEqual({
      partition: 'conv-b',
      head: b.head,
      signedRoot: b.signedRoot,
    });
    const next = await store.append('conv-b', b.head, [message('after')]);
    expect(next.firstPosition).toBe(3);
    expect((await store.verify('conv-b')).ok).toBe(true);
  });

  it('close is idempotent, waits for appends in flight, and refuses later calls', async () => {
    await openStore();
    const pending = store.append(P, 0, [message('in flight')]);
    const closed = [store.close(), store.close()];
    expect((await pending).head).toBe(2);
    await Promise.all(closed);
    expect((await rejection(store.append(P, 2, [message('late')]))).code).toBe('unavailable');
    expect(() => store.head(P)).toThrow('the journal store is closed');
    await openStore();
    expect(store.head(P).head).toBe(2);
  });

  it('lets a close() issued during open() win', async () => {
    kv = instrumentedKv(dir.path);
    store = new JournalStore({ location: dir.path, signer: keyA, kv });
    const opening = store.open();
    const closing = store.close();
    await opening;
    // Open finished first, yet the store must not serve: close is under way.
    expect(() => store.head(P)).toThrow('the journal store is closed');
    await closing;
  });

  it('refuses a directory that is not a journal store', async () => {
    await editRaw(dir.path, (db) => db.put(Uint8Array.of(1, 2, 3), Uint8Array.of(4)));
    kv = instrumentedKv(dir.path);
    store = new JournalStore({ location: dir.path, signer: keyA, kv });
    const error = await rejection(store.open());
    expect(error.code).toBe('failed_precondition');
    expect(error.message).toContain('has no journal-store format marker');
  });

  it('reports a locked database as unavailable', async () => {
    await openStore();
    const second = new JournalStore({ location: dir.path, signer: keyA });
    const error = await rejection(second.open());
    expect(error.code).toBe('unavailable');
    await second.close();
  });
});

describe('torn tails and damage found on open', () => {
  it('drops never-acknowledged events and nodes past the head; the acknowledged prefix survives', async () => {
    await openStore();
    const first = await store.append(P, 0, [message('a'), message('b')]);
    const other = await store.append('conv-other', 0, [message('o')]);
    await store.close();
    // A batch whose durable write failed, overwritten by a shorter retry, leaves records
    // past the head: simulate them directly.
    await editRaw(dir.path, async (db) => {
      await db.batch([
        { type: 'put', key: eventKey(P, 3), value: Uint8Array.of(1, 0x61) },
        { type: 'put', key: eventKey(P, 4), value: Uint8Array.of(1, 0x62) },
        { type: 'put', key: nodeKey(P, mmrSize(3)), value: new Uint8Array(32) },
        { type: 'put', key: nodeKey(P, mmrSize(3) + 5), value: new Uint8Array(32) },
      ]);
    });
    await openStore();
    const opened = await store.open();
    expect(opened.droppedTails).toEqual([{ partition: P, events: 2, nodes: 2 }]);
    expect(opened.refused).toEqual([]);
    expect(store.head(P)).toEqual({ partition: P, head: 3, signedRoot: first.signedRoot });
    expect(store.head('conv-other').head).toBe(other.head);
    expect((await store.verify(P)).ok).toBe(true);
    const next = await store.append(P, 3, [message('c')]);
    expect(next.firstPosition).toBe(3);
    await reopen();
    expect((await store.open()).droppedTails).toEqual([]);
    expect((await store.verify(P)).ok).toBe(true);
  });

  it('refuses a partition whose head is past its last event (data loss); others keep working', async () => {
    await openStore();
    await store.append(P, 0, [message('a')]);
    await store.append(P, 2, [message('b')]);
    await store.append('conv-fine', 0, [message('f')]);
    await store.close();
    await editRaw(dir.path, async (db) => {
      await db.del(eventKey(P, 3));
    });
    await openStore();
    const report = await store.open();
    expect(report.refused).toHaveLength(1);
    expect(report.refused[0]!.partition).toBe(P);
    expect(report.refused[0]!.problem).toContain(
      'the head record says 4 events but the last stored event is 2',
    );
    const error = await rejection(store.append(P, 4, [message('x')]));
    expect(error.code).toBe('data_loss');
    expect(() => store.head(P)).toThrow(/is refused/);
    expect(store.listPartitions()).toEqual([
      { partition: P, status: 'refused', problem: report.refused[0]!.problem },
      { partition: 'conv-fine', status: 'ok', head: 2 },
    ]);
    expect((await store.append('conv-fine', 2, [message('still fine')])).head).toBe(4);
    // Forensics still work on the refused partition: verify reports the unsealed tail.
    const verification = await store.verify(P);
    expect(verification.ok).toBe(true);
    expect(verification.unsealed).toEqual({ fromPosition: 2, count: 1 });
    expect(store.stats().refusedPartitions).toBe(1);
  });

  it('refuses a partition with events but no head record, and deletes nothing', async () => {
    await openStore();
    await store.append(P, 0, [message('a')]);
    await store.close();
    await editRaw(dir.path, (db) => db.del(headKey(P)));
    await openStore();
    expect((await store.open()).refused[0]!.problem).toContain('no head record');
    await store.close();
    let events = 0;
    await editRaw(dir.path, async (db) => {
      for await (const _ of db.keys({ gte: eventKey(P, 0), lt: eventKey(P, 100) })) events += 1;
    });
    expect(events).toBe(2);
  });

  it('refuses a partition whose last batch was cut short or whose frontier disagrees', async () => {
    await openStore();
    await store.append(P, 0, [message('a'), message('b')]);
    await store.append('conv-peaks', 0, [message('p')]);
    await store.close();
    await editRaw(dir.path, async (db) => {
      const value = await db.get(eventKey(P, 1));
      await db.put(eventKey(P, 2), value!);
      await db.put(nodeKey('conv-peaks', 2), new Uint8Array(32).fill(7));
    });
    await openStore();
    const problems = Object.fromEntries(
      (await store.open()).refused.map((r) => [r.partition, r.problem]),
    );
    expect(problems[P]).toContain('is message_received, not signed_root');
    expect(problems['conv-peaks']).toContain('peak nodes disagree');
  });
});

describe('signing keys', () => {
  it('rotateKey writes key_rotated by the old key and a root by the new one, in one batch', async () => {
    await openStore();
    await store.append(P, 0, [message('a')]);
    const writes = kv.writes.length;
    const rotated = await store.rotateKey(P, keyB);
    expect(kv.writes.length).toBe(writes + 1);
    expect(rotated).toMatchObject({
      firstPosition: 2,
      head: 4,
      keyRotation: { position: 2, oldKeyId: idA, newKeyId: idB },
    });
    expect(rotated?.signedRoot.keyId).toBe(idB);
    expect(store.signingKeyId).toBe(idB);
    expect(await store.rotateKey(P, keyB)).toBeUndefined();
    const after = await store.append(P, 4, [message('b')]);
    expect(after.keyRotation).toBeUndefined();
    expect(after.signedRoot.keyId).toBe(idB);
    const result = await store.verify(P);
    expect(result).toMatchObject({ ok: true, leafCount: 6 });
    // Trusting only the new key from position 0 fails at the first root.
    const strict = await store.verify(P, { trustedPublicKeys: [keyB.publicKey] });
    expect(strict.failure).toMatchObject({ position: 1, reason: 'wrong_key' });
  });

  it('hands other partitions over lazily, after the caller events, without moving their positions', async () => {
    await openStore();
    await store.append('conv-x', 0, [message('x')]);
    await store.append('conv-y', 0, [message('y')]);
    store.useSigningKey(keyB);
    const x = await store.append('conv-x', 2, [message('x2'), message('x3')]);
    expect(x).toMatchObject({
      firstPosition: 2,
      head: 6,
      keyRotation: { position: 4, oldKeyId: idA, newKeyId: idB },
    });
    expect((await collect(store.read('conv-x', 2))).map((e) => e.kind)).toEqual([
      EventKind.MessageReceived,
      EventKind.MessageReceived,
      EventKind.KeyRotated,
      EventKind.SignedRoot,
    ]);
    expect((await store.verify('conv-x')).ok).toBe(true);

    // After a restart with the new key active and the old one still loaded, conv-y is
    // handed over on its next append; without the old key it cannot be.
    await reopen({ signer: keyB });
    const error = await rejection(store.append('conv-y', 2, [message('y2')]));
    expect(error.code).toBe('failed_precondition');
    expect(error.message).toContain(`last signed by key ${idA}, which this store does not hold`);
    expect((await store.verify('conv-y', { trustedPublicKeys: [keyA.publicKey] })).ok).toBe(true);
    await reopen({ signer: keyB, previousSigners: [keyA] });
    const y = await store.append('conv-y', 2, [message('y2')]);
    expect(y.keyRotation).toMatchObject({ oldKeyId: idA, newKeyId: idB });
    expect((await store.verify('conv-y')).ok).toBe(true);
    expect((await store.verify('conv-x')).ok).toBe(true);
  });

  it('rotates twice and refuses to rotate an empty partition', async () => {
    await openStore();
    expect((await rejection(store.rotateKey(P, keyB))).code).toBe('not_found');
    await store.append(P, 0, [message('a')]);
    await store.rotateKey(P, keyB);
    await store.rotateKey(P, keyC);
    const result = await store.verify(P);
    expect(result).toMatchObject({ ok: true, leafCount: 6, signedRootCount: 3 });
  });
});
