import { open, rename, rm, stat, type FileHandle } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';

import { AppError } from '../common/errors';
import type { Env } from '../common/config';
import {
  BACKUP_FORMAT,
  BACKUP_FORMAT_VERSION,
  backupFooter,
  backupHeader,
  BackupTally,
  type BackupManifest,
} from '../common/state-backup-format';
import { StateBackupClient, type BackupStreamItem } from '../common/state-backup-client';
import { ExitCode, parse, stringValue, UsageError, write, type CliIo } from './cli-support';
import { connectionOptions, stateConnectionOf } from './state-commands';

/*
 * `polychrome state backup -o FILE` (docs/state-plane.md, "Backup and restore";
 * docs/operations.md): an online backup of the state plane's journal and records through
 * its Backup RPC, with a certificate holding the backup role. Restoring is the state
 * plane's own command (`main.js restore FILE`, state/backup/restore-command.ts): it writes
 * LevelDB, whose native binding the state plane's image carries and this CLI does not.
 */

/** Writes, flushes to disk and renames: the file at `path` is whole or absent. */
async function writeAtomically(
  path: string,
  fill: (out: FileHandle) => Promise<void>,
): Promise<void> {
  const partial = join(dirname(path), `.${basename(path)}.${String(process.pid)}.partial`);
  const out = await open(partial, 'wx', 0o600);
  try {
    await fill(out);
    await out.sync();
    await out.close();
    await rename(partial, path);
  } catch (error) {
    await out.close().catch(() => undefined);
    await rm(partial, { force: true });
    throw error;
  }
  const directory = await open(dirname(path), 'r');
  try {
    await directory.sync();
  } finally {
    await directory.close();
  }
}

function mismatch(what: string): AppError {
  return new AppError(
    'data_loss',
    `the backup stream does not match the state plane's summary: ${what}; no file was ` +
      'written. Take the backup again',
  );
}

/** Writes the stream to `out` as the backup file; returns its manifest. */
async function writeStream(
  out: FileHandle,
  items: AsyncIterable<BackupStreamItem>,
): Promise<BackupManifest> {
  await out.write(backupHeader());
  const tally = new BackupTally();
  for await (const item of items) {
    if (item.type === 'entries') {
      await out.write(Buffer.concat(item.entries.map((e) => tally.add(e))));
      continue;
    }
    const { summary } = item;
    if (
      summary.journalEntries !== tally.journalEntries ||
      summary.recordsEntries !== tally.recordsEntries
    ) {
      throw mismatch(
        `it counts ${String(summary.journalEntries)} journal and ${String(summary.recordsEntries)} ` +
          `records entries, ${String(tally.journalEntries)} and ${String(tally.recordsEntries)} arrived`,
      );
    }
    const sha256 = tally.digest().toString('hex');
    if (sha256 !== Buffer.from(summary.sha256).toString('hex'))
      throw mismatch('the digest differs');
    const manifest: BackupManifest = {
      format: BACKUP_FORMAT,
      version: BACKUP_FORMAT_VERSION,
      takenAt: summary.takenAt,
      journalEntries: tally.journalEntries,
      recordsEntries: tally.recordsEntries,
      sha256,
      signingKeyIds: summary.signingKeyIds,
    };
    await out.write(backupFooter(manifest));
    return manifest;
  }
  throw mismatch('the stream ended before its summary');
}

async function absent(path: string): Promise<boolean> {
  try {
    await stat(path);
    return false;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return true;
    throw error;
  }
}

/** `state backup -o FILE`: the state plane's journal and records, online, into one file. */
export async function stateBackup(
  args: readonly string[],
  env: Env | undefined,
  io: CliIo,
): Promise<ExitCode> {
  const { values, positionals } = parse(args, {
    ...connectionOptions,
    output: { type: 'string', short: 'o' },
  });
  if (positionals.length > 0) {
    throw new UsageError(`state backup takes no arguments, got ${positionals.join(' ')}`);
  }
  const file = stringValue(values.output);
  if (file === undefined || file === '-') {
    throw new UsageError('state backup needs -o FILE (a file, written whole or not at all)');
  }
  if (!(await absent(file))) {
    throw new UsageError(`${file} exists; name a new file (a backup never overwrites one)`);
  }
  const client = new StateBackupClient(await stateConnectionOf(values, env));
  let manifest: BackupManifest | undefined;
  try {
    await writeAtomically(file, async (out) => {
      manifest = await writeStream(
        out,
        client.take(io.signal === undefined ? {} : { signal: io.signal }),
      );
    });
  } finally {
    client.close();
  }
  await write(
    io.stderr,
    `state backup written to ${file}: ${String(manifest?.journalEntries)} journal and ` +
      `${String(manifest?.recordsEntries)} records entries, sha256 ${String(manifest?.sha256)}, ` +
      `taken at ${String(manifest?.takenAt)}\n`,
  );
  return ExitCode.Ok;
}
