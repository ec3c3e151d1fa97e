import { readdir, stat, statfs } from 'node:fs/promises';
import { join } from 'node:path';

import type { Logger } from 'pino';
import { Gauge, type Registry } from 'prom-client';

import type { OpenReport } from './store/journal-store-types';
import { StorageFaultReason, type StorageFault, type StorageGuard } from './store/storage-guard';

/**
 * Room a reopen after a failed write needs beyond the LevelDB logs it writes out as a table
 * (a new manifest, a new log, LevelDB's info log).
 */
export const REOPEN_MARGIN_BYTES = 1024 * 1024;

/**
 * Bytes in LevelDB's write-ahead logs (`NNNNNN.log`) in `dir`: opening the database replays
 * them and writes them out as a table, so a reopen needs about this much free space.
 */
async function logBytes(dir: string): Promise<number> {
  let total = 0;
  for (const name of await readdir(dir)) {
    if (/^\d+\.log$/u.test(name)) total += (await stat(join(dir, name))).size;
  }
  return total;
}

/** The slice of the journal store the monitor drives. */
export interface MonitoredStore {
  readonly storage: StorageGuard;
  recoverStorage(): Promise<OpenReport | undefined>;
}

/** Options of {@link DiskMonitor}. */
export interface DiskMonitorOptions {
  /** The journal's data directory: statfs reads the volume holding it. */
  readonly path: string;
  /** Free bytes under which appends are refused (`STATE_DISK_MIN_FREE_BYTES`). */
  readonly minFreeBytes: number;
  /** How often to read the free space (`STATE_DISK_CHECK_INTERVAL_MS`). */
  readonly intervalMs: number;
  readonly store: MonitoredStore;
  readonly log: Logger;
}

/**
 * Watches the journal volume's free space (docs/state-plane.md, "Full disk"). Every
 * `intervalMs` it reads statfs of the data directory: under `minFreeBytes` the store's
 * writes are refused before LevelDB meets a full disk; at or above it they are allowed
 * again. A write that failed for storage reasons (ENOSPC, EDQUOT, EROFS, EIO) keeps them
 * refused until the store has reopened its database (storage-recovery.ts), which the
 * monitor does once the threshold and what the reopen writes are free (LevelDB writes its
 * logs out as a table when it opens). It is the shell around the
 * store's guard: the guard refuses, the monitor decides when to let writes through.
 */
export class DiskMonitor {
  private free: number | undefined;
  private total: number | undefined;
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;
  private failureLogged = false;

  constructor(private readonly options: DiskMonitorOptions) {}

  /** Checks once now, then every `intervalMs` until {@link DiskMonitor.stop}. */
  async start(): Promise<void> {
    await this.check();
    this.timer = setInterval(() => void this.check(), this.options.intervalMs);
    this.timer.unref();
  }

  /** Stops checking; waits for a check (and a reopen) under way. */
  async stop(): Promise<void> {
    clearInterval(this.timer);
    this.timer = undefined;
    await this.running;
  }

  /** Free bytes on the volume at the last check (`undefined` before the first). */
  freeBytes(): number | undefined {
    return this.free;
  }

  /** Size of the volume at the last check. */
  totalBytes(): number | undefined {
    return this.total;
  }

  /** Why the store refuses writes now, or `undefined` when it writes. */
  fault(): StorageFault | undefined {
    return this.options.store.storage.fault();
  }

  /** The `/readyz` body's reason while writes are refused: what, how much is free, what to do. */
  notReadyReason(): string | undefined {
    const fault = this.fault();
    if (fault === undefined) return undefined;
    const free = this.free === undefined ? 'unknown' : String(this.free);
    return (
      `journal volume ${fault.reason}: ${fault.message}; free bytes: ${free} ` +
      `(STATE_DISK_MIN_FREE_BYTES ${String(this.options.minFreeBytes)}); appends are ` +
      'refused, reads and verify work; free space or grow the volume'
    );
  }

  /** Reads the free space once and applies it (one check at a time). */
  check(): Promise<void> {
    this.running ??= this.checkOnce().finally(() => {
      this.running = undefined;
    });
    return this.running;
  }

  private async checkOnce(): Promise<void> {
    const { path, minFreeBytes, store, log } = this.options;
    try {
      const stats = await statfs(path);
      this.free = stats.bavail * stats.bsize;
      this.total = stats.blocks * stats.bsize;
    } catch (error) {
      log.warn({ err: error, path }, 'cannot read the journal volume free space (statfs)');
      return;
    }
    this.reportFailedWrite();
    const wasRefused = store.storage.fault() !== undefined;
    if (this.free < minFreeBytes) {
      store.storage.setLowSpace({
        reason: StorageFaultReason.LowSpace,
        message: `${String(this.free)} bytes free on the journal volume, under the ${String(minFreeBytes)} the state plane keeps free`,
      });
      if (!wasRefused) log.error({ freeBytes: this.free, minFreeBytes }, 'journal volume full');
      return;
    }
    store.storage.setLowSpace(undefined);
    await this.recover(this.free);
    if (wasRefused && store.storage.fault() === undefined) {
      log.info({ freeBytes: this.free }, 'journal volume writable again; appends resume');
    }
  }

  /** Logs a failed write once (the refusals that follow are the callers'). */
  private reportFailedWrite(): void {
    const failed = this.options.store.storage.needsReopen() ? this.fault() : undefined;
    if (failed !== undefined && !this.failureLogged) {
      this.options.log.error(
        { reason: failed.reason, detail: failed.message, freeBytes: this.free },
        'journal volume full or failing: a write failed; writes are refused until the database is reopened',
      );
    }
    this.failureLogged = failed !== undefined;
  }

  /**
   * Reopens the store after a failed write once `free` covers what the reopen writes: a
   * reopen that fails leaves the database closed, reads included, until the next try.
   */
  private async recover(free: number): Promise<void> {
    const { store, path, log } = this.options;
    if (!store.storage.needsReopen()) return;
    try {
      const needed = (await logBytes(path)) + REOPEN_MARGIN_BYTES;
      if (free < needed) {
        log.debug({ freeBytes: free, needed }, 'not enough free space to reopen the journal yet');
        return;
      }
      const report = await this.options.store.recoverStorage();
      if (report === undefined) return;
      for (const dropped of report.droppedTails) {
        this.options.log.warn(dropped, 'dropped a never-acknowledged tail');
      }
      this.options.log.info({ partitions: report.partitions }, 'journal database reopened');
    } catch (error) {
      this.options.log.error({ err: error }, 'journal database reopen failed; will retry');
    }
  }
}

/**
 * Registers the disk metrics: `polychrome_state_disk_free_bytes`, `_disk_total_bytes`,
 * `_disk_min_free_bytes` (the threshold) and `polychrome_state_disk_full` (1 while the
 * store refuses writes for lack of space or a failed write, else 0).
 */
export function registerDiskMetrics(registry: Registry, monitor: DiskMonitor, minFree: number) {
  const bytes = (name: string, help: string, read: () => number | undefined): void => {
    new Gauge({
      name,
      help,
      registers: [registry],
      collect() {
        const value = read();
        if (value !== undefined) this.set(value);
      },
    });
  };
  bytes('polychrome_state_disk_free_bytes', 'Free bytes on the journal volume (statfs).', () =>
    monitor.freeBytes(),
  );
  bytes('polychrome_state_disk_total_bytes', 'Size of the journal volume in bytes.', () =>
    monitor.totalBytes(),
  );
  bytes(
    'polychrome_state_disk_min_free_bytes',
    'Free bytes under which appends are refused (STATE_DISK_MIN_FREE_BYTES).',
    () => minFree,
  );
  new Gauge({
    name: 'polychrome_state_disk_full',
    help: '1 while appends are refused because the journal volume is full or a write failed (ENOSPC, EDQUOT, EROFS, EIO).',
    registers: [registry],
    collect() {
      this.set(monitor.fault() === undefined ? 0 : 1);
    },
  });
}
