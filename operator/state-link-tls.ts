import type { Logger } from 'pino';
import type { Registry } from 'prom-client';

import { registerCertificateMetrics } from '../common/certificate-metrics';
import { ServingCertificate } from '../common/serving-certificate';
import type { ControlPlaneConfig } from './config';
import { peerTlsOf } from './public-api/peer-hop';
import type { PeerOptions } from './public-api/public-api-server';

/**
 * The control plane's own certificate, key and CA bundle (`POLYCHROME_STATE_CA`, `_CERT`,
 * `_KEY`: the Secret `polychrome-control-plane-tls`), read at start and again while it runs
 * (on a change in their directory, and every `POLYCHROME_STATE_TLS_RELOAD_INTERVAL_MS`), so a
 * renewal or a CA rotation needs no restart (docs/operations.md, "Certificate renewal"). The
 * state-plane link takes each new pair at its next handshake
 * (common/reloading-channel-credentials.ts) and the peer listener and hop at theirs. Files
 * that do not load together (a key that does not match, a CA bundle with no CA) are logged
 * and counted (metrics below, registered on `registry`), and the pair in use stays. The
 * caller starts and stops the checks.
 *
 * @throws Error naming the files when they cannot be read or are not usable at start.
 */
export async function loadStateLinkCertificate(
  state: ControlPlaneConfig['state'],
  logger: Logger,
  registry: Registry,
): Promise<ServingCertificate> {
  const certificate = await ServingCertificate.load({
    certPath: state.certPath,
    keyPath: state.keyPath,
    caPath: state.caPath,
    logger,
    purpose: "the control plane's certificate (state-plane link and peers)",
    remedy:
      'mount the Secret polychrome-control-plane-tls there (tls.crt, tls.key, ca.crt) or fix ' +
      'POLYCHROME_STATE_CERT, POLYCHROME_STATE_KEY and POLYCHROME_STATE_CA',
    intervalMs: state.reloadIntervalMs,
    watch: true,
  });
  registerStateLinkTlsMetrics(registry, certificate);
  return certificate;
}

/**
 * The control plane's counter of TLS file reloads, one series pair per `credentials`:
 * `state-client` (below) and `harness-ca` (harness-ca.ts).
 */
export const CONTROL_PLANE_TLS_RELOADS = 'polychrome_control_plane_tls_reloads_total';

/** The control plane's gauge of when its TLS credentials expire, one series per `credentials`. */
export const CONTROL_PLANE_TLS_EXPIRY =
  'polychrome_control_plane_tls_certificate_expiry_timestamp_seconds';

/**
 * `polychrome_control_plane_tls_reloads_total{credentials="state-client",outcome}`
 * and `polychrome_control_plane_tls_certificate_expiry_timestamp_seconds{credentials}` for
 * that certificate (common/certificate-metrics.ts, as the state plane's).
 */
function registerStateLinkTlsMetrics(registry: Registry, certificate: ServingCertificate): void {
  registerCertificateMetrics(registry, certificate, {
    reloads: CONTROL_PLANE_TLS_RELOADS,
    expiry: CONTROL_PLANE_TLS_EXPIRY,
    labels: { credentials: 'state-client' },
  });
}

/**
 * The peer side's TLS from that certificate (the replicas present it to each other): the
 * pair in use now, and each renewed one for the peer listener's next handshakes and the
 * next hops.
 */
export function peerTlsFrom(
  certificate: ServingCertificate,
): Pick<PeerOptions, 'tls' | 'onTlsChange'> {
  return {
    tls: peerTlsOf(certificate.pair),
    onTlsChange: (listener) => certificate.onChange((pair) => listener(peerTlsOf(pair))),
  };
}
