import { createHash } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { ClassicLevel } from 'classic-level';

import { AppError } from '../../../common/errors';
import { RecordStore } from '../record-store';
import { deriveRecordsKey, type RecordsKey } from '../records-key';

/** Test-only records key N: SHA-256("polychrome/test-only/records-key/N"). */
export function testKey(n: number): RecordsKey {
  return deriveRecordsKey(testKeyBytes(n));
}

/** The 32 bytes of {@link testKey}. */
export function testKeyBytes(n: number): Uint8Array {
  return new Uint8Array(
    createHash('sha256')
      .update(`polychrome/test-only/records-key/${String(n)}`)
      .digest(),
  );
}

/** A clock the test moves by hand. */
export interface ManualClock {
  nowMs: () => number;
  advance: (ms: number) => void;
}

export function manualClock(startMs = Date.UTC(2026, 8, 1, 12, 0, 0)): ManualClock {
  let now = startMs;
  return {
    nowMs: () => now,
    advance: (ms) => {
      now += ms;
    },
  };
}

/**
 * A records store on a real LevelDB in a fresh temporary directory, with helpers to
 * reopen it, read every raw record and clean up.
 */
export interface Harness {
  readonly path: string;
  readonly clock: ManualClock;
  db: ClassicLevel<Uint8Array, Uint8Array>;
  store: RecordStore;
  /** Closes the database and opens it again (same key unless given). */
  reopen(key?: RecordsKey): Promise<RecordStore>;
  /** Every key and value of the records sublevel, as text, in key order. */
  rawRecords(): Promise<[string, string][]>;
  /** Overwrites one raw record (to simulate corruption). */
  putRaw(key: string, value: string): Promise<void>;
  close(): Promise<void>;
}

export async function openHarness(key: RecordsKey = testKey(0)): Promise<Harness> {
  const path = await mkdtemp(join(tmpdir(), 'polychrome-records-'));
  const clock = manualClock();
  let counter = 0;
  // Ids from a counter, so a run repeats exactly; zero-padded so key order is id order.
  const newId = (): string => `id-${String(++counter).padStart(4, '0')}`;
  const open = async (
    k: RecordsKey,
  ): Promise<[ClassicLevel<Uint8Array, Uint8Array>, RecordStore]> => {
    // The journal store's encoding: raw bytes at the root, as the state plane opens it.
    const db = new ClassicLevel<Uint8Array, Uint8Array>(path, {
      keyEncoding: 'view',
      valueEncoding: 'view',
    });
    await db.open();
    const store = new RecordStore({ db, key: k, nowMs: clock.nowMs, newId });
    await store.open();
    return [db, store];
  };
  const [db, store] = await open(key);
  const harness: Harness = {
    path,
    clock,
    db,
    store,
    async reopen(k = key) {
      await harness.db.close();
      [harness.db, harness.store] = await open(k);
      return harness.store;
    },
    async rawRecords() {
      const records = harness.db.sublevel<string, string>('records', {
        keyEncoding: 'utf8',
        valueEncoding: 'utf8',
      });
      return records.iterator().all();
    },
    async putRaw(rawKey, value) {
      const records = harness.db.sublevel<string, string>('records', {
        keyEncoding: 'utf8',
        valueEncoding: 'utf8',
      });
      await records.put(rawKey, value);
    },
    async close() {
      await harness.db.close();
      await rm(path, { recursive: true, force: true });
    },
  };
  return harness;
}

/** The AppError `promise` rejects with; fails the test if it resolves or throws another. */
export async function rejection(promise: Promise<unknown>): Promise<AppError> {
  try {
    await promise;
  } catch (error) {
    if (error instanceof AppError) return error;
    throw error;
  }
  throw new Error('expected a rejection with an AppError');
}
