import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { createInterface } from 'node:readline';

import { afterEach, beforeEach, describe, expect, it } from '@jest/globals';

import { decodePayload, EventKind } from '../../common/event-kinds';
import { AppError } from '../../common/errors';
import { JournalStore } from './journal-store';
import { RetirePolicy } from './retirement-types';
import { partitionRange } from './store-keys';
import {
  collect,
  editRaw,
  RETIRE_WORKER_PARTITION,
  tempDir,
  testSigner,
} from './testdata/fixtures';

/*
 * Crash safety with a real SIGKILL. Appends: a child process appends to 4 partitions in a loop and
 * prints each acknowledged append; the test kills it mid-stream (twice, resuming from the
 * reopened store), then checks that every acknowledged append is there, that no batch is
 * partly visible, and that verify passes. Retirement: a child builds a partition of ~9600
 * records and retires it; killed at several moments of the retirement (before, during and
 * after its one batch, as the timing falls), the reopened store holds the whole partition or
 * the retired one, never part of it.
 */

const ROOT = join(__dirname, '..', '..');
const WORKER = join(__dirname, 'testdata', 'append-worker.ts');
const PARTITIONS = 4;

let dir: { path: string; remove: () => Promise<void> };
beforeEach(async () => {
  dir = await tempDir();
});
afterEach(async () => {
  await dir.remove();
});

interface Ack {
  readonly partition: string;
  readonly firstPosition: number;
  readonly head: number;
  readonly events: number;
}

/** Runs the worker until it has printed `killAfter` acks, then SIGKILLs it. */
async function runAndKill(killAfter: number): Promise<Ack[]> {
  // `node --import tsx`, not the tsx CLI: the CLI runs the script in a grandchild that a
  // SIGKILL of the CLI would not reach.
  const child = spawn(process.execPath, ['--import', 'tsx', WORKER, dir.path, String(PARTITIONS)], {
    cwd: ROOT,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stderr = '';
  child.stderr.on('data', (chunk: Buffer) => {
    stderr += chunk.toString();
  });
  const exited = new Promise<NodeJS.Signals | number | null>((resolve) => {
    child.on('exit', (code, signal) => resolve(signal ?? code));
  });
  const acks: Ack[] = [];
  const deadline = setTimeout(() => child.kill('SIGKILL'), 45_000);
  for await (const line of createInterface({ input: child.stdout })) {
    const [tag, partition, first, head, events] = line.split(' ');
    if (tag !== 'ack' || partition === undefined) continue;
    acks.push({
      partition,
      firstPosition: Number(first),
      head: Number(head),
      events: Number(events),
    });
    if (acks.length === killAfter) child.kill('SIGKILL');
  }
  clearTimeout(deadline);
  const how = await exited;
  if (how !== 'SIGKILL' || acks.length < killAfter) {
    throw new Error(
      `worker ended with ${String(how)} after ${String(acks.length)} acks: ${stderr}`,
    );
  }
  return acks;
}

async function checkAfterCrash(acks: readonly Ack[]): Promise<void> {
  const store = new JournalStore({ location: dir.path, signer: testSigner(0) });
  const report = await store.open();
  try {
    expect(report.refused).toEqual([]);
    for (let i = 0; i < PARTITIONS; i++) {
      const partition = `conv-crash-${String(i)}`;
      const acked = acks.filter((a) => a.partition === partition);
      const head = store.head(partition).head;
      // Every acknowledged append is there (the store may hold one more, acknowledged to
      // nobody because the process died between the fsync and the print).
      expect(head).toBeGreaterThanOrEqual(Math.max(0, ...acked.map((a) => a.head)));

      const events = await collect(store.read(partition));
      expect(events).toHaveLength(head);
      // Batches are whole: each is k messages of the same batch, items 0..k-1, then a root.
      const boundaries = new Set<number>([0]);
      let batch: string[] = [];
      for (const event of events) {
        if (event.kind === EventKind.SignedRoot) {
          const first = batch[0];
          expect(first).toBeDefined();
          const match = /^(\S+) batch (\d+) of (\d+) item 0$/.exec(first ?? '');
          expect(match).not.toBeNull();
          const k = Number(match?.[3]);
          expect(batch).toEqual(
            Array.from(
              { length: k },
              (_, j) => `${partition} batch ${match?.[2] ?? ''} of ${String(k)} item ${String(j)}`,
            ),
          );
          batch = [];
          boundaries.add(event.position + 1);
        } else {
          expect(event.kind).toBe(EventKind.MessageReceived);
          batch.push(decodePayload(EventKind.MessageReceived, event.payload).text);
        }
      }
      expect(batch).toEqual([]);
      for (const ack of acked) {
        expect(boundaries.has(ack.firstPosition)).toBe(true);
        expect(boundaries.has(ack.head)).toBe(true);
        expect(ack.head - ack.firstPosition).toBe(ack.events + 1);
      }
      const verification = await store.verify(partition);
      expect(verification).toMatchObject({ ok: true, leafCount: head, unsealed: { count: 0 } });
    }
  } finally {
    await store.close();
  }
}

describe('SIGKILL mid-stream', () => {
  it('keeps every acknowledged append, shows no partial batch, and verifies', async () => {
    const first = await runAndKill(300);
    await checkAfterCrash(first);
    const second = await runAndKill(200);
    expect(second[0]?.firstPosition).toBeGreaterThan(0);
    await checkAfterCrash([...first, ...second]);
  }, 120_000);
});

const RETIRE_WORKER = join(__dirname, 'testdata', 'retire-worker.ts');

/** Runs the retire worker; SIGKILLs it `delayMs` after it printed `built`. Its head. */
async function retireAndKill(location: string, delayMs: number): Promise<number> {
  const child = spawn(process.execPath, ['--import', 'tsx', RETIRE_WORKER, location, '100'], {
    cwd: ROOT,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stderr = '';
  child.stderr.on('data', (chunk: Buffer) => {
    stderr += chunk.toString();
  });
  const exited = new Promise<void>((resolve) => child.on('exit', () => resolve()));
  let built = -1;
  const deadline = setTimeout(() => child.kill('SIGKILL'), 60_000);
  for await (const line of createInterface({ input: child.stdout })) {
    const [tag, head] = line.split(' ');
    if (tag !== 'built') continue;
    built = Number(head);
    setTimeout(() => child.kill('SIGKILL'), delayMs);
  }
  clearTimeout(deadline);
  await exited;
  if (built < 0) throw new Error(`the retire worker never built its partition: ${stderr}`);
  return built;
}

/** The partition's raw keys (the store closed). */
async function rawKeys(location: string): Promise<number> {
  let count = 0;
  await editRaw(location, async (db) => {
    for await (const key of db.keys(partitionRange(RETIRE_WORKER_PARTITION)))
      count += key.length > 0 ? 1 : 0;
  });
  return count;
}

describe('SIGKILL mid-retire', () => {
  it.each([0, 100, 150, 200, 400])(
    'after %i ms leaves the whole partition or the retired one, never between',
    async (delayMs) => {
      const built = await retireAndKill(dir.path, delayMs);
      const left = await rawKeys(dir.path);
      const store = new JournalStore({ location: dir.path, signer: testSigner(0) });
      const report = await store.open();
      const P = RETIRE_WORKER_PARTITION;
      try {
        expect(report.refused).toEqual([]);
        const retirement = (() => {
          try {
            return store.retirement(P);
          } catch (error) {
            if (error instanceof AppError && error.code === 'not_found') return undefined;
            throw error;
          }
        })();
        if (retirement === undefined) {
          // Whole: every event there, verifying; retiring it now finishes the job.
          expect(store.head(P).head).toBe(built);
          expect(await store.verify(P)).toMatchObject({ ok: true, leafCount: built });
          const done = await store.retire(P, {
            policy: RetirePolicy.Checkpoint,
            actor: 'retry',
            reason: 'after the crash',
          });
          expect(done).toMatchObject({ retiredNow: true, eventsRemoved: built });
        } else {
          // Retired: not one record of the partition is left, and the record is whole.
          expect(left).toBe(0);
          expect(retirement.signed).toMatchObject({ head: built });
          expect(store.listPartitions().map((p) => p.partition)).not.toContain(P);
        }
      } finally {
        await store.close();
      }
    },
    120_000,
  );
});
