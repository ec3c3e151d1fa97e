import type { Logger } from 'pino';
import type { Registry } from 'prom-client';

import { CaBundleFile } from '../common/ca-bundle-file';
import { registerReloadCounter } from '../common/certificate-metrics';
import { CONTROL_PLANE_TLS_RELOADS } from './state-link-tls';

/**
 * The harness CA bundle (`POLYCHROME_HARNESS_CA_FILE`) the control plane checks each
 * harness's certificate against (turns/harness-client.ts), read at start and again while it
 * runs: on a change in its directory, and every `POLYCHROME_STATE_TLS_RELOAD_INTERVAL_MS`
 * as the control plane's own certificate, so a harness CA rotation needs no restart
 * (docs/operations.md, "Certificate renewal"). Each new connection to a harness checks it
 * against the bundle in use at its handshake; connections open and calls in flight are not
 * cut. A bundle that cannot be read or holds no CA certificate is logged and counted
 * (`polychrome_control_plane_tls_reloads_total{credentials="harness-ca",outcome}` on
 * `registry`), and the bundle in use stays. The caller starts and stops the checks.
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
  registerReloadCounter(registry, CONTROL_PLANE_TLS_RELOADS, { credentials: 'harness-ca' }, bundle);
  return bundle;
}
