import type { Registry } from 'prom-client';

/**
 * The value of `series` on `registry`, for the reload tests.
 *
 * @throws Error showing the registry's text when the series is not there.
 */
async function seriesValue(registry: Registry, series: string): Promise<number> {
  const body = await registry.metrics();
  const line = body.split('\n').find((l) => l.startsWith(`${series} `));
  if (line === undefined) throw new Error(`no ${series} in:\n${body}`);
  return Number(line.split(' ')[1]);
}

/**
 * The value of `polychrome_control_plane_tls_reloads_total{credentials,outcome}` on
 * `registry` (operator/state-link-tls.ts, operator/harness-ca.ts), for the reload tests.
 *
 * @throws Error showing the registry's text when the series is not there.
 */
export function controlPlaneTlsReloads(
  registry: Registry,
  credentials: 'state-client' | 'harness-ca',
  outcome: 'reloaded' | 'refused',
): Promise<number> {
  return seriesValue(
    registry,
    `polychrome_control_plane_tls_reloads_total{credentials="${credentials}",outcome="${outcome}"}`,
  );
}

/**
 * The value of `polychrome_control_plane_tls_certificate_expiry_timestamp_seconds{credentials}`
 * on `registry`: when those credentials in use expire, in seconds since the epoch.
 *
 * @throws Error showing the registry's text when the series is not there.
 */
export function controlPlaneTlsExpiry(
  registry: Registry,
  credentials: 'state-client' | 'harness-ca',
): Promise<number> {
  return seriesValue(
    registry,
    `polychrome_control_plane_tls_certificate_expiry_timestamp_seconds{credentials="${credentials}"}`,
  );
}
