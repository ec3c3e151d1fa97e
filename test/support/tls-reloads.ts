import type { Registry } from 'prom-client';

/**
 * The value of `polychrome_control_plane_tls_reloads_total{credentials,outcome}` on
 * `registry` (operator/state-link-tls.ts, operator/harness-ca.ts), for the reload tests.
 *
 * @throws Error showing the registry's text when the series is not there.
 */
export async function controlPlaneTlsReloads(
  registry: Registry,
  credentials: 'state-client' | 'harness-ca',
  outcome: 'reloaded' | 'refused',
): Promise<number> {
  const body = await registry.metrics();
  const series = `polychrome_control_plane_tls_reloads_total{credentials="${credentials}",outcome="${outcome}"}`;
  const line = body.split('\n').find((l) => l.startsWith(`${series} `));
  if (line === undefined) throw new Error(`no ${series} in:\n${body}`);
  return Number(line.split(' ')[1]);
}
