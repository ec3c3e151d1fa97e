import { createReadStream, type ReadStream } from 'node:fs';
import { mkdir, open, readdir, rename, rm } from 'node:fs/promises';
import { dirname } from 'node:path';

import { ClassicLevel } from 'classic-level';

import { AppError } from '../../common/errors';
import {
  BackupDatabase,
  decodeBackup,
  type BackupEntry,
  type BackupManifest,
} from '../../common/state-backup-format';
import { overlaps } from '../store/data-dirs';

/** What to restore where (docs/state-plane.md, "Backup and restore"). */
export interface RestoreOptions {
  /** The backup file (`polychrome state backup`). */
  readonly file: string;
  /** The journal's directory (`STATE_DATA_DIR`). */
  readonly dataDir: string;
  /** The records' directory (`STATE_RECORDS_DIR`). */
  readonly recordsDir: string;
  /** Replace what the directories hold; without it a non-empty one is refused. */
  readonly overwrite?: boolean;
}

/** What was restored. */
export interface RestoreReport {
  readonly manifest: BackupManifest;
}

/** The line both restore commands print once a restore is done. */
export function restoredLine(
  manifest: BackupManifest,
  dataDir: string,
  recordsDir: string,
): string {
  return (
    `restored ${String(manifest.journalEntries)} journal entries into ${dataDir} and ` +
    `${String(manifest.recordsEntries)} records entries into ${recordsDir} (backup taken at ` +
    `${manifest.takenAt}). Start the state plane with signing keys ` +
    `${manifest.signingKeyIds.join(', ')} and the records key it had, then run ` +
    '`polychrome state verify --all`'
  );
}

/** Entries per LevelDB batch while restoring. */
const BATCH_ENTRIES = 1000;

async function entriesOf(path: string): Promise<string[] | undefined> {
  try {
    return await readdir(path);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw new AppError(
      'failed_precondition',
      `cannot read ${path} (${(error as Error).message}); restore needs a directory it can write`,
      { cause: error },
    );
  }
}

async function checkTargets(options: RestoreOptions): Promise<void> {
  if (overlaps(options.dataDir, options.recordsDir)) {
    throw new AppError(
      'invalid_argument',
      `the records directory ${options.recordsDir} overlaps the journal directory ` +
        `${options.dataDir}; give each database its own directory, as the state plane is configured`,
    );
  }
  for (const dir of [options.dataDir, options.recordsDir]) {
    const held = await entriesOf(dir);
    if (held !== undefined && held.length > 0 && options.overwrite !== true) {
      throw new AppError(
        'failed_precondition',
        `${dir} is not empty (it holds ${String(held.length)} files): restore writes only into ` +
          'an empty or missing directory, and nothing was written. Stop the state plane and ' +
          'restore into a new volume, or pass --overwrite to replace what it holds',
        { details: { reason: 'not_empty', directory: dir } },
      );
    }
  }
}

/** Reads the whole file through the decoder's checks; returns the manifest. */
async function checkFile(
  file: string,
  onEntry: (entry: BackupEntry) => Promise<void> = () => Promise.resolve(),
): Promise<BackupManifest> {
  let stream: ReadStream;
  try {
    stream = createReadStream(file, { highWaterMark: 1024 * 1024 });
    await new Promise<void>((resolve, reject) => {
      stream.once('open', () => resolve());
      stream.once('error', reject);
    });
  } catch (error) {
    throw new AppError(
      'invalid_argument',
      `cannot read the backup file ${file}: ${(error as Error).message}`,
      { cause: error },
    );
  }
  const entries = decodeBackup(stream);
  try {
    for (;;) {
      const next = await entries.next();
      if (next.done === true) return next.value;
      await onEntry(next.value);
    }
  } finally {
    stream.destroy();
  }
}

/** fsyncs a directory, so the renames in it are durable. */
async function syncDirectory(path: string): Promise<void> {
  const handle = await open(path, 'r');
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}

function databaseAt(path: string): ClassicLevel<Uint8Array, Uint8Array> {
  return new ClassicLevel<Uint8Array, Uint8Array>(path, {
    keyEncoding: 'view',
    valueEncoding: 'view',
    createIfMissing: true,
    errorIfExists: true,
  });
}

/** Writes the file's entries into fresh databases at `journalDir` and `recordsDir`. */
async function writeDatabases(
  file: string,
  journalDir: string,
  recordsDir: string,
): Promise<BackupManifest> {
  const dbs = {
    [BackupDatabase.Journal]: databaseAt(journalDir),
    [BackupDatabase.Records]: databaseAt(recordsDir),
  };
  const pending = {
    [BackupDatabase.Journal]: [] as BackupEntry[],
    [BackupDatabase.Records]: [] as BackupEntry[],
  };
  const flush = async (database: BackupDatabase, sync: boolean): Promise<void> => {
    const batch = pending[database];
    pending[database] = [];
    await dbs[database].batch(
      batch.map((e) => ({ type: 'put' as const, key: e.key, value: e.value })),
      { sync },
    );
  };
  try {
    await Promise.all([dbs[1].open(), dbs[2].open()]);
    // The decoder checks the digest again: a file changed since the first pass fails here.
    const manifest = await checkFile(file, async (entry) => {
      pending[entry.database].push(entry);
      if (pending[entry.database].length >= BATCH_ENTRIES) await flush(entry.database, false);
    });
    // One synced write per database makes its log durable, and with it every batch before.
    await flush(BackupDatabase.Journal, true);
    await flush(BackupDatabase.Records, true);
    return manifest;
  } finally {
    await Promise.allSettled([dbs[1].close(), dbs[2].close()]);
  }
}

/**
 * Restores a backup file into the state plane's two directories, with the state plane
 * stopped. The file is read through once and checked whole (format version, trailer,
 * counts, digest) before anything is written; then both databases are written into
 * temporary directories beside the targets and renamed into place, so a restore that
 * fails leaves no half-restored database behind.
 *
 * @throws AppError `data_loss` (`backup_damaged`) for a damaged or foreign file;
 *   `failed_precondition` (`not_empty`) for a directory that holds files, without
 *   `overwrite`; `invalid_argument` for an unreadable file or overlapping directories.
 */
export async function restoreBackup(options: RestoreOptions): Promise<RestoreReport> {
  await checkTargets(options);
  await checkFile(options.file);
  const staging = (dir: string): string => `${dir.replace(/[/\\]+$/, '')}.restoring`;
  const [journalTmp, recordsTmp] = [staging(options.dataDir), staging(options.recordsDir)];
  await Promise.all([journalTmp, recordsTmp].map((d) => rm(d, { recursive: true, force: true })));
  await Promise.all([journalTmp, recordsTmp].map((d) => mkdir(dirname(d), { recursive: true })));
  let manifest: BackupManifest;
  try {
    manifest = await writeDatabases(options.file, journalTmp, recordsTmp);
    // Checked again just before replacing: nothing else may have filled them meanwhile.
    await checkTargets(options);
    for (const [tmp, dir] of [
      [journalTmp, options.dataDir],
      [recordsTmp, options.recordsDir],
    ] as const) {
      await rm(dir, { recursive: true, force: true });
      await rename(tmp, dir);
      await syncDirectory(dirname(dir));
    }
  } catch (error) {
    await Promise.all([journalTmp, recordsTmp].map((d) => rm(d, { recursive: true, force: true })));
    throw error;
  }
  return { manifest };
}
