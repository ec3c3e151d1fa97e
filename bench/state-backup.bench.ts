/*
 * The state plane's backup and restore (docs/state-plane.md, "Backup and restore") on a
 * store of TURNS turns (3 events and a signed root each) spread over 64 partitions: the
 * time of `polychrome state backup` (the real CLI code in process, the Backup RPC over
 * mutual TLS from a real state server in this process, the file hashed, fsynced and
 * renamed) and of the restore (the file read and checked twice, both databases written),
 * each printed beside a baseline measured in the same run on the same disk: iterating the
 * same snapshot in process with no transport and no file, and copying the backup file.
 * No aim: the figures size a backup window. Usage:
 *   npx tsx bench/state-backup.bench.ts [turns] [directory on the disk to measure]
 */
import { copyFile, mkdtemp, rm, stat } from 'node:fs/promises';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';

import { runCaptured } from '../cli/testdata/captured-run';
import { restoreBackup } from '../state/backup/restore-backup';
import {
  makeTestPki,
  startTestStateServer,
  turn,
  type TestStateServer,
} from '../state/server/testdata/fixtures';

const TURNS = Number(process.argv[2] ?? '20000');
const PARTITIONS = 64;

async function fill(state: TestStateServer): Promise<void> {
  const heads = new Array<number>(PARTITIONS).fill(0);
  const perPartition = Math.ceil(TURNS / PARTITIONS);
  await Promise.all(
    heads.map(async (_, p) => {
      const partition = `conv-bench-${String(p)}`;
      for (let i = 0; i < perPartition; i++) {
        heads[p] = (
          await state.journal.append(
            partition,
            heads[p] ?? 0,
            turn(`${partition}-${String(i)}`, 200),
          )
        ).head;
      }
    }),
  );
}

async function seconds(work: () => Promise<unknown>): Promise<number> {
  const t0 = performance.now();
  await work();
  return (performance.now() - t0) / 1000;
}

async function main(): Promise<void> {
  const dir = await mkdtemp(join(process.argv[3] ?? tmpdir(), 'polychrome-backup-bench-'));
  const pki = await makeTestPki(dir);
  const state = await startTestStateServer(join(dir, 'live'), pki, { signerSeed: 3 });
  try {
    await fill(state);
    let entries = 0;
    const iterateS = await seconds(async () => {
      for await (const _ of state.journal.backupEntries()) entries += 1;
      for await (const _ of state.recordsDb.backupEntries()) entries += 1;
    });
    const file = join(dir, 'state.pcbackup');
    const flags = ['--address', state.address, '--ca', pki.ca.certPath];
    const identity = ['--cert', pki.backup.certPath, '--key', pki.backup.keyPath];
    let taken = { code: 0, stderr: '' };
    const backupS = await seconds(async () => {
      taken = await runCaptured(['state', 'backup', '-o', file, ...flags, ...identity], {});
    });
    if (taken.code !== 0) throw new Error(`the backup failed: ${taken.stderr}`);
    const bytes = (await stat(file)).size;
    const copyS = await seconds(() => copyFile(file, join(dir, 'copy.pcbackup')));
    const target = join(dir, 'restored');
    const restoreS = await seconds(() =>
      restoreBackup({
        file,
        dataDir: join(target, 'journal'),
        recordsDir: join(target, 'records'),
      }),
    );
    const mb = bytes / 1e6;
    console.log(
      `load average ${loadavg()
        .map((l) => l.toFixed(1))
        .join(' ')} (figures are noisy on a busy host)`,
    );
    console.log(
      `backup of ${TURNS.toLocaleString('en-US')} turns in ${String(PARTITIONS)} partitions ` +
        `(${entries.toLocaleString('en-US')} LevelDB entries, ${mb.toFixed(1)} MB file): ` +
        `${backupS.toFixed(2)} s, ${(mb / backupS).toFixed(0)} MB/s over mTLS to an fsynced file; ` +
        `baseline: the same snapshots iterated in process ${iterateS.toFixed(2)} s`,
    );
    console.log(
      `restore of that file: ${restoreS.toFixed(2)} s (${(mb / restoreS).toFixed(0)} MB/s, ` +
        `read and checked twice, both databases written); baseline: copying the file ` +
        `${copyS.toFixed(2)} s`,
    );
  } finally {
    await state.close();
    await rm(dir, { recursive: true, force: true });
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
