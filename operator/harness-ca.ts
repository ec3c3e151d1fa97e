import type { Logger } from 'pino';
import type { Registry } from 'prom-client';

import { CaBundleFile } from '../common/ca-bundle-file';
import {
  notAfterOf,
  registerExpiryGauge,
  registerReloadCounter,
} from '../common/certificate-metrics';
import { pemCertificates } from '../common/serving-certificate';
import { CONTROL_PLANE_TLS_EXPIRY, CONTROL_PLANE_TLS_RELOADS } from './state-link-tls';

/**
 * The harness CA bundle (`POLYCHROME_HARNESS_CA_FILE`) the control plane checks each
 * harness's certificate against (turns/harness-client.ts), read at start and again while it
 * runs: on a change in its directory, and every `POLYCHROME_STATE_TLS_RELOAD_INTERVAL_MS`
 * as the control plane's own certificate, so a harness CA rotation needs no restart
 * (docs/operations.md, "Certificate renewal"). Each new connection to a harness checks it
 * against the bundle in use at its handshake; connections open and calls in flight are not
 * cut. A bundle that cannot be read or holds no CA certificate is logged and counted
 * (`polychrome_control_plane_tls_reloads_total{credentials="harness-ca",outcome}` on
 * `registry`), and the bundle in use stays.
 * `polychrome_control_plane_tls_certificate_expiry_timestamp_seconds{credentials="harness-ca"}`
 * is the bundle's last CA to expire, set at start and at every reload taken into use
 * (config/monitoring alerts before it). The caller starts and stops the checks.
 *
 * @throws Error naming the file when it cannot be read or is not a CA bundle at start.
 */
export async function loadHarnessCa(
  files: {
    /** `POLYCHROME_HARNESS_CA_FILE`. */
    readonly caPath: string;
    /** `POLYCHROME_STATE_TLS_RELOAD_INTERVAL_MS`. */
    readonly intervalMs: number;
  },
  logger: Logger,
  registry: Registry,
): Promise<CaBundleFile> {
  const bundle = await CaBundleFile.load({
    caPath: files.caPath,
    logger,
    purpose: 'the harness CA bundle',
    remedy:
      'give the CA that signs the harness certificates (the Secret polychrome-harness-ca, ' +
      'ca.crt) or fix POLYCHROME_HARNESS_CA_FILE',
    intervalMs: files.intervalMs,
    watch: true,
  });
  const labels = { credentials: 'harness-ca' };
  registerReloadCounter(registry, CONTROL_PLANE_TLS_RELOADS, labels, bundle);
  registerExpiryGauge(registry, CONTROL_PLANE_TLS_EXPIRY, labels, bundle, (pem) =>
    notAfterOf(pemCertificates(pem)),
  );
  return bundle;
}
