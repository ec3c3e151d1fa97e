/**
 * The harness listener's TLS (docs/operator.md, "The harness door"): the certificate of the
 * pod's namespace, checked to name it, and read again while the harness runs, so a renewed
 * certificate reaches new connections without restarting a conversation's harness. There
 * is no plaintext listener: a client that does not speak TLS never reaches the service.
 */
import { experimental, type ServerCredentials } from '@grpc/grpc-js';
import type { Logger } from 'pino';
import { harnessCertificateProblem } from '../../common/harness-identity';
import { ServingCertificate, type CertificatePair } from '../../common/serving-certificate';

export interface HarnessServingCertificateOptions {
  readonly certPath: string;
  readonly keyPath: string;
  /** The pod's namespace: the certificate must name its harness. */
  readonly namespace: string;
  readonly logger: Logger;
  /** How often the files are read again. @default 60000 */
  readonly intervalMs?: number;
}

/**
 * Reads the harness's certificate and key once and checks them.
 *
 * @throws Error naming the files and what is wrong: unreadable, not a pair, or not a
 *   serving certificate for the namespace's harness.
 */
export function loadHarnessCertificate(
  options: HarnessServingCertificateOptions,
): Promise<ServingCertificate> {
  return ServingCertificate.load({
    certPath: options.certPath,
    keyPath: options.keyPath,
    logger: options.logger,
    purpose: "the harness's serving certificate",
    remedy: `mount the Secret polychrome-harness-tls of namespace ${options.namespace} there (docs/operator.md, "The harness door")`,
    check: (pair) => harnessCertificateProblem(pair.cert, options.namespace),
    // A Secret volume update swaps its ..data link: read the pair again soon after.
    watch: true,
    ...(options.intervalMs === undefined ? {} : { intervalMs: options.intervalMs }),
  });
}

/**
 * Server credentials that present `certificate`'s pair, and each renewed one from the moment
 * it is taken into use. No client certificate is asked for: the control plane proves itself
 * with the per-conversation credential of each call (conversation-binding.ts).
 */
export function harnessServerCredentials(certificate: ServingCertificate): ServerCredentials {
  const provider = new ServingCertificateProvider(certificate);
  // grpc-js 1.14 hands this function's first argument to its identity slot and the second
  // to its CA slot (the declaration names them the other way round). The identity is what
  // the listener presents; with no CA, no client certificate is requested.
  // serving-credentials.test.ts fails if the order ever changes.
  return experimental.createCertificateProviderServerCredentials(provider, null, false);
}

type IdentityListener = experimental.IdentityCertificateUpdateListener;

/** grpc-js's certificate provider interface over a {@link ServingCertificate}. */
class ServingCertificateProvider implements experimental.CertificateProvider {
  private readonly listeners = new Set<IdentityListener>();

  constructor(private readonly certificate: ServingCertificate) {
    certificate.onChange((pair) => {
      for (const listener of this.listeners) listener(update(pair));
    });
  }

  addIdentityCertificateListener(listener: IdentityListener): void {
    this.listeners.add(listener);
    if (this.listeners.size === 1) this.certificate.start();
    // grpc-js expects the current value after registration, as its own providers do.
    process.nextTick(listener, update(this.certificate.pair));
  }

  removeIdentityCertificateListener(listener: IdentityListener): void {
    this.listeners.delete(listener);
    // The listener closed: nothing presents the pair any more.
    if (this.listeners.size === 0) this.certificate.stop();
  }

  addCaCertificateListener(): void {
    // No CA: the harness asks for no client certificate.
  }

  removeCaCertificateListener(): void {}
}

function update(pair: CertificatePair): experimental.IdentityCertificateUpdate {
  return { certificate: Buffer.from(pair.cert), privateKey: Buffer.from(pair.key) };
}
