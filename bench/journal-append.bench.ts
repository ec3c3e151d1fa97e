/*
 * Journal store throughput, each figure beside a baseline measured in the same run on the
 * same disk:
 *
 * - durable appends/s on one partition (1 event + signed_root per batch) ÷ the raw
 *   write+fsync rate of a plain file in the same directory (aim: ≥ 40%);
 * - appends/s over 64 partitions appending concurrently (group commit) ÷ the
 *   one-partition rate (aim: ≥ 5x);
 * - verify throughput in events/s ÷ raw SHA-256 over the same leaf preimages (aim: ≥ 25%),
 *   with signatures checked on a one-worker pool as the server does by default
 *   (STATE_VERIFY_WORKERS=1), on the event loop, and not at all (replay alone).
 *
 * Every phase is bounded in count and time. Usage:
 *   npx tsx bench/journal-append.bench.ts [directory on the disk to measure]
 */
import { randomBytes } from 'node:crypto';
import { closeSync, fdatasyncSync, fsyncSync, openSync, writeSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';

import { EventKind } from '../common/event-kinds';
import { createNodeEd25519Signer } from '../state/journal/node-ed25519';
import { nodeSha256 } from '../state/journal/node-sha256';
import { writeU64 } from '../state/journal/u64';
import { JournalStore } from '../state/store/journal-store';
import type { VerifyOptions } from '../state/store/journal-store-types';
import { SignatureVerifyPool } from '../state/verify-pool';

const PHASE_MS = 3000;
const PAYLOAD_BYTES = 200;

function seconds(startMs: number): number {
  return (performance.now() - startMs) / 1000;
}

function fmt(n: number): string {
  return n >= 100 ? Math.round(n).toLocaleString('en-US') : n.toFixed(1);
}

/**
 * Raw write + sync of 256 bytes appended to a plain file, the floor of any durable write.
 * LevelDB syncs its log with fdatasync on Linux, so that is the baseline the ratio uses;
 * fsync is printed beside it.
 */
function rawSyncRate(dir: string, sync: (fd: number) => void): number {
  const fd = openSync(join(dir, 'fsync-probe'), 'w');
  const block = randomBytes(256);
  const start = performance.now();
  let n = 0;
  try {
    while (n < 5000 && performance.now() - start < PHASE_MS) {
      writeSync(fd, block);
      sync(fd);
      n += 1;
    }
  } finally {
    closeSync(fd);
  }
  return n / seconds(start);
}

function event(seed: number): { kind: string; payload: Uint8Array } {
  const payload = new Uint8Array(PAYLOAD_BYTES);
  for (let i = 0; i < payload.length; i++) payload[i] = (i * 131 + seed) & 0xff;
  return { kind: EventKind.ToolResult, payload };
}

async function onePartitionRate(store: JournalStore): Promise<number> {
  let head = 0;
  let n = 0;
  const start = performance.now();
  while (n < 5000 && performance.now() - start < PHASE_MS) {
    head = (await store.append('conv-bench-one', head, [event(n)])).head;
    n += 1;
  }
  return n / seconds(start);
}

async function concurrentRate(
  store: JournalStore,
  partitions: number,
): Promise<{ rate: number; perWrite: number }> {
  const before = store.stats();
  let n = 0;
  const start = performance.now();
  await Promise.all(
    Array.from({ length: partitions }, async (_, i) => {
      const partition = `conv-bench-many-${String(i)}`;
      let head = 0;
      while (n < 100_000 && performance.now() - start < PHASE_MS) {
        head = (await store.append(partition, head, [event(i)])).head;
        n += 1;
      }
    }),
  );
  const rate = n / seconds(start);
  const after = store.stats();
  return {
    rate,
    perWrite: (after.commits - before.commits) / (after.durableWrites - before.durableWrites),
  };
}

async function verifyRates(store: JournalStore): Promise<{
  pooled: number;
  onThread: number;
  replay: number;
  sha: number;
  events: number;
}> {
  // 40 000 events in batches of 20 (+ a signed_root each): a long conversation's journal.
  const partition = 'conv-bench-verify';
  let head = 0;
  for (let b = 0; b < 2000; b++) {
    head = (
      await store.append(
        partition,
        head,
        Array.from({ length: 20 }, (_, i) => event(b + i)),
      )
    ).head;
  }
  const events = [];
  for await (const e of store.read(partition)) events.push(e);

  const rate = async (options?: VerifyOptions): Promise<number> => {
    const start = performance.now();
    let runs = 0;
    while (runs < 5 && (runs === 0 || performance.now() - start < PHASE_MS)) {
      const result = await store.verify(partition, options);
      if (!result.ok) throw new Error(`verify failed: ${result.failure?.message ?? ''}`);
      runs += 1;
    }
    return (runs * head) / seconds(start);
  };
  const pool = new SignatureVerifyPool({ workers: 1 });
  let pooled: number;
  try {
    await pool.verify([]); // the worker started before the clock runs
    pooled = await rate({ checkSignatures: (checks) => pool.verify(checks) });
  } finally {
    await pool.close();
  }
  const onThread = await rate();
  // Replay alone: reads, leaf and node hashes, roots; every signature check skipped.
  const replay = await rate({
    checkSignatures: (checks) => Promise.resolve(checks.map(() => true)),
  });

  // The same leaf preimages, hashed once each with nothing else.
  const kindBytes = new TextEncoder().encode(EventKind.ToolResult);
  const scratch = new Uint8Array(24 + kindBytes.length + PAYLOAD_BYTES + 256);
  const shaStart = performance.now();
  let hashed = 0;
  while (hashed < 50 * head && (hashed === 0 || performance.now() - shaStart < PHASE_MS)) {
    for (const e of events) {
      const kind = new TextEncoder().encode(e.kind);
      writeU64(scratch, 0, e.position);
      writeU64(scratch, 8, kind.length);
      scratch.set(kind, 16);
      writeU64(scratch, 16 + kind.length, e.payload.length);
      scratch.set(e.payload, 24 + kind.length);
      nodeSha256(scratch.subarray(0, 24 + kind.length + e.payload.length));
    }
    hashed += events.length;
  }
  return { pooled, onThread, replay, sha: hashed / seconds(shaStart), events: head };
}

async function main(): Promise<void> {
  const dir = await mkdtemp(join(process.argv[2] ?? tmpdir(), 'polychrome-bench-'));
  const store = new JournalStore({
    location: join(dir, 'journal'),
    signer: createNodeEd25519Signer(new Uint8Array(randomBytes(32))),
  });
  try {
    await store.open();
    console.log(
      `load average ${loadavg()
        .map((l) => l.toFixed(1))
        .join(' ')} (figures are noisy on a busy host)`,
    );
    // The raw rate is taken before and after the store's run and the higher one kept, so a
    // busy moment on the disk cannot flatter the ratio.
    const fsyncRate = rawSyncRate(dir, fsyncSync);
    const syncBefore = rawSyncRate(dir, fdatasyncSync);
    const one = await onePartitionRate(store);
    const syncRate = Math.max(syncBefore, rawSyncRate(dir, fdatasyncSync));
    console.log(
      `raw write+fdatasync (256 B)        ${fmt(syncRate)} /s   (write+fsync ${fmt(fsyncRate)} /s)`,
    );
    console.log(
      `append, 1 partition (1 event)      ${fmt(one)} /s   = ${((100 * one) / syncRate).toFixed(0)}% of raw fdatasync (aim >= 40%)`,
    );
    const many = await concurrentRate(store, 64);
    console.log(
      `append, 64 partitions concurrent   ${fmt(many.rate)} /s   = ${(many.rate / one).toFixed(1)}x one partition (aim >= 5x); ` +
        `${many.perWrite.toFixed(1)} appends per fsync`,
    );
    const v = await verifyRates(store);
    const ofSha = (rate: number): string => `${((100 * rate) / v.sha).toFixed(0)}%`;
    console.log(
      `verify (${fmt(v.events)} events of 200 B, a root per 21) ${fmt(v.pooled)} events/s with a 1-worker pool = ` +
        `${ofSha(v.pooled)} of raw SHA-256 over the same leaves (${fmt(v.sha)} /s; aim >= 25%); ` +
        `signatures on the event loop ${fmt(v.onThread)} events/s = ${ofSha(v.onThread)}; ` +
        `replay without signature checks ${fmt(v.replay)} events/s = ${ofSha(v.replay)}`,
    );
  } finally {
    await store.close();
    await rm(dir, { recursive: true, force: true });
  }
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
