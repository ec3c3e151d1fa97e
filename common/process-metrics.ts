import { collectDefaultMetrics, type Registry } from 'prom-client';

/**
 * prom-client's default metrics that are gauges named `_total`, which Prometheus reserves
 * for counters (`promtool check metrics` refuses them). Each is the sum of a labelled
 * gauge that stays: `nodejs_active_handles{type}`, `nodejs_active_requests{type}`,
 * `nodejs_active_resources{type}`.
 */
export const DROPPED_DEFAULT_METRICS = [
  'nodejs_active_handles_total',
  'nodejs_active_requests_total',
  'nodejs_active_resources_total',
] as const;

/**
 * Registers Node's default process metrics (`process_*`, `nodejs_*`) on `registry`, less
 * {@link DROPPED_DEFAULT_METRICS}.
 */
export function collectProcessMetrics(registry: Registry): void {
  collectDefaultMetrics({ register: registry });
  for (const name of DROPPED_DEFAULT_METRICS) registry.removeSingleMetric(name);
}
