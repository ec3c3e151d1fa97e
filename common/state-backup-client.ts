import { BackupClient as BackupGrpcClient } from '../proto/gen/polychrome/state/v1/backup';
import type { BackupDatabase } from './state-backup-format';
import { type BackupEntry } from './state-backup-format';
import { StateCallError } from './state-call-errors';
import { streamStateCall } from './state-calls';
import { stateChannel, type StateClientOptions } from './state-channel';

/** What the state plane says once every entry has been streamed. */
export interface BackupStreamSummary {
  readonly journalEntries: number;
  readonly recordsEntries: number;
  /** SHA-256 of the entries as the backup file lays them out. */
  readonly sha256: Uint8Array;
  readonly takenAt: string;
  readonly signingKeyIds: readonly string[];
}

/** One message of a backup stream: entries, or the closing summary. */
export type BackupStreamItem =
  | { readonly type: 'entries'; readonly entries: readonly BackupEntry[] }
  | { readonly type: 'summary'; readonly summary: BackupStreamSummary };

function databaseOf(value: number): BackupDatabase {
  if (value === 1 || value === 2) return value;
  throw new StateCallError(
    'internal',
    `the state plane's backup stream names database ${String(value)}, neither journal nor records`,
    { method: 'Take', grpcStatus: 0, fromServer: true },
  );
}

/**
 * The client of the state plane's Backup service (docs/state-plane.md, "Backup and
 * restore") over mutual TLS; the certificate must carry the backup role. Its one call has
 * no deadline: a large store streams for as long as it takes.
 */
export class StateBackupClient {
  private readonly grpc: BackupGrpcClient;
  private readonly address: string;

  constructor(options: StateClientOptions) {
    this.address = options.address;
    const channel = stateChannel(options);
    this.grpc = new BackupGrpcClient(options.address, channel.credentials, channel.options);
  }

  /**
   * Streams the journal's and the records' entries, then the summary.
   *
   * @throws StateCallError from the iterator: `permission_denied` without the backup role,
   *   `unavailable` when the state plane is unreachable or reopened its store meanwhile.
   */
  take(options: { readonly signal?: AbortSignal } = {}): AsyncIterable<BackupStreamItem> {
    return streamStateCall(
      this.address,
      'Take',
      options.signal,
      (metadata) => this.grpc.take({}, metadata),
      (item): BackupStreamItem | undefined => {
        if (item.item?.$case === 'entries') {
          return {
            type: 'entries',
            entries: item.item.value.entries.map((e) => ({
              database: databaseOf(e.database),
              key: e.key,
              value: e.value,
            })),
          };
        }
        if (item.item?.$case === 'summary') return { type: 'summary', summary: item.item.value };
        return undefined;
      },
    );
  }

  /** Closes the channel; a call in flight fails. Idempotent. */
  close(): void {
    this.grpc.close();
  }
}
