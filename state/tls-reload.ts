import type { Logger } from 'pino';
import type { Registry } from 'prom-client';

import { registerCertificateMetrics } from '../common/certificate-metrics';
import { ServingCertificate, type CertificatePair } from '../common/serving-certificate';
import type { StateServerTls } from './server/state-server';

/** Where the state plane's TLS files are and how often they are read again. */
export interface StateTlsFiles {
  readonly caFile: string;
  readonly certFile: string;
  readonly keyFile: string;
  /** `STATE_TLS_RELOAD_INTERVAL_MS`. */
  readonly reloadIntervalMs: number;
}

/**
 * The state plane's mutual TLS material (docs/state-plane.md, "Certificate renewal"): the
 * server certificate, its key and the CA bundle, read at start and again while it runs (on
 * a change in their directories, and every `reloadIntervalMs`), so a renewal or a CA
 * rotation reaches new handshakes without a restart. Files that do not load together (a key
 * that does not match, a CA bundle with no CA) are logged and counted, and the material in
 * use stays.
 *
 * @throws Error naming the files when they cannot be read or are not usable at start.
 */
export function loadStateTls(files: StateTlsFiles, logger: Logger): Promise<ServingCertificate> {
  return ServingCertificate.load({
    certPath: files.certFile,
    keyPath: files.keyFile,
    caPath: files.caFile,
    logger,
    purpose: "the state plane's TLS certificate",
    remedy:
      'mount the Secret polychrome-state-tls there (tls.crt, tls.key, ca.crt) or fix ' +
      'STATE_TLS_CERT_FILE, STATE_TLS_KEY_FILE and STATE_TLS_CA_FILE',
    intervalMs: files.reloadIntervalMs,
    watch: true,
  });
}

/** The PEM material of a checked pair, as the server takes it. */
export function serverTlsOf(pair: CertificatePair): StateServerTls {
  return {
    ca: Buffer.from(pair.ca ?? ''),
    cert: Buffer.from(pair.cert),
    key: Buffer.from(pair.key),
  };
}

/**
 * Registers `polychrome_state_tls_reloads_total{outcome}` (`reloaded`: new files taken into
 * use; `refused`: changed files that do not load, the old ones kept) and
 * `polychrome_state_tls_certificate_expiry_timestamp_seconds` (notAfter of the server
 * certificate in use), through common/certificate-metrics.ts.
 */
export function registerTlsMetrics(registry: Registry, certificate: ServingCertificate): void {
  registerCertificateMetrics(registry, certificate, {
    reloads: 'polychrome_state_tls_reloads_total',
    expiry: 'polychrome_state_tls_certificate_expiry_timestamp_seconds',
  });
}
