import { ClassicLevel } from 'classic-level';

import { AppError } from '../../common/errors';
import { RecordStore } from '../records/record-store';
import { type RecordsKey } from '../records/records-key';

/**
 * The records' own LevelDB database, apart from the journal's: LevelDB allows one open
 * instance per directory and the journal store opens (and owns) its directory, so the
 * records cannot share it. One directory per database keeps each one's lock, files and
 * backups separate (docs/state-plane.md, "Storage").
 */
export class RecordsDatabase {
  /** The records on the database; usable once {@link RecordsDatabase.open} resolved. */
  readonly records: RecordStore;
  private readonly db: ClassicLevel<string, string>;
  private closing: Promise<void> | undefined;

  /**
   * @param location the directory (created when missing); never the journal's.
   * @param key the records key (records-key.ts `loadRecordsKey`).
   */
  constructor(
    private readonly location: string,
    key: RecordsKey,
    options: { readonly nowMs?: () => number } = {},
  ) {
    this.db = new ClassicLevel<string, string>(location, {
      keyEncoding: 'utf8',
      valueEncoding: 'utf8',
      createIfMissing: true,
    });
    this.records = new RecordStore({
      db: this.db,
      key,
      ...(options.nowMs === undefined ? {} : { nowMs: options.nowMs }),
    });
  }

  /**
   * Opens the database and checks the records' format marker.
   *
   * @throws AppError `unavailable` when LevelDB cannot open the directory (another process
   *   holds its lock, or I/O fails), naming the directory; `failed_precondition` when the
   *   records are in another format.
   */
  async open(): Promise<void> {
    try {
      await this.db.open();
    } catch (cause) {
      throw new AppError(
        'unavailable',
        `cannot open the records database ${this.location}: another process may hold it, ` +
          'or the volume is not writable; stop the other state plane or fix the volume',
        { details: { location: this.location }, cause },
      );
    }
    await this.records.open();
  }

  /**
   * Every key and value of the database in key order, as bytes, from one LevelDB snapshot
   * taken when called: the records half of a backup (docs/state-plane.md,
   * "Backup and restore"). Credentials stay sealed with the records key, which is not in it.
   */
  backupEntries(): AsyncIterable<readonly [Uint8Array, Uint8Array]> {
    return this.db.iterator<Uint8Array, Uint8Array>({ keyEncoding: 'view', valueEncoding: 'view' });
  }

  /** Closes the database; calls after it fail with `unavailable`. Idempotent. */
  close(): Promise<void> {
    this.closing ??= this.db.close();
    return this.closing;
  }
}
