import { X509Certificate } from 'node:crypto';

import { Counter, Gauge, type Registry } from 'prom-client';

import type { ReloadingFiles } from './reloading-files';
import { pemCertificates, type ServingCertificate } from './serving-certificate';

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
 * ({@link registerExpiryGauge}, the first certificate of its file: the leaf).
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
  registerExpiryGauge(registry, names.expiry, labels, certificate, (pair) =>
    notAfterOf(pemCertificates(pair.cert).slice(0, 1)),
  );
}

/**
 * The latest notAfter of `certificates` (PEM blocks), in seconds since the epoch; undefined
 * when none parses. For a CA bundle, the last CA to expire: during a rotation the bundle holds
 * the old CA and the new one, and verifies until the new one expires.
 */
export function notAfterOf(certificates: readonly string[]): number | undefined {
  let latest: number | undefined;
  for (const pem of certificates) {
    let validTo: number;
    try {
      // validTo is text ("Dec  6 22:00:00 2027 GMT"), which Date parses.
      validTo = Date.parse(new X509Certificate(pem).validTo);
    } catch {
      continue;
    }
    if (Number.isFinite(validTo) && (latest === undefined || validTo > latest)) latest = validTo;
  }
  return latest === undefined ? undefined : Math.floor(latest / 1000);
}

/**
 * Sets the gauge `name` (made on first use; several credentials share it through `labels`,
 * the same keys for each) to when the credentials in use in `files` expire, `notAfter` of
 * their value (seconds since the epoch): at once, and again at every reload taken into use.
 * A refused reload leaves it, as it leaves the credentials in use.
 */
export function registerExpiryGauge<T>(
  registry: Registry,
  name: string,
  labels: Readonly<Record<string, string>>,
  files: Pick<ReloadingFiles<T>, 'value' | 'onChange'>,
  notAfter: (value: T) => number | undefined,
): void {
  const gauge =
    (registry.getSingleMetric(name) as Gauge | undefined) ??
    new Gauge({
      name,
      help: 'When the credentials in use expire (notAfter; of a CA bundle, its last CA to expire), in seconds since the epoch.',
      labelNames: Object.keys(labels),
      registers: [registry],
    });
  const set = (value: T): void => {
    const seconds = notAfter(value);
    if (seconds !== undefined) gauge.set(labels, seconds);
  };
  set(files.value);
  files.onChange(set);
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
