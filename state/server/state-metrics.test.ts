import { describe, expect, it } from '@jest/globals';
import { Registry } from 'prom-client';
import type { JournalStoreStats } from '../store/journal-store-types';
import { createStateMetrics, registerStateReadiness } from './state-metrics';

/** The sample lines of `name` in the registry's exposition text. */
async function samples(registry: Registry, name: string): Promise<string[]> {
  return (await registry.metrics()).split('\n').filter((l) => l.startsWith(`${name} `));
}

describe('registerStateReadiness', () => {
  it('exports 1 while the readiness callback holds and 0 once it does not, read at scrape time', async () => {
    const registry = new Registry();
    let ready = false;
    registerStateReadiness(registry, () => ready);
    expect(await samples(registry, 'polychrome_state_ready')).toEqual(['polychrome_state_ready 0']);
    ready = true;
    expect(await samples(registry, 'polychrome_state_ready')).toEqual(['polychrome_state_ready 1']);
    ready = false;
    expect(await samples(registry, 'polychrome_state_ready')).toEqual(['polychrome_state_ready 0']);
  });

  it('is a gauge with its help text, so promtool and Prometheus type it', async () => {
    const registry = new Registry();
    registerStateReadiness(registry, () => true);
    const text = await registry.metrics();
    expect(text).toContain('# TYPE polychrome_state_ready gauge');
    expect(text).toMatch(/^# HELP polychrome_state_ready \S/m);
  });
});

describe('createStateMetrics', () => {
  const stats: JournalStoreStats = {
    appends: 0,
    events: 0,
    partitions: 0,
    refusedPartitions: 0,
    durableWrites: 0,
    commits: 0,
    failedWrites: 0,
    largestGroup: 0,
  };

  it('exports every verify outcome at 0 before any verify ran, so increase() sees the first failure', async () => {
    const registry = new Registry();
    const metrics = createStateMetrics(registry, () => stats);
    // Labelled sample lines start with `name{`.
    const labelled = async (): Promise<string[]> =>
      (await registry.metrics())
        .split('\n')
        .filter((l) => l.startsWith('polychrome_state_verifications_total{'))
        .sort();
    expect(await labelled()).toEqual([
      'polychrome_state_verifications_total{outcome="error"} 0',
      'polychrome_state_verifications_total{outcome="failed"} 0',
      'polychrome_state_verifications_total{outcome="ok"} 0',
    ]);
    metrics.verifications.inc({ outcome: 'failed' });
    expect(await labelled()).toContain('polychrome_state_verifications_total{outcome="failed"} 1');
  });
});
