import { X509Certificate } from 'node:crypto';

import { Counter, Gauge, type Registry } from 'prom-client';

import type { ReloadingFiles } from './reloading-files';
import type { ServingCertificate } from './serving-certificate';

/** The names of a process's certificate metrics, and the labels every series of them carries. */
export interface CertificateMetricNames {
  /** The reload counter, e.g. `polychrome_state_tls_reloads_total`. */
  readonly reloads: string;
  /** The expiry gauge, e.g. `polychrome_state_tls_certificate_expiry_timestamp_seconds`. */
  readonly expiry: string;
  /** Which certificate, e.g. `{credentials: 'state-client'}`; none by default. */
  readonly labels?: Readonly<Record<string, string>>;
}

/**
 * Registers the reload counter of a certificate read again while the process runs
 * ({@link registerReloadCounter}), and the gauge of when its certificate in use expires
 * (notAfter, seconds since the epoch).
 * The state plane's server certificate (state/tls-reload.ts) and the control plane's
 * state-plane client certificate (operator/state-link-tls.ts) report through it.
 */
export function registerCertificateMetrics(
  registry: Registry,
  certificate: ServingCertificate,
  names: CertificateMetricNames,
): void {
  const labels = names.labels ?? {};
  registerReloadCounter(registry, names.reloads, labels, certificate);
  new Gauge({
    name: names.expiry,
    help: 'When the certificate in use expires (notAfter), in seconds since the epoch.',
    labelNames: Object.keys(labels),
    registers: [registry],
    collect() {
      // validTo is text ("Dec  6 22:00:00 2027 GMT"), which Date parses.
      const notAfter = Date.parse(new X509Certificate(certificate.pair.cert).validTo);
      if (Number.isFinite(notAfter)) this.set(labels, Math.floor(notAfter / 1000));
    },
  });
}

/**
 * Counts `files`' reloads on the counter `name` with an `outcome` label (`reloaded`, or
 * `refused`: files that cannot be read or do not load, the old content kept), both at 0
 * from the start, and `labels` (the same keys for every series): several files can report
 * on one counter, such as the control plane's `credentials="state-client"` and
 * `credentials="harness-ca"`.
 */
export function registerReloadCounter(
  registry: Registry,
  name: string,
  labels: Readonly<Record<string, string>>,
  files: Pick<ReloadingFiles<unknown>, 'onChange' | 'onRefused'>,
): void {
  const reloads =
    (registry.getSingleMetric(name) as Counter | undefined) ??
    new Counter({
      name,
      help: 'TLS file changes: reloaded (taken into use) or refused (do not load; the old kept).',
      labelNames: ['outcome', ...Object.keys(labels)],
      registers: [registry],
    });
  reloads.inc({ ...labels, outcome: 'reloaded' }, 0);
  reloads.inc({ ...labels, outcome: 'refused' }, 0);
  files.onChange(() => reloads.inc({ ...labels, outcome: 'reloaded' }));
  files.onRefused(() => reloads.inc({ ...labels, outcome: 'refused' }));
}
