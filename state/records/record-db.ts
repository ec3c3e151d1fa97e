import type {
  AbstractBatchOptions,
  AbstractLevel,
  AbstractSnapshot,
  AbstractSublevelOptions,
} from 'abstract-level';

import { AppError, isAppError } from '../../common/errors';

/**
 * A LevelDB handle the records can live in: the state plane's ClassicLevel database or a
 * sublevel of it. The records take their own sublevel {@link RECORDS_SUBLEVEL} inside it
 * and never read or write a key outside that sublevel.
 */
export interface RecordsParent {
  sublevel<K, V>(
    name: string,
    options: AbstractSublevelOptions<K, V>,
  ): AbstractLevel<string | Buffer | Uint8Array, K, V>;
}

/** The sublevel that holds every record key (LevelDB key prefix `!records!`). */
export const RECORDS_SUBLEVEL = 'records';

/** One write of a batch, on a key of the records sublevel. */
export type RecordOp =
  | { readonly type: 'put'; readonly key: string; readonly value: string }
  | { readonly type: 'del'; readonly key: string };

/** Reads of the records: the live database, or one point-in-time snapshot of it. */
export interface RecordReader {
  /**
   * The value at `key`, or `undefined`.
   *
   * @throws AppError `unavailable` when LevelDB fails (closed database, I/O error).
   */
  get(key: string): Promise<string | undefined>;
  /**
   * Entries whose key starts with `prefix`, in key order, starting after the key
   * `prefix + after` when `after` is given, at most `limit` of them.
   *
   * @throws AppError `unavailable` when LevelDB fails.
   */
  scan(
    prefix: string,
    options?: { after?: string; limit?: number },
  ): Promise<[key: string, value: string][]>;
}

/**
 * The records' only contact with LevelDB: string keys and string (JSON) values under the
 * `records` sublevel, atomic synced batches, and one writer at a time.
 *
 * LevelDB has no transactions, so a check-then-write (is this identity free? is the
 * version still 3?) is only safe if no other write runs between the read and the batch.
 * {@link RecordDb.exclusive} runs such sections one at a time. The state plane is the only
 * writer of records (docs/design.md) and runs as one process, so an in-process queue is enough;
 * reads outside it see either the state before or after a batch, never half of one. A read
 * that follows an index to a record outside the section uses {@link RecordDb.snapshot},
 * so a batch landing between the two reads cannot make them disagree.
 */
export class RecordDb implements RecordReader {
  private readonly level: AbstractLevel<string | Buffer | Uint8Array, string, string>;
  private tail: Promise<void> = Promise.resolve();

  constructor(parent: RecordsParent) {
    this.level = parent.sublevel<string, string>(RECORDS_SUBLEVEL, {
      keyEncoding: 'utf8',
      valueEncoding: 'utf8',
    });
  }

  /**
   * Runs `task` once every earlier exclusive task has settled; resolves or rejects as
   * `task` does. A failing task does not block later ones.
   */
  async exclusive<T>(task: () => Promise<T>): Promise<T> {
    const previous = this.tail;
    let release = (): void => undefined;
    this.tail = new Promise<void>((resolve) => {
      release = resolve;
    });
    try {
      await previous;
      return await task();
    } finally {
      release();
    }
  }

  /**
   * Runs `task` with reads from one snapshot of the database, closed when `task` settles.
   *
   * @throws AppError `unavailable` when LevelDB cannot take a snapshot; whatever `task`
   *   throws.
   */
  async snapshot<T>(task: (reader: RecordReader) => Promise<T>): Promise<T> {
    let snapshot: AbstractSnapshot;
    try {
      snapshot = this.level.snapshot();
    } catch (error) {
      throw engineError('read', error);
    }
    try {
      return await task({
        get: (key) => this.readAt(key, snapshot),
        scan: (prefix, options) => this.scanAt(prefix, options, snapshot),
      });
    } finally {
      await snapshot.close();
    }
  }

  get(key: string): Promise<string | undefined> {
    return this.readAt(key, undefined);
  }

  scan(
    prefix: string,
    options: { after?: string; limit?: number } = {},
  ): Promise<[key: string, value: string][]> {
    return this.scanAt(prefix, options, undefined);
  }

  private async readAt(
    key: string,
    snapshot: AbstractSnapshot | undefined,
  ): Promise<string | undefined> {
    try {
      return await this.level.get(key, snapshot === undefined ? {} : { snapshot });
    } catch (error) {
      throw engineError('read', error);
    }
  }

  private async scanAt(
    prefix: string,
    options: { after?: string; limit?: number } = {},
    snapshot: AbstractSnapshot | undefined,
  ): Promise<[key: string, value: string][]> {
    const range = {
      ...(options.after === undefined ? { gte: prefix } : { gt: prefix + options.after }),
      lt: prefixEnd(prefix),
      ...(options.limit === undefined ? {} : { limit: options.limit }),
      ...(snapshot === undefined ? {} : { snapshot }),
    };
    try {
      return await this.level.iterator(range).all();
    } catch (error) {
      throw engineError('read', error);
    }
  }

  /**
   * Applies `ops` in one atomic batch and resolves once it is on stable storage
   * (`sync: true`): after a crash either every op is there or none is.
   *
   * @throws AppError `unavailable` when LevelDB fails; then nothing was written.
   */
  async write(ops: readonly RecordOp[]): Promise<void> {
    if (ops.length === 0) return;
    try {
      await this.level.batch([...ops], SYNC);
    } catch (error) {
      throw engineError('write', error);
    }
  }
}

/**
 * classic-level's write option: fsync the log before the batch resolves. The abstract
 * sublevel type does not list it, but a sublevel hands its options to the root database
 * unchanged (abstract-level `_batch`), where classic-level reads `sync`.
 */
const SYNC: AbstractBatchOptions<string, string> & { readonly sync: true } = {
  keyEncoding: 'utf8',
  valueEncoding: 'utf8',
  sync: true,
};

/** The first string after every string that starts with `prefix`. */
function prefixEnd(prefix: string): string {
  const last = prefix.charCodeAt(prefix.length - 1);
  return prefix.slice(0, -1) + String.fromCharCode(last + 1);
}

function engineError(action: 'read' | 'write', error: unknown): AppError {
  if (isAppError(error)) return error;
  return new AppError(
    'unavailable',
    `the records database failed to ${action}; check the state volume and restart the ` +
      'state plane if it persists',
    { cause: error },
  );
}
