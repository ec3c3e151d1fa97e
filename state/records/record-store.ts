import { randomUUID } from 'node:crypto';

import { AppError } from '../../common/errors';
import { CeremonyRecords } from './ceremony-records';
import { CredentialRecords } from './credential-records';
import { PersonaPayments } from './persona-payments';
import { PersonaRecords } from './persona-records';
import type { RecordContext } from './record-context';
import { RecordDb, type RecordsParent } from './record-db';
import { FORMAT_KEY, RECORDS_FORMAT } from './record-keys';
import type { RecordsKey } from './records-key';
import { SessionRecords } from './session-records';

/** What a {@link RecordStore} needs. */
export interface RecordStoreOptions {
  /**
   * The state plane's LevelDB database (or a sublevel of it). The store keeps every key in
   * its own sublevel `records` and neither opens nor closes `db`: its owner does.
   */
  readonly db: RecordsParent;
  /** The records key (records-key.ts: `loadRecordsKey` / `deriveRecordsKey`). */
  readonly key: RecordsKey;
  /** @default Date.now */
  readonly nowMs?: () => number;
  /** @default crypto.randomUUID */
  readonly newId?: () => string;
}

/**
 * The state plane's records: personas, sessions, credentials and ceremonies, on LevelDB.
 * The state plane is their only writer (docs/design.md); every change is one atomic, synced
 * batch that updates the record and its indexes together.
 *
 * @example
 * const store = new RecordStore({ db, key: await loadRecordsKey(keyPath) });
 * await store.open();
 * const ada = await store.personas.create({ displayName: 'Ada', identities: ['email:ada@example.com'] });
 * const { token } = await store.sessions.create(ada.id);
 */
export class RecordStore {
  readonly personas: PersonaRecords;
  readonly sessions: SessionRecords;
  readonly credentials: CredentialRecords;
  readonly ceremonies: CeremonyRecords;
  /** Personas' payment policies and counted payments. */
  readonly personaPayments: PersonaPayments;
  private readonly db: RecordDb;

  constructor(options: RecordStoreOptions) {
    this.db = new RecordDb(options.db);
    const ctx: RecordContext = {
      db: this.db,
      key: options.key,
      nowMs: options.nowMs ?? Date.now,
      newId: options.newId ?? randomUUID,
    };
    this.personas = new PersonaRecords(ctx);
    this.sessions = new SessionRecords(ctx, this.personas);
    this.credentials = new CredentialRecords(ctx, this.personas);
    this.ceremonies = new CeremonyRecords(ctx, this.personas);
    this.personaPayments = new PersonaPayments(ctx, this.personas);
  }

  /**
   * Checks the records' format marker, writing it into a database that has none. Call it
   * once, after the database is open and before serving.
   *
   * @throws AppError `failed_precondition` when the records were written in another
   *   format; `unavailable` when LevelDB fails.
   */
  async open(): Promise<void> {
    await this.db.exclusive(async () => {
      const format = await this.db.get(FORMAT_KEY);
      if (format === RECORDS_FORMAT) return;
      if (format !== undefined) {
        throw new AppError(
          'failed_precondition',
          `the records in this database are in format ${JSON.stringify(format)}, not ` +
            `${RECORDS_FORMAT}; run a state plane that reads that format`,
          { details: { format } },
        );
      }
      await this.db.write([{ type: 'put', key: FORMAT_KEY, value: RECORDS_FORMAT }]);
    });
  }
}
