import { Counter, Gauge, Histogram, type Registry } from 'prom-client';

/** The public API's metrics. Without a registry every method does nothing. */
export class ApiMetrics {
  private readonly requests: Counter<'route' | 'status'> | undefined;
  private readonly durations: Histogram<'route'> | undefined;
  private readonly refusals: Counter<'limit'> | undefined;

  /**
   * Registers `polychrome_api_requests_total{route,status}`,
   * `polychrome_api_request_duration_seconds{route}`, `polychrome_api_open_streams`,
   * `polychrome_api_journal_follows` (read from `openStreams` and `journalFollows` at
   * scrape time) and `polychrome_api_limit_refusals_total{limit}` (one series per name in
   * `limits`, from 0).
   *
   * @throws Error from prom-client when `registry` already holds metrics of these names.
   */
  constructor(
    registry: Registry | undefined,
    openStreams: () => number,
    journalFollows: () => number = () => 0,
    limits: readonly string[] = [],
  ) {
    if (registry === undefined) return;
    this.requests = new Counter({
      name: 'polychrome_api_requests_total',
      help: 'Public API requests by route template and HTTP status.',
      labelNames: ['route', 'status'],
      registers: [registry],
    });
    this.durations = new Histogram({
      name: 'polychrome_api_request_duration_seconds',
      help: 'Public API request durations by route template (streams: their lifetime).',
      labelNames: ['route'],
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300],
      registers: [registry],
    });
    this.refusals = new Counter({
      name: 'polychrome_api_limit_refusals_total',
      help: 'Requests refused 429 by a per-caller limit (conversations, streams, requests), by limit.',
      labelNames: ['limit'],
      registers: [registry],
    });
    for (const limit of limits) this.refusals.inc({ limit }, 0);
    new Gauge({
      name: 'polychrome_api_open_streams',
      help: 'Server-Sent Events streams open on this replica.',
      registers: [registry],
      collect() {
        this.set(openStreams());
      },
    });
    new Gauge({
      name: 'polychrome_api_journal_follows',
      help: 'Journal follows this replica holds on the state plane (one per followed partition, shared by its streams).',
      registers: [registry],
      collect() {
        this.set(journalFollows());
      },
    });
  }

  /** Counts one finished request. */
  observe(route: string, status: number, seconds: number): void {
    this.requests?.inc({ route, status: String(status) });
    this.durations?.observe({ route }, seconds);
  }

  /** Counts one request refused by the per-caller limit `limit` (caller-limits.ts). */
  refused(limit: string): void {
    this.refusals?.inc({ limit });
  }
}
