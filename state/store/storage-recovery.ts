/**
 * Opening the journal store's partitions, at start and again after a storage failure
 * (storage-guard.ts): the store (journal-store.ts) calls these with its parts.
 */
import type { Sha256 } from '../journal/sha256';
import type { GroupCommitter } from './group-commit';
import { openReport, openStore } from './journal-open';
import type { PartitionTable } from './journal-partitions';
import type { OpenReport } from './journal-store-types';
import type { KvStore } from './level-kv';
import type { StorageGuard } from './storage-guard';
import type { StoreLifecycle } from './store-lifecycle';

/** What reading the partitions needs. */
export interface LoadParts {
  readonly kv: KvStore;
  readonly hash: Sha256;
  readonly location: string;
  readonly table: PartitionTable;
}

/**
 * Reads every partition's tail (journal-open.ts) into `table`, replacing what it held.
 *
 * @throws AppError as `openStore`.
 */
export async function loadPartitions(parts: LoadParts): Promise<OpenReport> {
  const opened = await openStore(parts.kv, parts.hash, parts.location);
  parts.table.load(opened);
  return openReport(opened);
}

/**
 * The store's open(): reads the partitions; the lifecycle is open after, closed when it
 * failed.
 *
 * @throws AppError as `openStore`.
 */
export async function openPartitions(parts: RecoverParts): Promise<OpenReport> {
  parts.life.startOpening();
  try {
    const report = await loadPartitions(parts);
    parts.life.finishOpening(true);
    return report;
  } catch (error) {
    parts.life.finishOpening(false);
    throw error;
  }
}

/** What {@link recoverStorage} and {@link openPartitions} need besides {@link LoadParts}. */
export interface RecoverParts extends LoadParts {
  readonly life: StoreLifecycle;
  readonly committer: GroupCommitter;
  readonly storage: StorageGuard;
}

/**
 * After a write failed for storage reasons (`storage.needsReopen()`): refuses calls, waits
 * for the ones in flight (their writes are refused) and the group commit to settle,
 * reopens the database (LevelDB replays its log to the last whole record and starts a new
 * log) and reads the partitions again as open() does, so writes resume with nothing
 * acknowledged lost and nothing half-written visible. Reads in flight at that moment fail
 * with `unavailable`, to be retried. Resolves `undefined` when no write failed.
 *
 * @throws the engine's error when the database cannot reopen (writes stay refused);
 *   AppError `unavailable` when the store is not open.
 */
export async function recoverStorage(parts: RecoverParts): Promise<OpenReport | undefined> {
  if (!parts.storage.needsReopen()) return undefined;
  parts.life.assertOpen();
  await parts.life.startRecovering();
  try {
    await parts.committer.whenIdle();
    await parts.storage.reopen();
    return await loadPartitions(parts);
  } finally {
    parts.life.finishRecovering();
  }
}
