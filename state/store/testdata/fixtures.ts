import { createHash } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { ClassicLevel } from 'classic-level';

import { EventKind, encodePayload } from '../../../common/event-kinds';
import type { Ed25519Signer } from '../../journal/ed25519';
import { createNodeEd25519Signer } from '../../journal/node-ed25519';
import type { AppendEvent } from '../journal-store-types';
import { createLevelKv, type KvOp, type KvStore } from '../level-kv';

/**
 * Test-only signing key N: the seed is SHA-256("polychrome/test-only/journal-key/N"), as
 * in docs/journal-vectors.json, so anyone can sign with it.
 */
export function testSigner(n: number): Ed25519Signer {
  const seed = createHash('sha256')
    .update(`polychrome/test-only/journal-key/${String(n)}`)
    .digest();
  return createNodeEd25519Signer(new Uint8Array(seed));
}

/** A fresh temporary directory and a function that removes it. */
export async function tempDir(): Promise<{ path: string; remove: () => Promise<void> }> {
  const path = await mkdtemp(join(tmpdir(), 'polychrome-store-'));
  return { path, remove: () => rm(path, { recursive: true, force: true }) };
}

/** A `message_received` event whose text identifies it. */
export function message(text: string): AppendEvent {
  return {
    kind: EventKind.MessageReceived,
    payload: encodePayload(EventKind.MessageReceived, {
      turnId: 't',
      idempotencyKey: text,
      text,
      attribution: undefined,
      receivedAtMs: 0,
    }),
  };
}

/** An event of `kind` with `size` filler bytes (opaque to the store). */
export function filler(kind: string, size: number, seed = 0): AppendEvent {
  const payload = new Uint8Array(size);
  for (let i = 0; i < size; i++) payload[i] = (i * 31 + seed) & 0xff;
  return { kind, payload };
}

/** A KvStore that counts and can fail writes; everything else goes to real LevelDB. */
export interface InstrumentedKv extends KvStore {
  readonly writes: { readonly ops: readonly KvOp[]; readonly sync: boolean }[];
  /** When set, the next write calls this; if it throws, the write fails and is not applied. */
  failNext: (() => void) | undefined;
}

/** Wraps the real classic-level adapter for `location`. */
export function instrumentedKv(location: string): InstrumentedKv {
  const inner = createLevelKv(location);
  const kv: InstrumentedKv = {
    ...inner,
    writes: [],
    failNext: undefined,
    async write(ops, sync) {
      kv.writes.push({ ops, sync });
      const fail = kv.failNext;
      kv.failNext = undefined;
      fail?.();
      await inner.write(ops, sync);
    },
  };
  return kv;
}

/** Opens the database directly (the store must be closed), runs `edit`, closes it. */
export async function editRaw(
  location: string,
  edit: (db: ClassicLevel<Uint8Array, Uint8Array>) => Promise<void>,
): Promise<void> {
  const db = new ClassicLevel<Uint8Array, Uint8Array>(location, {
    keyEncoding: 'view',
    valueEncoding: 'view',
  });
  await db.open();
  try {
    await edit(db);
  } finally {
    await db.close();
  }
}

/** Collects an async iterable. */
export async function collect<T>(items: AsyncIterable<T>): Promise<T[]> {
  const out: T[] = [];
  for await (const item of items) out.push(item);
  return out;
}

/** The partition retire-worker.ts builds and retires. */
export const RETIRE_WORKER_PARTITION = 'conv-crash-retire';
