import type { RecordDb } from './record-db';
import type { RecordsKey } from './records-key';

/** What every record kind shares: the database, the clock, ids and the records key. */
export interface RecordContext {
  readonly db: RecordDb;
  /** Milliseconds since the epoch; injected so tests control expiry. */
  readonly nowMs: () => number;
  /** A fresh record id (a UUID by default); must pass `checkRecordId`. */
  readonly newId: () => string;
  readonly key: RecordsKey;
}
