/**
 * Writes events.k8s.io/v1 Events about Conversations, deduplicated into series the way
 * client-go's recorder does (`event-series.ts`). Recording never throws and never blocks a
 * reconcile pass: writes run in the background, one at a time, and a failed write is
 * logged and counted (`onWrite`), never retried into a pile.
 */
import {
  ApiException,
  EventsV1Api,
  PatchStrategy,
  V1MicroTime,
  setHeaderOptions,
} from '@kubernetes/client-node';
import type { EventsV1Event, KubeConfig } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { canonicalJson } from '../../common/canonical-json';
import type { Clock } from './clock';
import { systemClock } from './clock';
import type { EventSeriesOptions, SeriesWrite } from './event-series';
import { EventSeriesCache } from './event-series';
import { apiErrorMessage } from './kube-api-errors';
import { makeKeepAliveApiClient } from './keep-alive-client';
import type { LifecycleEvent } from './lifecycle-events';

/** `reportingController` of every Event the control plane writes. */
export const REPORTING_CONTROLLER = 'polychrome.dev/control-plane';

/** How often due series writes are looked for. */
const SWEEP_INTERVAL_MS = 60_000;

/** The object an Event is about (`regarding`), in the Event's namespace. */
export interface EventRegarding {
  readonly apiVersion: string;
  readonly kind: string;
  readonly namespace: string;
  readonly name: string;
  readonly uid: string;
}

/** The result of one Event write, for the `polychrome_kubernetes_events_total` metric. */
export const EventWriteResult = {
  Created: 'created',
  SeriesUpdated: 'series_updated',
  Failed: 'failed',
} as const;
export type EventWriteResult = (typeof EventWriteResult)[keyof typeof EventWriteResult];

/** Options of {@link EventRecorder}. */
export interface EventRecorderOptions {
  readonly kubeConfig: KubeConfig;
  readonly logger: Logger;
  /** `reportingInstance`: this replica's pod name. */
  readonly reportingInstance: string;
  /**
   * Event times and series timing. The wall clock by default, not the reconciler's: the
   * Events are read by people, with `kubectl describe`. @default systemClock
   */
  readonly clock?: Clock;
  /** Series timing and the bound on remembered keys (tests shorten them). */
  readonly series?: EventSeriesOptions;
  /** Called after every write attempt. */
  readonly onWrite?: (result: EventWriteResult) => void;
}

/** An Event as created: the body the cache keeps for its series writes. */
type EventBody = EventsV1Event & { readonly metadata: { name: string; namespace: string } };

/** Records lifecycle Events; `close()` stops the sweep and waits for writes in flight. */
export class EventRecorder {
  private readonly api: EventsV1Api;
  private readonly cache: EventSeriesCache<EventBody>;
  private readonly clock: Clock;
  private readonly timer: NodeJS.Timeout;
  private tail: Promise<void> = Promise.resolve();
  private sequence = 0;
  private closed = false;

  constructor(private readonly options: EventRecorderOptions) {
    this.api = makeKeepAliveApiClient(options.kubeConfig, EventsV1Api);
    this.cache = new EventSeriesCache(options.series);
    this.clock = options.clock ?? systemClock;
    this.timer = setInterval(() => this.sweep(), SWEEP_INTERVAL_MS);
    this.timer.unref();
  }

  /** Records `event` about `regarding`. Never throws; the write happens in the background. */
  record(regarding: EventRegarding, event: LifecycleEvent): void {
    if (this.closed) return;
    const nowMs = this.clock.now().getTime();
    const key = canonicalJson({
      regarding,
      action: event.action,
      reason: event.reason,
      reportingController: REPORTING_CONTROLLER,
      type: event.type,
      note: event.note,
    });
    const { now, evicted } = this.cache.observe(key, nowMs, () => ({
      apiVersion: 'events.k8s.io/v1',
      kind: 'Event',
      metadata: { name: this.eventName(regarding.name, nowMs), namespace: regarding.namespace },
      eventTime: new V1MicroTime(nowMs),
      reportingController: REPORTING_CONTROLLER,
      // The API server accepts at most 128 characters.
      reportingInstance: this.options.reportingInstance.slice(0, 128),
      action: event.action,
      reason: event.reason,
      type: event.type,
      note: event.note,
      regarding: { ...regarding },
    }));
    for (const write of [...evicted, ...(now === undefined ? [] : [now])]) this.enqueue(write);
  }

  /** Sends the series writes that are due (also run every minute). */
  sweep(): void {
    for (const write of this.cache.sweep(this.clock.now().getTime())) this.enqueue(write);
  }

  /** Stops the sweep and waits for the writes already queued. Idempotent. */
  async close(): Promise<void> {
    this.closed = true;
    clearInterval(this.timer);
    await this.tail;
  }

  /** Resolves once every write queued so far has been sent (or has failed). */
  async settled(): Promise<void> {
    await this.tail;
  }

  // client-go names an Event `<regarding name>.<unix nanoseconds in hex>`; the sequence
  // keeps two Events of one millisecond apart.
  private eventName(regardingName: string, nowMs: number): string {
    this.sequence = (this.sequence + 1) % 1_000_000;
    const nanos = BigInt(nowMs) * 1_000_000n + BigInt(this.sequence);
    return `${regardingName}.${nanos.toString(16)}`;
  }

  private enqueue(write: SeriesWrite<EventBody>): void {
    this.tail = this.tail.then(() => this.send(write));
  }

  private async send(write: SeriesWrite<EventBody>): Promise<void> {
    const body = write.entry.payload;
    const { name, namespace } = body.metadata;
    try {
      if (write.kind === 'create') {
        await this.api.createNamespacedEvent({ namespace, body });
        this.options.onWrite?.(EventWriteResult.Created);
        return;
      }
      const series = {
        count: write.count,
        lastObservedTime: new V1MicroTime(write.lastObservedMs),
      };
      try {
        await this.api.patchNamespacedEvent(
          { name, namespace, body: { series } },
          setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
        );
      } catch (err: unknown) {
        // The API server dropped the Event (Events expire, after an hour by default): as
        // client-go does, create it again with its series.
        if (!(err instanceof ApiException && err.code === 404)) throw err;
        await this.api.createNamespacedEvent({ namespace, body: { ...body, series } });
      }
      this.options.onWrite?.(EventWriteResult.SeriesUpdated);
    } catch (err: unknown) {
      // A create that failed leaves nothing to patch: the next occurrence creates again.
      if (write.kind === 'create') this.cache.forget(write.entry);
      this.options.onWrite?.(EventWriteResult.Failed);
      this.options.logger.warn(
        { event: name, namespace, reason: body.reason, err: apiErrorMessage(err) },
        'could not write a Kubernetes Event',
      );
    }
  }
}
