/**
 * A serving certificate read from its files again while the process runs: the Kubernetes
 * door's (docs/kube-api.md, "The serving certificate") and the harness's
 * (docs/operator.md, "The harness door"). cert-manager renews a certificate into its Secret
 * well before it expires, and the kubelet swaps the mounted files in one rename; without a
 * reload the server would present the old certificate until it expired and its clients
 * refused it. A pair that does not load (a key that does not match the certificate, read
 * halfway through a swap, or a bad file), or that the owner's own check refuses, is logged
 * and the pair in use is kept: the next check tries again (the rule: reloading-files.ts).
 */
import { X509Certificate } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { createSecureContext } from 'node:tls';

import {
  readFirst,
  ReloadingFiles,
  type ReloadOptions,
  type ReloadSource,
} from './reloading-files';

/** A certificate chain and its private key, PEM; with the CA bundle when one is read. */
export interface CertificatePair {
  readonly cert: string;
  readonly key: string;
  /** The CA bundle that client certificates must chain to (only with `caPath`). */
  readonly ca?: string;
}

export interface ServingCertificateOptions extends ReloadOptions {
  readonly certPath: string;
  readonly keyPath: string;
  /**
   * The owner's own check of a pair that loads, such as the name it must carry: a reason
   * refuses the pair (at {@link ServingCertificate.load}, an error; later, the pair in use
   * is kept).
   */
  readonly check?: (pair: CertificatePair) => string | undefined;
  /**
   * A CA bundle (PEM) read, checked and swapped with the pair: every block must be a CA
   * certificate. @default no CA
   */
  readonly caPath?: string;
}

/** Each PEM certificate block of `pem`, in order. */
export function pemCertificates(pem: string): string[] {
  return pem.match(/-----BEGIN CERTIFICATE-----[^-]+-----END CERTIFICATE-----/gu) ?? [];
}

/** Why a CA bundle is not usable, or undefined: each PEM block must be a CA certificate. */
export function caProblem(bundle: string): string | undefined {
  const blocks = pemCertificates(bundle);
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

/** A certificate, its key and (with `caPath`) a CA bundle, read again while the process runs. */
export class ServingCertificate extends ReloadingFiles<CertificatePair> {
  /**
   * Reads the pair once.
   * @throws Error naming the files when they cannot be read or do not load together
   */
  static async load(options: ServingCertificateOptions): Promise<ServingCertificate> {
    const source = pairSource(options);
    return new ServingCertificate(source, options, await readFirst(source, options));
  }

  /** The pair in use. */
  get pair(): CertificatePair {
    return this.value;
  }
}

function pairSource(options: ServingCertificateOptions): ReloadSource<CertificatePair> {
  const { certPath, keyPath, caPath } = options;
  return {
    paths: [certPath, keyPath, ...(caPath === undefined ? [] : [caPath])],
    describe: `${certPath} and key ${keyPath}`,
    noun: 'pair',
    async read() {
      const [cert, key, ca] = await Promise.all([
        readFile(certPath, 'utf8'),
        readFile(keyPath, 'utf8'),
        caPath === undefined ? undefined : readFile(caPath, 'utf8'),
      ]);
      return ca === undefined ? { cert, key } : { cert, key, ca };
    },
    same: (a, b) => a.cert === b.cert && a.key === b.key && a.ca === b.ca,
    unusable: (pair) => unusable(pair, options.check),
  };
}
