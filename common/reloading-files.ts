/**
 * Files read again while the process runs, each new content checked before it is taken
 * into use: the rule behind a serving certificate and its key (serving-certificate.ts) and a
 * CA bundle alone (the control plane's harness CA, ca-bundle-file.ts). cert-manager renews
 * a certificate or rotates a CA into its Secret, and the kubelet swaps the mounted files in
 * one rename; without a reload the process would keep the old content until a restart.
 * Content that does not load (files that cannot be read, read halfway through a swap, a bad
 * file, or refused by the owner's own check) is logged and told to the refusal listeners
 * (which count it), and the content in use is kept: the next check tries again.
 */
import { watch, type FSWatcher } from 'node:fs';
import { dirname } from 'node:path';
import type { Logger } from 'pino';

/** What is read, and when it is usable. */
export interface ReloadSource<T> {
  /** The files: their directories are watched; the first is named in logs. */
  readonly paths: readonly string[];
  /** The files, for messages: `/tls/tls.crt and key /tls/tls.key`. */
  readonly describe: string;
  /** What one content is called, for messages: `pair`, `bundle`. */
  readonly noun: string;
  read(): Promise<T>;
  same(a: T, b: T): boolean;
  /** Why a content read is not usable, or undefined. */
  unusable(value: T): string | undefined;
}

export interface ReloadOptions {
  readonly logger: Logger;
  /** What the files serve, for messages: `the Kubernetes door's serving certificate`. */
  readonly purpose: string;
  /** What to do when the first read fails: `check the Secret mounted there (docs/kube-api.md)`. */
  readonly remedy: string;
  /** How often the files are read again. @default 60000 */
  readonly intervalMs?: number;
  /**
   * Also watch the files' directories and read them again shortly after a change (a
   * Kubernetes Secret volume swaps its `..data` symlink), besides the interval; changes
   * within `debounceMs` are read once. @default false
   */
  readonly watch?: boolean;
  /** @default 500 */
  readonly debounceMs?: number;
}

/**
 * Reads `source` once, for a process's start.
 * @throws Error naming the files when they cannot be read or are not usable
 */
export async function readFirst<T>(source: ReloadSource<T>, options: ReloadOptions): Promise<T> {
  let value: T;
  try {
    value = await source.read();
  } catch (error: unknown) {
    throw new Error(
      `${options.purpose} ${source.describe} cannot be read (${error instanceof Error ? error.message : String(error)}); ${options.remedy}`,
      { cause: error },
    );
  }
  const why = source.unusable(value);
  if (why !== undefined) {
    const are = source.paths.length > 1 ? 'are' : 'is';
    throw new Error(
      `${options.purpose} ${source.describe} ${are} not usable (${why}); ${options.remedy}`,
    );
  }
  return value;
}

/** The content in use of files read again while the process runs (see the file's comment). */
export class ReloadingFiles<T> {
  private readonly listeners: ((value: T) => void)[] = [];
  private readonly refusedListeners: ((reason: string) => void)[] = [];
  private timer: NodeJS.Timeout | undefined;
  private watchers: FSWatcher[] = [];
  private debounce: NodeJS.Timeout | undefined;
  private checking: Promise<boolean> | undefined;

  /** @param current - the content read at start ({@link readFirst}). */
  protected constructor(
    private readonly source: ReloadSource<T>,
    private readonly options: ReloadOptions,
    private current: T,
  ) {}

  /** The content in use. */
  get value(): T {
    return this.current;
  }

  /** Calls `listener` with each new content, after it was checked to load. */
  onChange(listener: (value: T) => void): void {
    this.listeners.push(listener);
  }

  /** Calls `listener` with the reason each time changed files are refused (the content in use is kept). */
  onRefused(listener: (reason: string) => void): void {
    this.refusedListeners.push(listener);
  }

  /** Checks the files every interval (and on changes, with `watch`) until {@link stop}. */
  start(): void {
    if (this.timer !== undefined) return;
    this.timer = setInterval(() => void this.check(), this.options.intervalMs ?? 60_000);
    this.timer.unref();
    if (this.options.watch === true) this.watchDirectories();
  }

  /** Stops checking the files; {@link start} checks again. Listeners stay registered. */
  stop(): void {
    clearInterval(this.timer);
    this.timer = undefined;
    clearTimeout(this.debounce);
    this.debounce = undefined;
    for (const watcher of this.watchers) watcher.close();
    this.watchers = [];
  }

  private watchDirectories(): void {
    const { purpose, logger } = this.options;
    const changed = (): void => {
      clearTimeout(this.debounce);
      this.debounce = setTimeout(() => void this.check(), this.options.debounceMs ?? 500);
      this.debounce.unref();
    };
    for (const dir of new Set(this.source.paths.map(dirname))) {
      try {
        const watcher = watch(dir, { persistent: false }, changed);
        // A directory that goes away ends the watch; the interval still reads the files.
        watcher.on('error', (error) => logger.warn({ err: error, dir }, `${purpose}: watch ended`));
        this.watchers.push(watcher);
      } catch (error: unknown) {
        logger.warn({ err: error, dir }, `${purpose}: cannot watch; reading on the interval only`);
      }
    }
  }

  /** Reads the files now; true when a new content was taken into use. One check at a time. */
  async check(): Promise<boolean> {
    this.checking ??= this.checkOnce().finally(() => {
      this.checking = undefined;
    });
    return await this.checking;
  }

  private async checkOnce(): Promise<boolean> {
    const { source } = this;
    const { purpose, logger } = this.options;
    const path = source.paths[0];
    let next: T;
    try {
      next = await source.read();
    } catch (error: unknown) {
      logger.warn(
        { err: error, path },
        `${purpose}: the files are not readable; keeping the ${source.noun} in use`,
      );
      const why = `not readable (${error instanceof Error ? error.message : String(error)})`;
      for (const listener of this.refusedListeners) listener(why);
      return false;
    }
    if (source.same(next, this.current)) return false;
    const why = source.unusable(next);
    if (why !== undefined) {
      logger.warn(
        { reason: why, path },
        `${purpose}: the new ${source.noun} is not usable; keeping the one in use`,
      );
      for (const listener of this.refusedListeners) listener(why);
      return false;
    }
    this.current = next;
    logger.info({ path }, `${purpose}: reloaded`);
    for (const listener of this.listeners) listener(next);
    return true;
  }
}
