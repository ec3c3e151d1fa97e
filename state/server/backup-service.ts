import type { Logger } from 'pino';

import { BackupDatabase, BackupTally } from '../../common/state-backup-format';
import type {
  BackupEntry,
  BackupItem,
  BackupServer,
  TakeBackupRequest,
} from '../../proto/gen/polychrome/state/v1/backup';
import { createCallHandlers } from './call-handlers';
import { StateService } from './rpc-roles';
import type { StateMetrics } from './state-metrics';

/** Raw keys and values of one database, from one LevelDB snapshot taken at the first `next()`. */
export type SnapshotEntries = () => AsyncIterable<readonly [Uint8Array, Uint8Array]>;

/** Options of {@link createBackupService}. */
export interface BackupServiceOptions {
  /** The journal database (`JournalStore.backupEntries`). */
  readonly journal: SnapshotEntries;
  /** The records database (`RecordsDatabase.backupEntries`). */
  readonly records: SnapshotEntries;
  /** The signing key ids the state plane holds, for the backup's manifest. */
  readonly signingKeyIds: readonly string[];
  readonly log: Logger;
  readonly metrics?: StateMetrics;
  /** @default Date.now */
  readonly nowMs?: () => number;
}

/** A message carries entries up to about this many bytes (under gRPC's 4 MiB default). */
const MESSAGE_BYTES = 1024 * 1024;

/**
 * The Backup service (proto/polychrome/state/v1/backup.proto; docs/state-plane.md, "Backup
 * and restore"): `Take` streams every key and value of the journal database, then of the
 * records database, each from one LevelDB snapshot, while appends go on; then a summary
 * with the counts and the SHA-256 of the entries as the backup file lays them out
 * (common/state-backup-format.ts). Both snapshots are taken before the first message,
 * in the same event-loop turn. Only the backup role may call it (rpc-roles.ts).
 */
export function createBackupService(options: BackupServiceOptions): BackupServer {
  const { streaming } = createCallHandlers({ ...options, service: StateService.Backup });
  const now = options.nowMs ?? Date.now;

  async function* items(signal: AbortSignal, log: Logger): AsyncGenerator<BackupItem> {
    const sources: [BackupDatabase, AsyncIterator<readonly [Uint8Array, Uint8Array]>][] = [
      [BackupDatabase.Journal, options.journal()[Symbol.asyncIterator]()],
      [BackupDatabase.Records, options.records()[Symbol.asyncIterator]()],
    ];
    // Each first next() opens its iterator, which takes its snapshot synchronously.
    const firsts = sources.map(([, it]) => it.next());
    const takenAt = new Date(now()).toISOString();
    const tally = new BackupTally();
    try {
      for (const [index, [database, it]] of sources.entries()) {
        let batch: BackupEntry[] = [];
        let bytes = 0;
        for (let next = await firsts[index]!; next.done !== true; next = await it.next()) {
          signal.throwIfAborted();
          const [key, value] = next.value;
          tally.add({ database, key, value });
          batch.push({ database, key: Buffer.from(key), value: Buffer.from(value) });
          bytes += key.length + value.length + 16;
          if (bytes >= MESSAGE_BYTES) {
            yield { item: { $case: 'entries', value: { entries: batch } } };
            batch = [];
            bytes = 0;
          }
        }
        if (batch.length > 0) yield { item: { $case: 'entries', value: { entries: batch } } };
      }
    } finally {
      // Releases the snapshots of an iteration that failed or was cancelled.
      for (const [, it] of sources) await it.return?.().catch(() => undefined);
      await Promise.allSettled(firsts);
    }
    const summary = {
      journalEntries: tally.journalEntries,
      recordsEntries: tally.recordsEntries,
      sha256: tally.digest(),
      takenAt,
      signingKeyIds: [...options.signingKeyIds],
    };
    log.info(
      { journalEntries: summary.journalEntries, recordsEntries: summary.recordsEntries },
      'backup streamed',
    );
    yield { item: { $case: 'summary', value: summary } };
  }

  return {
    take: streaming<TakeBackupRequest, BackupItem>('Take', (_request, { signal, log }) =>
      items(signal, log),
    ),
  };
}
