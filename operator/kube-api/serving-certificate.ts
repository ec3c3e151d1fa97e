/**
 * The Kubernetes door's serving certificate, read from its files again while the control
 * plane runs (docs/kube-api.md, "The serving certificate"). cert-manager renews the
 * certificate into its Secret well before it expires, and the kubelet swaps the mounted
 * files in one rename; without a reload the door would serve the old certificate until it
 * expired and kube-apiserver refused it. A pair that does not load (a key that does not
 * match the certificate, read halfway through a swap, or a bad file) is logged and the pair
 * in use is kept: the next check tries again.
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
  /** How often the files are read again. @default 60000 */
  readonly intervalMs?: number;
}

/** Why a pair does not load, or undefined when it does. */
function unusable(pair: CertificatePair): string | undefined {
  try {
    createSecureContext(pair);
    return undefined;
  } catch (error: unknown) {
    return error instanceof Error ? error.message : String(error);
  }
}

export class ServingCertificate {
  private listeners: ((pair: CertificatePair) => void)[] = [];
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
    const pair = await ServingCertificate.read(options);
    const why = unusable(pair);
    if (why !== undefined) {
      throw new Error(
        `the Kubernetes door's serving certificate ${options.certPath} and key ${options.keyPath} do not load together (${why}); check the Secret mounted there (docs/kube-api.md)`,
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

  stop(): void {
    clearInterval(this.timer);
    this.timer = undefined;
    this.listeners = [];
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
        'serving certificate not readable; keeping the one in use',
      );
      return false;
    }
    if (next.cert === this.current.cert && next.key === this.current.key) return false;
    const why = unusable(next);
    if (why !== undefined) {
      this.options.logger.warn(
        { reason: why, certPath: this.options.certPath },
        'new serving certificate does not load; keeping the one in use',
      );
      return false;
    }
    this.current = next;
    this.options.logger.info({ certPath: this.options.certPath }, 'serving certificate reloaded');
    for (const listener of this.listeners) listener(next);
    return true;
  }
}
