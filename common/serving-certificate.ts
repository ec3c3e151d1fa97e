/**
 * A serving certificate read from its files again while the process runs: the Kubernetes
 * door's (docs/kube-api.md, "The serving certificate") and the harness's
 * (docs/operator.md, "The harness door"). cert-manager renews a certificate into its Secret
 * well before it expires, and the kubelet swaps the mounted files in one rename; without a
 * reload the server would present the old certificate until it expired and its clients
 * refused it. A pair that does not load (a key that does not match the certificate, read
 * halfway through a swap, or a bad file), or that the owner's own check refuses, is logged
 * and the pair in use is kept: the next check tries again.
 */
import { X509Certificate } from 'node:crypto';
import { watch, type FSWatcher } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { dirname } from 'node:path';
import { createSecureContext } from 'node:tls';
import type { Logger } from 'pino';

/** A certificate chain and its private key, PEM; with the CA bundle when one is read. */
export interface CertificatePair {
  readonly cert: string;
  readonly key: string;
  /** The CA bundle that client certificates must chain to (only with `caPath`). */
  readonly ca?: string;
}

export interface ServingCertificateOptions {
  readonly certPath: string;
  readonly keyPath: string;
  readonly logger: Logger;
  /** What the pair serves, for messages: `the Kubernetes door's serving certificate`. */
  readonly purpose: string;
  /** What to do when the first read fails: `check the Secret mounted there (docs/kube-api.md)`. */
  readonly remedy: string;
  /**
   * The owner's own check of a pair that loads, such as the name it must carry: a reason
   * refuses the pair (at {@link ServingCertificate.load}, an error; later, the pair in use
   * is kept).
   */
  readonly check?: (pair: CertificatePair) => string | undefined;
  /** How often the files are read again. @default 60000 */
  readonly intervalMs?: number;
  /**
   * A CA bundle (PEM) read, checked and swapped with the pair: every block must be a CA
   * certificate. @default no CA
   */
  readonly caPath?: string;
  /**
   * Also watch the files' directories and read them again shortly after a change (a
   * Kubernetes Secret volume swaps its `..data` symlink), besides the interval; changes
   * within `debounceMs` are read once. @default false
   */
  readonly watch?: boolean;
  /** @default 500 */
  readonly debounceMs?: number;
}

/** Why a CA bundle is not usable, or undefined: each PEM block must be a CA certificate. */
function caProblem(bundle: string): string | undefined {
  const blocks = bundle.match(/-----BEGIN CERTIFICATE-----[^-]+-----END CERTIFICATE-----/gu) ?? [];
  if (blocks.length === 0) return 'the CA bundle holds no PEM certificate';
  for (const block of blocks) {
    let certificate: X509Certificate;
    try {
      certificate = new X509Certificate(block);
    } catch (error: unknown) {
      return `the CA bundle holds a certificate that does not parse (${error instanceof Error ? error.message : String(error)})`;
    }
    if (!certificate.ca) {
      return `the CA bundle holds ${certificate.subject.replace(/\n/gu, ', ')}, which is not a CA certificate`;
    }
  }
  return undefined;
}

/** Why a pair does not load, or is refused by the owner's check; undefined when usable. */
function unusable(
  pair: CertificatePair,
  check: ServingCertificateOptions['check'],
): string | undefined {
  try {
    createSecureContext(pair);
  } catch (error: unknown) {
    return error instanceof Error ? error.message : String(error);
  }
  return (pair.ca === undefined ? undefined : caProblem(pair.ca)) ?? check?.(pair);
}

export class ServingCertificate {
  private readonly listeners: ((pair: CertificatePair) => void)[] = [];
  private readonly refusedListeners: ((reason: string) => void)[] = [];
  private timer: NodeJS.Timeout | undefined;
  private watchers: FSWatcher[] = [];
  private debounce: NodeJS.Timeout | undefined;
  private checking: Promise<boolean> | undefined;

  private constructor(
    private readonly options: ServingCertificateOptions,
    private current: CertificatePair,
  ) {}

  /**
   * Reads the pair once.
   * @throws Error naming the files when they cannot be read or do not load together
   */
  static async load(options: ServingCertificateOptions): Promise<ServingCertificate> {
    let pair: CertificatePair;
    try {
      pair = await ServingCertificate.read(options);
    } catch (error: unknown) {
      throw new Error(
        `${options.purpose} ${options.certPath} and key ${options.keyPath} cannot be read (${error instanceof Error ? error.message : String(error)}); ${options.remedy}`,
        { cause: error },
      );
    }
    const why = unusable(pair, options.check);
    if (why !== undefined) {
      throw new Error(
        `${options.purpose} ${options.certPath} and key ${options.keyPath} are not usable (${why}); ${options.remedy}`,
      );
    }
    return new ServingCertificate(options, pair);
  }

  private static async read(options: ServingCertificateOptions): Promise<CertificatePair> {
    const [cert, key, ca] = await Promise.all([
      readFile(options.certPath, 'utf8'),
      readFile(options.keyPath, 'utf8'),
      options.caPath === undefined ? undefined : readFile(options.caPath, 'utf8'),
    ]);
    return ca === undefined ? { cert, key } : { cert, key, ca };
  }

  /** The pair in use. */
  get pair(): CertificatePair {
    return this.current;
  }

  /** Calls `listener` with each new pair, after it was checked to load. */
  onChange(listener: (pair: CertificatePair) => void): void {
    this.listeners.push(listener);
  }

  /** Calls `listener` with the reason each time changed files are refused (the pair in use is kept). */
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
    const { certPath, keyPath, caPath } = this.options;
    const dirs = new Set(
      [certPath, keyPath, ...(caPath === undefined ? [] : [caPath])].map(dirname),
    );
    const changed = (): void => {
      clearTimeout(this.debounce);
      this.debounce = setTimeout(() => void this.check(), this.options.debounceMs ?? 500);
      this.debounce.unref();
    };
    for (const dir of dirs) {
      try {
        const watcher = watch(dir, { persistent: false }, changed);
        // A directory that goes away ends the watch; the interval still reads the files.
        watcher.on('error', (error) =>
          this.options.logger.warn({ err: error, dir }, `${this.options.purpose}: watch ended`),
        );
        this.watchers.push(watcher);
      } catch (error: unknown) {
        this.options.logger.warn(
          { err: error, dir },
          `${this.options.purpose}: cannot watch; reading on the interval only`,
        );
      }
    }
  }

  /** Reads the files now; true when a new pair was taken into use. One check at a time. */
  async check(): Promise<boolean> {
    this.checking ??= this.checkOnce().finally(() => {
      this.checking = undefined;
    });
    return await this.checking;
  }

  private async checkOnce(): Promise<boolean> {
    let next: CertificatePair;
    try {
      next = await ServingCertificate.read(this.options);
    } catch (error: unknown) {
      this.options.logger.warn(
        { err: error, certPath: this.options.certPath },
        `${this.options.purpose}: the files are not readable; keeping the pair in use`,
      );
      return false;
    }
    const { current } = this;
    if (next.cert === current.cert && next.key === current.key && next.ca === current.ca) {
      return false;
    }
    const why = unusable(next, this.options.check);
    if (why !== undefined) {
      this.options.logger.warn(
        { reason: why, certPath: this.options.certPath },
        `${this.options.purpose}: the new pair is not usable; keeping the one in use`,
      );
      for (const listener of this.refusedListeners) listener(why);
      return false;
    }
    this.current = next;
    this.options.logger.info(
      { certPath: this.options.certPath },
      `${this.options.purpose}: reloaded`,
    );
    for (const listener of this.listeners) listener(next);
    return true;
  }
}
