import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { createInterface } from 'node:readline';

import { afterEach, beforeEach, describe, expect, it } from '@jest/globals';

import { decodePayload, EventKind } from '../../common/event-kinds';
import { JournalStore } from './journal-store';
import { collect, tempDir, testSigner } from './testdata/fixtures';

/*
 * Crash safety with a real SIGKILL: a child process appends to 4 partitions in a loop and
 * prints each acknowledged append; the test kills it mid-stream (twice, resuming from the
 * reopened store), then checks that every acknowledged append is there, that no batch is
 * partly visible, and that verify passes.
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
