import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdir, rm, statfs, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';

import { afterAll, afterEach, beforeAll, describe, expect, it, jest } from '@jest/globals';
import { status } from '@grpc/grpc-js';

import { decodePayload, EventKind } from '../../common/event-kinds';
import { StateCallError } from '../../common/state-call-errors';
import { StateClient } from '../../common/state-client';
import type { JournalEntry } from '../../common/state-journal';
import {
  clientTls,
  eventually,
  makeTestPki,
  message,
  tempDir,
  type TestPki,
} from './testdata/fixtures';
import { startStateProcess, type StateProcess, killAll } from '../../test/support/state-process';

/*
 * A full disk under the real state plane process (state/main.ts): its journal and records
 * directories on a tmpfs of a few MiB (a real filesystem that really answers ENOSPC; we run
 * as root). Appends fill it until LevelDB's write fails; then /readyz on the real health
 * port says why, every acknowledged append reads back and verifies, and once space is
 * freed the state plane is ready again and appends resume, without a restart. A restart
 * afterwards finds every acknowledged append. Then the proactive threshold (statfs): under
 * STATE_DISK_MIN_FREE_BYTES appends are refused before LevelDB meets a full disk, and
 * growing the filesystem (remount) brings them back.
 */

jest.setTimeout(180_000);

const run = promisify(execFile);
const MiB = 1024 * 1024;
const PARTITIONS = ['conv-disk-a', 'conv-disk-b', 'conv-disk-c'];

let dir: { path: string; remove: () => Promise<void> };
let pki: TestPki;
let mount: string;
let mounted = false;
const running = new Set<StateProcess>();

beforeAll(async () => {
  dir = await tempDir('state-disk-full');
  pki = await makeTestPki(dir.path);
  mount = join(dir.path, 'volume');
  await mkdir(mount);
  try {
    await run('mount', ['-t', 'tmpfs', '-o', 'size=16m', 'tmpfs', mount]);
  } catch (error) {
    throw new Error(
      'this test mounts a 16 MiB tmpfs for the state volume and needs root (or ' +
        `CAP_SYS_ADMIN); mount failed: ${error instanceof Error ? error.message : String(error)}`,
      { cause: error },
    );
  }
  mounted = true;
}, 60_000);

afterEach(async () => {
  await killAll(running);
});

afterAll(async () => {
  if (mounted) await run('umount', [mount]);
  await dir.remove();
});

async function start(env: Record<string, string>): Promise<StateProcess> {
  const p = await startStateProcess(pki, join(mount, 'journal'), {
    STATE_DISK_CHECK_INTERVAL_MS: '100',
    ...env,
  });
  running.add(p);
  return p;
}

async function stop(p: StateProcess): Promise<void> {
  p.child.kill('SIGTERM');
  expect(await p.exited).toBe(0);
  running.delete(p);
}

async function client(p: StateProcess, who: 'controlPlane' | 'verifier'): Promise<StateClient> {
  return new StateClient({
    address: p.address,
    tls: await clientTls(pki.ca, pki[who]),
    callTimeoutMs: 20_000,
  });
}

async function side(p: StateProcess, path: string): Promise<{ status: number; body: string }> {
  const response = await fetch(`http://127.0.0.1:${String(p.healthPort)}${path}`);
  return { status: response.status, body: await response.text() };
}

/** A metric's value on the real /metrics page. */
async function metric(p: StateProcess, name: string): Promise<number> {
  const { body } = await side(p, '/metrics');
  const line = body.split('\n').find((l) => l.startsWith(`${name} `));
  if (line === undefined) throw new Error(`no ${name} on /metrics`);
  return Number(line.split(' ')[1]);
}

async function freeBytes(): Promise<number> {
  const s = await statfs(mount);
  return s.bavail * s.bsize;
}

/** Incompressible text, so LevelDB's tables take as much room as its log. */
function bulky(label: string): string {
  return `${label}:${randomBytes(12 * 1024).toString('base64')}`;
}

async function readAll(c: StateClient, partition: string): Promise<JournalEntry[]> {
  const out: JournalEntry[] = [];
  for await (const event of c.read(partition)) out.push(event);
  return out;
}

/** The texts of the acknowledged appends, per partition, and the heads they reached. */
interface Acknowledged {
  readonly texts: Map<string, string[]>;
  readonly heads: Map<string, number>;
}

/**
 * Appends bulky messages round-robin until an append is refused; returns what was
 * acknowledged and the refusal. Fails the test if the disk never fills.
 */
async function fillUntilRefused(w: StateClient): Promise<Acknowledged & { refusal: unknown }> {
  const texts = new Map(PARTITIONS.map((p) => [p, [] as string[]]));
  const heads = new Map(PARTITIONS.map((p) => [p, 0]));
  for (let i = 0; i < 2000; i++) {
    const partition = PARTITIONS[i % PARTITIONS.length] ?? '';
    const text = bulky(`${partition}-${String(i)}`);
    try {
      const outcome = await w.append(partition, heads.get(partition) ?? 0, [message(text)]);
      heads.set(partition, outcome.head);
      texts.get(partition)?.push(text);
    } catch (refusal) {
      return { texts, heads, refusal };
    }
  }
  throw new Error('2000 appends of 16 KiB fit on a 16 MiB tmpfs: the disk never filled');
}

/** Every acknowledged text reads back in order, and every partition verifies. */
async function expectAllAcknowledged(p: StateProcess, acked: Acknowledged): Promise<void> {
  const verifier = await client(p, 'verifier');
  try {
    for (const partition of PARTITIONS) {
      const events = await readAll(verifier, partition);
      const texts = events
        .filter((e) => e.kind === EventKind.MessageReceived)
        .map((e) => decodePayload(EventKind.MessageReceived, e.payload).text);
      expect(texts).toEqual(acked.texts.get(partition) ?? []);
      expect(events.length).toBe(acked.heads.get(partition));
      const verified = await verifier.verify(partition);
      expect({ ok: verified.ok, failure: verified.failure, unsealed: verified.unsealed }).toEqual({
        ok: true,
        failure: undefined,
        unsealed: 0,
      });
    }
  } finally {
    verifier.close();
  }
}

describe('the state plane on a full disk (tmpfs)', () => {
  it('refuses appends when LevelDB hits ENOSPC, is not ready and says why, loses nothing acknowledged, and recovers when space is freed', async () => {
    // 8 MiB the test frees later; no threshold, so LevelDB itself meets the full disk.
    const filler = join(mount, 'filler');
    await writeFile(filler, randomBytes(8 * MiB));
    const p = await start({ STATE_DISK_MIN_FREE_BYTES: '0' });
    expect((await side(p, '/readyz')).status).toBe(200);
    const w = await client(p, 'controlPlane');
    try {
      const acked = await fillUntilRefused(w);
      expect(acked.refusal).toBeInstanceOf(StateCallError);
      const refusal = acked.refusal as StateCallError;
      expect(refusal.grpcStatus).toBe(status.RESOURCE_EXHAUSTED);
      expect(refusal.message).toMatch(/journal volume is full .*no space left on device/iu);
      expect(refusal.message).toMatch(/Free space on the state plane's volume or grow it/u);
      const total = [...acked.texts.values()].reduce((n, t) => n + t.length, 0);
      expect(total).toBeGreaterThan(50);

      const notReady = await side(p, '/readyz');
      expect(notReady.status).toBe(503);
      expect(notReady.body).toMatch(/^not ready: journal volume no_space: .*free bytes: \d+/u);
      expect(await metric(p, 'polychrome_state_disk_full')).toBe(1);
      await eventually('the failed write logged', () =>
        p.logs.some((l) => l.includes('a write failed; writes are refused')) ? true : undefined,
      );
      expect(await metric(p, 'polychrome_state_ready')).toBe(0);
      // Still refused, without touching LevelDB, at the head the writer saw.
      const partition = PARTITIONS[0] ?? '';
      await expect(
        w.append(partition, acked.heads.get(partition) ?? 0, [message('x')]),
      ).rejects.toMatchObject({
        grpcStatus: status.RESOURCE_EXHAUSTED,
      });
      // Reads and verify work on the full disk.
      await expectAllAcknowledged(p, acked);

      await rm(filler);
      await eventually('ready again after the filler is removed', async () =>
        (await side(p, '/readyz')).status === 200 ? true : undefined,
      );
      expect(await metric(p, 'polychrome_state_disk_full')).toBe(0);
      expect(await metric(p, 'polychrome_state_disk_free_bytes')).toBeGreaterThan(MiB);
      // The log line reaches this process through the child's stdout, the readiness over
      // HTTP: one does not wait for the other, so wait for the line too.
      await eventually('the reopen logged', () =>
        p.logs.some((l) => l.includes('journal database reopened')) ? true : undefined,
      );
      // Appends resume at the head every acknowledged append left.
      for (const name of PARTITIONS) {
        const outcome = await w.append(name, acked.heads.get(name) ?? 0, [
          message(`after-${name}`),
        ]);
        acked.heads.set(name, outcome.head);
        acked.texts.get(name)?.push(`after-${name}`);
      }
      await expectAllAcknowledged(p, acked);
      w.close();
      await stop(p);

      // A restart replays LevelDB's logs: everything acknowledged is there, nothing more.
      const again = await start({ STATE_DISK_MIN_FREE_BYTES: '0' });
      await expectAllAcknowledged(again, acked);
      await stop(again);
    } finally {
      w.close();
    }
  });

  it('refuses appends under STATE_DISK_MIN_FREE_BYTES before the disk is full, and takes them again once the filesystem grows', async () => {
    await rm(join(mount, 'journal'), { recursive: true, force: true });
    await rm(join(mount, 'journal-records'), { recursive: true, force: true });
    const free = await freeBytes();
    const p = await start({ STATE_DISK_MIN_FREE_BYTES: String(free + MiB) });
    const notReady = await side(p, '/readyz');
    expect(notReady.status).toBe(503);
    expect(notReady.body).toMatch(
      new RegExp(
        `^not ready: journal volume low_space: \\d+ bytes free on the journal volume, under the ${String(free + MiB)}`,
        'u',
      ),
    );
    expect(await metric(p, 'polychrome_state_disk_min_free_bytes')).toBe(free + MiB);
    const w = await client(p, 'controlPlane');
    try {
      const partition = PARTITIONS[1] ?? '';
      const { head } = await w.head(partition);
      const refused = await w
        .append(partition, head, [message('under threshold')])
        .catch((e: unknown) => e);
      expect(refused).toMatchObject({ grpcStatus: status.RESOURCE_EXHAUSTED });
      expect((refused as Error).message).toMatch(/journal volume is full \(\d+ bytes free/u);
      expect((await w.head(partition)).head).toBe(head);

      await run('mount', ['-o', 'remount,size=24m', mount]);
      await eventually('ready again after the remount', async () =>
        (await side(p, '/readyz')).body === 'ready\n' ? true : undefined,
      );
      expect((await w.append(partition, head, [message('grown')])).head).toBeGreaterThan(head);
    } finally {
      w.close();
      await stop(p);
    }
  });
});
