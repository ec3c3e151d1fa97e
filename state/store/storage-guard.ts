/**
 * The journal store's guard against a full (or failing) volume (docs/state-plane.md, "Full
 * disk"). Every write of the store goes through it. It refuses writes, without touching
 * LevelDB, while the volume is known to be short of space or a write has failed for
 * storage reasons; the refusal is `resource_exhausted` naming what is full and what to do.
 *
 * Why a failed write stops all writes until the database is reopened: LevelDB appends each
 * batch to its log file and keeps its own idea of the log's offset. A write cut short by
 * ENOSPC leaves a partial record on disk while LevelDB's offset has moved past it, so the
 * records written after it may not be readable when the log is replayed after a crash, and
 * a failed fsync or background compaction makes LevelDB refuse every later write anyway.
 * Reopening replays the log up to the last whole record (the failed batch is not there or
 * is whole: a batch is one log record) and starts a new log file, so nothing acknowledged
 * is lost and nothing half-written is visible.
 */
import { AppError } from '../../common/errors';
import type { KvOp, KvRange, KvStore } from './level-kv';

/** Why the store does not write. */
export const StorageFaultReason = {
  /** The volume has less free space than the configured threshold (statfs). */
  LowSpace: 'low_space',
  /** A write failed with ENOSPC. */
  NoSpace: 'no_space',
  /** A write failed with EDQUOT. */
  Quota: 'quota_exceeded',
  /** A write failed with EROFS. */
  ReadOnly: 'read_only',
  /** A write failed with EIO or another LevelDB I/O error. */
  IoError: 'io_error',
} as const;
export type StorageFaultReason = (typeof StorageFaultReason)[keyof typeof StorageFaultReason];

/** Why writes are refused, for readiness, metrics and the refusal's message. */
export interface StorageFault {
  readonly reason: StorageFaultReason;
  /** One line for a person: what happened. */
  readonly message: string;
}

/** Errno names and the strings LevelDB's env puts in its messages (strerror), by reason. */
const FAILURES: readonly (readonly [StorageFaultReason, string, string])[] = [
  [StorageFaultReason.NoSpace, 'ENOSPC', 'no space left on device'],
  [StorageFaultReason.Quota, 'EDQUOT', 'quota exceeded'],
  [StorageFaultReason.ReadOnly, 'EROFS', 'read-only file system'],
  [StorageFaultReason.IoError, 'EIO', 'input/output error'],
];

/**
 * The storage fault an engine error reports, or `undefined` for any other failure. LevelDB
 * errors carry the OS error only in their message (`IO error: …/000005.log: No space left
 * on device`, code `LEVEL_IO_ERROR`); Node's carry the errno name in `code`.
 */
export function storageFaultOf(error: unknown): StorageFault | undefined {
  if (!(error instanceof Error)) return undefined;
  const code = (error as { code?: unknown }).code;
  const text = error.message.toLowerCase();
  for (const [reason, errno, words] of FAILURES) {
    if (code === errno || text.includes(words)) {
      return { reason, message: `a write to the journal volume failed: ${error.message}` };
    }
  }
  if (code === 'LEVEL_IO_ERROR') {
    return {
      reason: StorageFaultReason.IoError,
      message: `a write to the journal volume failed: ${error.message}`,
    };
  }
  return undefined;
}

/** The refusal of a write while `fault` holds. */
export function storageRefusal(fault: StorageFault, cause?: unknown): AppError {
  const what =
    fault.reason === StorageFaultReason.ReadOnly || fault.reason === StorageFaultReason.IoError
      ? 'the journal volume cannot be written'
      : 'the journal volume is full';
  return new AppError(
    'resource_exhausted',
    `${what} (${fault.message}); nothing was written. Free space on the state plane's ` +
      'volume or grow it (docs/state-plane.md, "Full disk"); writes resume by themselves ' +
      'once it is writable, then retry against the same head',
    { details: { reason: fault.reason }, ...(cause === undefined ? {} : { cause }) },
  );
}

function reopenedDuringRead(cause: unknown): AppError {
  return new AppError(
    'unavailable',
    'the journal database was reopened after a storage failure while this read ran; read ' +
      'again from the position after the last event received',
    cause === undefined ? {} : { cause },
  );
}

/**
 * A {@link KvStore} that refuses writes while the volume is short or after a write failed
 * for storage reasons (see the file comment); reads always go through.
 */
export class StorageGuard implements KvStore {
  private lowSpace: StorageFault | undefined;
  private failed: StorageFault | undefined;
  /** Reopens so far: an iteration that spans one was cut short. */
  private reopens = 0;

  constructor(private readonly inner: KvStore) {}

  /** Why writes are refused now (a failed write first), or `undefined` when they are not. */
  fault(): StorageFault | undefined {
    return this.failed ?? this.lowSpace;
  }

  /** Whether a write failed: the database must be reopened before writing again. */
  needsReopen(): boolean {
    return this.failed !== undefined;
  }

  /** Sets (or with `undefined` clears) the low-space refusal, from a statfs check. */
  setLowSpace(fault: StorageFault | undefined): void {
    this.lowSpace = fault;
  }

  /**
   * Closes and opens the database again (LevelDB replays its log and starts a new one),
   * then lets writes through unless space is still short.
   *
   * @throws the engine's error when it cannot reopen; writes stay refused.
   */
  async reopen(): Promise<void> {
    this.reopens += 1;
    await this.inner.close();
    await this.inner.open();
    this.failed = undefined;
  }

  open(): Promise<void> {
    return this.inner.open();
  }

  close(): Promise<void> {
    return this.inner.close();
  }

  get(key: Uint8Array): Promise<Uint8Array | undefined> {
    return this.inner.get(key);
  }

  getMany(keys: readonly Uint8Array[]): Promise<(Uint8Array | undefined)[]> {
    return this.inner.getMany(keys);
  }

  /**
   * Writes through unless refused; a storage failure refuses every later write until
   * {@link StorageGuard.reopen}.
   *
   * @throws AppError `resource_exhausted` when refused or the write failed for storage
   *   reasons (the engine error is the cause); the engine's error otherwise.
   */
  async write(ops: readonly KvOp[], sync: boolean): Promise<void> {
    const refused = this.fault();
    if (refused !== undefined) throw storageRefusal(refused);
    await this.guarded(() => this.inner.write(ops, sync));
  }

  /** A failure of `work` for storage reasons refuses every later write. */
  private async guarded(work: () => Promise<void>): Promise<void> {
    try {
      await work();
    } catch (error) {
      const fault = storageFaultOf(error);
      if (fault === undefined) throw error;
      this.failed ??= fault;
      throw storageRefusal(fault, error);
    }
  }

  /** As the inner store's; an iteration a reopen cut short fails `unavailable`. */
  entries(range: KvRange): AsyncIterable<readonly [Uint8Array, Uint8Array]> {
    return this.iterated(() => this.inner.entries(range));
  }

  /** As {@link StorageGuard.entries}, keys only. */
  keys(range: KvRange): AsyncIterable<Uint8Array> {
    return this.iterated(() => this.inner.keys(range));
  }

  /**
   * Closing the database ends its open iterators: one that ended or failed across a reopen
   * fails `unavailable` (retry), so a cut-short read is never taken for missing records.
   */
  private async *iterated<T>(open: () => AsyncIterable<T>): AsyncGenerator<T> {
    const epoch = this.reopens;
    try {
      yield* open();
    } catch (error) {
      if (epoch === this.reopens) throw error;
      throw reopenedDuringRead(error);
    }
    if (epoch !== this.reopens) throw reopenedDuringRead(undefined);
  }

  /** Compaction writes tables: refused and failing as {@link StorageGuard.write}. */
  async compactRange(range: { readonly gte: Uint8Array; readonly lt: Uint8Array }): Promise<void> {
    const refused = this.fault();
    if (refused !== undefined) throw storageRefusal(refused);
    await this.guarded(() => this.inner.compactRange(range));
  }
}
