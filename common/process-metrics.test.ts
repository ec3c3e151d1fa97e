import { describe, expect, it } from '@jest/globals';
import { Registry } from 'prom-client';
import { collectProcessMetrics, DROPPED_DEFAULT_METRICS } from './process-metrics';

describe('collectProcessMetrics', () => {
  it('registers no gauge or histogram named _total, and keeps the labelled gauges they summed', async () => {
    const registry = new Registry();
    collectProcessMetrics(registry);
    const metrics = await registry.getMetricsAsJSON();
    const names = metrics.map((m) => m.name);
    expect(
      metrics.filter((m) => m.name.endsWith('_total') && String(m.type) !== 'counter'),
    ).toEqual([]);
    for (const dropped of DROPPED_DEFAULT_METRICS) expect(names).not.toContain(dropped);
    expect(names).toEqual(
      expect.arrayContaining([
        'process_cpu_seconds_total',
        'process_resident_memory_bytes',
        'nodejs_active_handles',
        'nodejs_active_requests',
        'nodejs_eventloop_lag_seconds',
      ]),
    );
  });
});
