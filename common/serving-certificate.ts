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
import { createSecureContext } from 'node:tls';
import { readFile } from 'node:fs/promises';
import type { Logger } from 'pino';

/** A certificate chain and its private key, PEM. */
export interface CertificatePair {
  readonly cert: string;
  readonly key: string;
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
  return check?.(pair);
}

export class ServingCertificate {
  private readonly listeners: ((pair: CertificatePair) => void)[] = [];
  private timer: NodeJS.Timeout | undefined;
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
    const [cert, key] = await Promise.all([
      readFile(options.certPath, 'utf8'),
      readFile(options.keyPath, 'utf8'),
    ]);
    return { cert, key };
  }

  /** The pair in use. */
  get pair(): CertificatePair {
    return this.current;
  }

  /** Calls `listener` with each new pair, after it was checked to load. */
  onChange(listener: (pair: CertificatePair) => void): void {
    this.listeners.push(listener);
  }

  /** Checks the files every interval until {@link stop}. */
  start(): void {
    if (this.timer !== undefined) return;
    this.timer = setInterval(() => void this.check(), this.options.intervalMs ?? 60_000);
    this.timer.unref();
  }

  /** Stops checking the files; {@link start} checks again. Listeners stay registered. */
  stop(): void {
    clearInterval(this.timer);
    this.timer = undefined;
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
    if (next.cert === this.current.cert && next.key === this.current.key) return false;
    const why = unusable(next, this.options.check);
    if (why !== undefined) {
      this.options.logger.warn(
        { reason: why, certPath: this.options.certPath },
        `${this.options.purpose}: the new pair is not usable; keeping the one in use`,
      );
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
