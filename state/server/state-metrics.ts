import { Counter, Gauge, Histogram, type Registry } from 'prom-client';

import type { JournalStoreStats } from '../store/journal-store-types';

/**
 * The state plane's Prometheus metrics, served on the side port. Labels are closed sets
 * (method names, gRPC status names, verify outcomes), never partition names, so
 * cardinality stays fixed however many conversations there are.
 */
export interface StateMetrics {
  /** Calls finished, by method and gRPC status name. */
  readonly calls: Counter<'method' | 'status'>;
  /** Time from receiving an Append to answering it (validation, lock, MMR, sign, fsync). */
  readonly appendDuration: Histogram<'outcome'>;
  /** Server-side verifications, by outcome (`ok`, `failed`, `error`). */
  readonly verifications: Counter<'outcome'>;
}

/** Outcomes of a Verify call. */
export const VerifyOutcomeLabel = { Ok: 'ok', Failed: 'failed', Error: 'error' } as const;
export type VerifyOutcomeLabel = (typeof VerifyOutcomeLabel)[keyof typeof VerifyOutcomeLabel];

/**
 * A counter mirroring a monotonic store counter: on each scrape it adds what the store
 * counted since the last one, so `rate()` works without the store knowing prom-client.
 */
function mirroredCounter(
  registry: Registry,
  name: string,
  help: string,
  read: () => number,
): Counter {
  let seen = 0;
  return new Counter({
    name,
    help,
    registers: [registry],
    collect() {
      const now = read();
      if (now > seen) this.inc(now - seen);
      seen = now;
    },
  });
}

/**
 * Registers the state plane's metrics on `registry`; store counters are read from
 * `stats` at scrape time.
 */
export function createStateMetrics(
  registry: Registry,
  stats: () => JournalStoreStats,
): StateMetrics {
  mirroredCounter(
    registry,
    'polychrome_state_appends_total',
    'Acknowledged (durable) appends, key hand-overs included.',
    () => stats().appends,
  );
  mirroredCounter(
    registry,
    'polychrome_state_events_total',
    'Events written by acknowledged appends, signed_root and key_rotated included.',
    () => stats().events,
  );
  mirroredCounter(
    registry,
    'polychrome_state_group_commit_batches_total',
    'Durable (fsynced) LevelDB batches; several appends can share one.',
    () => stats().durableWrites,
  );
  mirroredCounter(
    registry,
    'polychrome_state_group_commit_failures_total',
    'Durable batches that failed; every append in them was refused.',
    () => stats().failedWrites,
  );
  new Gauge({
    name: 'polychrome_state_group_commit_largest',
    help: 'Most appends one durable batch carried since start.',
    registers: [registry],
    collect() {
      this.set(stats().largestGroup);
    },
  });
  new Gauge({
    name: 'polychrome_state_partitions',
    help: 'Partitions the store holds, by status.',
    labelNames: ['status'],
    registers: [registry],
    collect() {
      const s = stats();
      this.set({ status: 'ok' }, s.partitions);
      this.set({ status: 'refused' }, s.refusedPartitions);
    },
  });
  const verifications = new Counter({
    name: 'polychrome_state_verifications_total',
    help: 'Verify calls, by outcome: ok, failed (the journal does not verify), error.',
    labelNames: ['outcome'],
    registers: [registry],
  });
  // Every outcome at 0 from the start: increase() over a series that appears at 1 sees
  // nothing, and the first failed verify after a restart must alert.
  for (const outcome of Object.values(VerifyOutcomeLabel)) verifications.inc({ outcome }, 0);
  return {
    calls: new Counter({
      name: 'polychrome_state_calls_total',
      help: 'State plane calls finished (Journal and Records), by method and gRPC status.',
      labelNames: ['method', 'status'],
      registers: [registry],
    }),
    appendDuration: new Histogram({
      name: 'polychrome_state_append_duration_seconds',
      help: 'Append calls, received to answered (validation, lock, MMR, sign, durable write).',
      labelNames: ['outcome'],
      buckets: [0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1],
      registers: [registry],
    }),
    verifications,
  };
}

/**
 * Registers `polychrome_state_ready`: 1 while `isReady()` holds (what `/readyz` answers),
 * else 0, read at scrape time. A pod that runs but is not ready still answers scrapes, so
 * an alert can tell "not ready" from "down" (`up == 0`).
 */
export function registerStateReadiness(registry: Registry, isReady: () => boolean): Gauge {
  return new Gauge({
    name: 'polychrome_state_ready',
    help: '1 while the state plane is ready (journal and records open, gRPC serving), else 0.',
    registers: [registry],
    collect() {
      this.set(isReady() ? 1 : 0);
    },
  });
}
