import { readFile } from 'node:fs/promises';
import { join } from 'node:path';

import { status } from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import pino from 'pino';

import { EventKind } from '../../common/event-kinds';
import { JournalConflictError, StateCallError } from '../../common/state-call-errors';
import { StateClient } from '../../common/state-client';
import type { JournalEntry, NewJournalEvent } from '../../common/state-journal';
import { createNodeEd25519Signer } from '../journal/node-ed25519';
import { nodeSha256 } from '../journal/node-sha256';
import { keyIdOf } from '../journal/signed-root';
import { JournalStore } from '../store/journal-store';
import { createLevelKv, type KvStore } from '../store/level-kv';
import { StateServer, type StateServerOptions } from './state-server';
import {
  clientTls,
  eventually,
  makeTestPki,
  tempDir,
  turn,
  type TestPki,
} from './testdata/fixtures';

/*
 * Follow reads (a live tail of one partition) through the real Journal service: a mutual
 * TLS listener on loopback, the real store on a temporary LevelDB, StateClient as the
 * control plane uses it.
 */

const signer = createNodeEd25519Signer(new Uint8Array(32).fill(9));
const keyId = keyIdOf(nodeSha256, signer.publicKey);

let dir: { path: string; remove: () => Promise<void> };
let pki: TestPki;
let store: JournalStore;
let serverOptions: StateServerOptions;
let server: StateServer;
let writer: StateClient;
let reader: StateClient;

async function clientOf(port: number, identity: 'controlPlane' | 'verifier'): Promise<StateClient> {
  return new StateClient({
    address: `localhost:${String(port)}`,
    tls: await clientTls(pki.ca, pki[identity]),
    callTimeoutMs: 5_000,
  });
}

beforeAll(async () => {
  dir = await tempDir('journal-follow');
  pki = await makeTestPki(dir.path);
  store = new JournalStore({ location: join(dir.path, 'db'), signer });
  await store.open();
  serverOptions = {
    store,
    tls: {
      ca: await readFile(pki.ca.certPath),
      cert: await readFile(pki.server.certPath),
      key: await readFile(pki.server.keyPath),
    },
    logger: pino({ level: 'silent' }),
    host: '127.0.0.1',
    port: 0,
    publicKeys: [{ keyId, publicKey: signer.publicKey }],
  };
  server = new StateServer(serverOptions);
  const port = await server.start();
  writer = await clientOf(port, 'controlPlane');
  reader = await clientOf(port, 'verifier');
}, 60_000);

afterAll(async () => {
  writer.close();
  reader.close();
  await server.close(1_000);
  await store.close();
  await dir.remove();
});

/** A follow read consumed in the background: what has arrived, and how it ended. */
interface Follower {
  readonly events: JournalEntry[];
  /** Resolves with undefined when the stream ended by itself, else with its error. */
  readonly done: Promise<unknown>;
  /** True once the stream has ended, either way. */
  hasEnded(): boolean;
  /** Cancels the call through its signal. */
  cancel(): void;
}

function follow(
  client: StateClient,
  partition: string,
  fromPosition = 0,
  limit = 0,
  onEvent?: (event: JournalEntry) => boolean,
): Follower {
  const controller = new AbortController();
  const events: JournalEntry[] = [];
  let ended = false;
  const done = (async (): Promise<unknown> => {
    try {
      for await (const event of client.read(partition, fromPosition, limit, {
        follow: true,
        signal: controller.signal,
      })) {
        events.push(event);
        // Returning false leaves the loop, which cancels the call.
        if (onEvent !== undefined && !onEvent(event)) break;
      }
      return undefined;
    } catch (error) {
      return error;
    } finally {
      ended = true;
    }
  })();
  return { events, done, hasEnded: () => ended, cancel: () => controller.abort() };
}

function positions(events: readonly JournalEntry[]): number[] {
  return events.map((e) => e.position);
}

function range(from: number, to: number): number[] {
  return Array.from({ length: to - from }, (_, i) => from + i);
}

/** Waits until `follower` holds `count` events (and fails early if its stream ended). */
function received(follower: Follower, count: number): Promise<true> {
  return eventually(`${String(count)} followed events`, () => {
    if (follower.events.length >= count) return true;
    if (follower.hasEnded())
      throw new Error(`the follow ended after ${String(follower.events.length)} events`);
    return undefined;
  });
}

function subscribed(partition: string, count = 1): Promise<true> {
  return eventually(`${String(count)} subscription(s) to ${partition}`, () =>
    store.commitListenerCount(partition) === count ? true : undefined,
  );
}

async function appendBatches(partition: string, batches: number, label: string): Promise<number> {
  let head = (await writer.head(partition)).head;
  for (let i = 0; i < batches; i++) {
    head = (await writer.append(partition, head, turn(`${label}-${String(i)}`))).head;
  }
  return head;
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

describe('follow reads', () => {
  it('streams the events up to the head, then each new batch live, and keeps the stream open', async () => {
    const partition = 'conv-follow-live';
    const before = await writer.append(partition, 0, turn('before'));
    const follower = follow(reader, partition);
    await received(follower, before.head);
    await subscribed(partition);
    expect(follower.hasEnded()).toBe(false);

    const batch = turn('after', 300);
    const after = await writer.append(partition, before.head, batch);
    await received(follower, after.head);
    expect(positions(follower.events)).toEqual(range(0, after.head));
    expect(follower.events.slice(before.head, before.head + 3)).toEqual(
      batch.map((e, i) => ({ position: before.head + i, kind: e.kind, payload: e.payload })),
    );
    expect(follower.events[after.head - 1]?.kind).toBe(EventKind.SignedRoot);
    expect(follower.hasEnded()).toBe(false);

    follower.cancel();
    expect(await follower.done).toMatchObject({ code: 'cancelled' });
    await subscribed(partition, 0);
  });

  it('gives every event exactly once, in order, while several writers race on the partition', async () => {
    const partition = 'conv-follow-race';
    const writers = 4;
    const batchesEach = 8;
    const total = writers * batchesEach * 4; // 3 caller events and a signed_root per batch
    const expected = new Map<number, NewJournalEvent>();
    const early = follow(reader, partition, 0, total);
    await subscribed(partition);
    let committed = 0;
    let late: Follower | undefined;

    async function write(w: number): Promise<void> {
      let head = 0;
      for (let b = 0; b < batchesEach; b++) {
        const events = turn(`writer${String(w)}-batch${String(b)}`, 64 + w * 100 + b);
        for (;;) {
          try {
            const result = await writer.append(partition, head, events);
            events.forEach((e, i) => expected.set(result.firstPosition + i, e));
            head = result.head;
            break;
          } catch (error) {
            if (!(error instanceof JournalConflictError)) throw error;
            head = error.head;
          }
        }
        // A second follower joins mid-burst: its catch-up read races the live commits.
        if (++committed === (writers * batchesEach) / 2) late = follow(reader, partition, 0, total);
      }
    }

    await Promise.all(range(0, writers).map(write));
    expect(await early.done).toBeUndefined();
    expect(late).toBeDefined();
    expect(await late?.done).toBeUndefined();
    for (const follower of [early, late]) {
      const events = follower?.events ?? [];
      expect(positions(events)).toEqual(range(0, total));
      for (const event of events) {
        const appended = expected.get(event.position);
        if (appended === undefined) {
          expect(event.kind).toBe(EventKind.SignedRoot);
        } else {
          expect(event).toEqual({
            position: event.position,
            kind: appended.kind,
            payload: appended.payload,
          });
        }
      }
    }
    expect(expected.size).toBe(writers * batchesEach * 3);
    expect((await writer.head(partition)).head).toBe(total);
    await subscribed(partition, 0);
  }, 30_000);

  it('sees a batch committed while its catch-up read is still running', async () => {
    // A store whose next range read stops before its first entry until released, so a
    // batch can be committed after the follower's read took its head but before it ended.
    const location = join(dir.path, 'db-paused-read');
    const inner = createLevelKv(location);
    let trap: { readonly reached: () => void; readonly gate: Promise<void> } | undefined;
    const kv: KvStore = {
      ...inner,
      entries(range) {
        const paused = trap;
        trap = undefined;
        if (paused === undefined) return inner.entries(range);
        return (async function* () {
          paused.reached();
          await paused.gate;
          yield* inner.entries(range);
        })();
      },
    };
    const pausedStore = new JournalStore({ location, signer, kv });
    await pausedStore.open();
    const second = new StateServer({ ...serverOptions, store: pausedStore });
    const client = await clientOf(await second.start(), 'verifier');
    const partition = 'conv-follow-during-read';
    try {
      const first = await pausedStore.append(partition, 0, turn('first'));
      let release = (): void => undefined;
      const gate = new Promise<void>((resolve) => {
        release = resolve;
      });
      const reached = new Promise<void>((resolve) => {
        trap = { reached: resolve, gate };
      });
      const follower = follow(client, partition);
      await reached;
      expect(pausedStore.commitListenerCount(partition)).toBe(1);
      const during = await pausedStore.append(partition, first.head, turn('during'));
      release();
      await received(follower, during.head);
      expect(positions(follower.events)).toEqual(range(0, during.head));
      follower.cancel();
      await follower.done;
    } finally {
      client.close();
      await second.close(1_000);
      await pausedStore.close();
    }
  });

  it('follows from a middle position', async () => {
    const partition = 'conv-follow-middle';
    const head = await appendBatches(partition, 3, 'm');
    const follower = follow(reader, partition, 5);
    await received(follower, head - 5);
    await subscribed(partition);
    const next = await appendBatches(partition, 1, 'n');
    await received(follower, next - 5);
    expect(positions(follower.events)).toEqual(range(5, next));
    const stored: JournalEntry[] = [];
    for await (const event of reader.read(partition, 5)) stored.push(event);
    expect(follower.events).toEqual(stored);
    follower.cancel();
    await follower.done;
    await subscribed(partition, 0);
  });

  it('ends with OK after limit events, across the head, and releases its subscription', async () => {
    const partition = 'conv-follow-limit';
    const head = await appendBatches(partition, 1, 'l');
    const follower = follow(reader, partition, 2, 5);
    await received(follower, head - 2);
    await subscribed(partition);
    expect(follower.hasEnded()).toBe(false);
    await appendBatches(partition, 2, 'more');
    expect(await follower.done).toBeUndefined();
    expect(positions(follower.events)).toEqual([2, 3, 4, 5, 6]);
    await subscribed(partition, 0);
  });

  it('releases the subscription when the client cancels, by signal or by leaving the loop', async () => {
    const partition = 'conv-follow-cancel';
    await appendBatches(partition, 1, 'c');
    const bySignal = follow(reader, partition);
    const byBreak = follow(reader, partition, 0, 0, (event) => event.position < 5);
    await subscribed(partition, 2);
    await received(bySignal, 4);
    bySignal.cancel();
    expect(await bySignal.done).toMatchObject({ code: 'cancelled', fromServer: false });
    await subscribed(partition, 1);
    // The second follower leaves its loop at position 5, in the next batch.
    await appendBatches(partition, 1, 'd');
    expect(await byBreak.done).toBeUndefined();
    expect(positions(byBreak.events)).toEqual(range(0, 6));
    await subscribed(partition, 0);
    expect(store.commitListenerCount()).toBe(0);
  });

  it('waits on a partition that does not exist yet, then receives its first batch', async () => {
    const partition = 'conv-follow-not-yet';
    const follower = follow(reader, partition, 0, 4);
    await subscribed(partition);
    expect(follower.events).toEqual([]);
    expect((await writer.head(partition)).head).toBe(0);
    const batch = turn('first');
    await writer.append(partition, 0, batch);
    expect(await follower.done).toBeUndefined();
    expect(follower.events.slice(0, 3)).toEqual(
      batch.map((e, i) => ({ position: i, kind: e.kind, payload: e.payload })),
    );
    expect(follower.events[3]).toMatchObject({ position: 3, kind: EventKind.SignedRoot });
  });

  it('refuses a follow from beyond the head, and a bad partition name, without subscribing', async () => {
    const partition = 'conv-follow-beyond';
    const head = await appendBatches(partition, 1, 'b');
    const beyond = follow(reader, partition, head + 1);
    expect(await beyond.done).toMatchObject({
      code: 'failed_precondition',
      grpcStatus: status.FAILED_PRECONDITION,
    });
    const bad = follow(reader, 'Conv_Bad');
    expect(await bad.done).toMatchObject({ code: 'invalid_argument' });
    expect(store.commitListenerCount(partition)).toBe(0);
  });

  it('ends an open follow with UNAVAILABLE, naming the position to resume from, when the server closes', async () => {
    const partition = 'conv-follow-shutdown';
    const head = await appendBatches(partition, 1, 's');
    const second = new StateServer(serverOptions);
    const client = await clientOf(await second.start(), 'verifier');
    try {
      const follower = follow(client, partition);
      await received(follower, head);
      await subscribed(partition);
      // A grace period far beyond the test's timeout: only an early end lets close() finish.
      await second.close(60_000);
      const error = await follower.done;
      expect(error).toBeInstanceOf(StateCallError);
      expect(error).toMatchObject({
        code: 'unavailable',
        grpcStatus: status.UNAVAILABLE,
        fromServer: true,
        method: 'Read',
      });
      expect(messageOf(error)).toContain(
        `reconnect and follow ${partition} again from position ${String(head)}`,
      );
      expect(positions(follower.events)).toEqual(range(0, head));
      await subscribed(partition, 0);
    } finally {
      client.close();
      await second.close();
    }
  });
});

describe('repair and checkpoints over gRPC', () => {
  const P = 'conv-grpc-repair';
  // 0xff is no valid ToolResult: the entry is unreadable from the start, as a corrupted
  // one would be (journal-store-repair.test.ts corrupts the LevelDB itself).
  const damaged: NewJournalEvent[] = [
    { kind: EventKind.MessageReceived, payload: new Uint8Array(0) },
    { kind: EventKind.ToolResult, payload: Uint8Array.of(0xff) },
  ];
  const asAdmin = { actor: 'admin@example.com', reason: 'unreadable tool result' };

  it('refuses Repair to a verifier identity, and writes nothing', async () => {
    await writer.append(P, 0, damaged);
    const refused = await reader.repair(P, asAdmin).then(
      () => undefined,
      (error: unknown) => error,
    );
    expect(refused).toBeInstanceOf(StateCallError);
    expect(refused).toMatchObject({
      code: 'permission_denied',
      grpcStatus: status.PERMISSION_DENIED,
    });
    expect((await writer.head(P)).head).toBe(3);
  });

  it('repairs for the writer: a dry run first, then excised entries read and verify as such', async () => {
    const dry = await writer.repair(P, { ...asAdmin, dryRun: true });
    expect(dry).toMatchObject({ dryRun: true, head: 3, signedRoot: undefined });
    expect(dry.excised.map((e) => e.position)).toEqual([1]);
    const done = await writer.repair(P, asAdmin);
    expect(done).toMatchObject({ dryRun: false, head: 5 });
    expect(done.signedRoot).toMatchObject({ position: 4, version: 2, partition: P });

    const events: JournalEntry[] = [];
    for await (const event of reader.read(P)) events.push(event);
    expect(events[1]).toMatchObject({ position: 1, kind: '', excised: true });
    expect(Buffer.from(events[1]!.leafDigest!)).toEqual(Buffer.from(done.excised[0]!.leafDigest));
    expect(events[3]!.kind).toBe(EventKind.Excision);

    expect(await reader.verify(P)).toMatchObject({
      ok: true,
      excised: [1],
      checkpointChecked: false,
    });
    const again = await writer.repair(P, asAdmin);
    expect(again).toMatchObject({ excised: [], head: 5 });
    expect(again.message).toContain('nothing to repair');
  });

  it('exports the keys, then the entries a read returns, the excised one as such', async () => {
    const read: JournalEntry[] = [];
    for await (const event of reader.read(P)) read.push(event);
    const keys: string[] = [];
    const exported: JournalEntry[] = [];
    for await (const item of reader.export(P)) {
      if (item.type === 'event') exported.push(item.event);
      else keys.push(item.keyId);
    }
    expect(keys).toEqual([keyId]);
    expect(exported).toEqual(read);
    expect(exported[1]).toMatchObject({ position: 1, kind: '', excised: true });
    expect(exported.map((e) => e.position)).toEqual([0, 1, 2, 3, 4]);
  });

  it('checks a checkpoint in Verify, and refuses a malformed one', async () => {
    const head = await writer.head(P);
    const root = head.signedRoot!.root;
    expect(await reader.verify(P, { checkpoint: { head: head.head, root } })).toMatchObject({
      ok: true,
      checkpointChecked: true,
    });
    // A checkpoint from a longer journal than the store now holds: rolled back.
    const ahead = await reader.verify(P, { checkpoint: { head: head.head + 3, root } });
    expect(ahead.failure).toMatchObject({ position: head.head, reason: 'rolled_back' });
    await expect(
      reader.verify(P, { checkpoint: { head: 1, root: new Uint8Array(3) } }),
    ).rejects.toMatchObject({ code: 'invalid_argument' });
  });
});
