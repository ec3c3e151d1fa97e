/**
 * The `streamEvents` operation and the streams it opens (docs/api.md, "Streaming"): one
 * {@link EventStream} per request, fed by the shared journal follow of its partition
 * (journal-hub.ts), each holding one of its caller's stream slots on this replica. This
 * module owns the set of open streams: the API's shutdown ends them here.
 */
import type { Logger } from 'pino';
import type { TurnService } from '../turns/turn-service';
import { ApiError } from './api-error';
import type { CallerLimits } from './caller-limits';
import type { Asked, Exchange } from './door';
import { EventStream } from './event-stream';
import { headerOf } from './http-io';
import type { JournalHub } from './journal-hub';
import { parseStreamCursor } from './request-parsers';

/** Interval of `: keep-alive` comments on streams. */
export const DEFAULT_HEARTBEAT_MS = 15_000;
/** How long a closing stream's client gets to read its last bytes. */
export const DEFAULT_STREAM_CLOSE_TIMEOUT_MS = 5_000;

export interface EventStreamsOptions {
  readonly hub: JournalHub;
  readonly limits: CallerLimits;
  readonly service: Pick<TurnService, 'conversation' | 'onTextDelta'>;
  readonly log: Logger;
  /** @default {@link DEFAULT_HEARTBEAT_MS} */
  readonly heartbeatMs?: number;
  /** @default {@link DEFAULT_STREAM_CLOSE_TIMEOUT_MS} */
  readonly closeTimeoutMs?: number;
  /** Milliseconds clock of the heartbeats. @default Date.now */
  readonly now?: () => number;
}

export class EventStreams {
  private readonly open = new Set<EventStream>();
  private shuttingDown = false;

  constructor(private readonly options: EventStreamsOptions) {}

  /** Streams open now (the `polychrome_api_open_streams` gauge). */
  get size(): number {
    return this.open.size;
  }

  /**
   * Streams the conversation's journal to the exchange's response until the client goes
   * away, the caller loses the right to read it, or {@link shutdown}.
   *
   * @throws ApiError when the caller may not read the conversation, sent a bad cursor, has
   *   no stream slot left, or this replica is shutting down.
   */
  async serve(exchange: Exchange, asked: Asked): Promise<void> {
    const conversationId = asked.conversationId();
    const recheck = asked.recheck(conversationId);
    const fromPosition = parseStreamCursor({
      lastEventIdHeader: headerOf(exchange.request, 'last-event-id'),
      lastEventIdQuery: exchange.query.get('lastEventId') ?? undefined,
      since: exchange.query.get('since') ?? undefined,
    });
    const summary = await this.options.service.conversation(asked.caller, conversationId);
    if (this.shuttingDown) {
      throw new ApiError(
        'unavailable',
        'this control plane replica is shutting down; reconnect to reach another one',
      );
    }
    const log = this.options.log.child({
      conversation: conversationId,
      requestId: exchange.requestId,
    });
    const stream = new EventStream({
      response: exchange.response,
      conversationId,
      partition: summary.partition,
      fromPosition,
      subscribe: (partition, from, signal) => this.options.hub.subscribe(partition, from, signal),
      onTextDelta: (id, listener) => this.options.service.onTextDelta(id, listener),
      heartbeatMs: this.options.heartbeatMs ?? DEFAULT_HEARTBEAT_MS,
      recheck,
      closeTimeoutMs: this.options.closeTimeoutMs ?? DEFAULT_STREAM_CLOSE_TIMEOUT_MS,
      requestId: exchange.requestId,
      log,
      ...(this.options.now === undefined ? {} : { now: this.options.now }),
    });
    // One of the caller's stream slots on this replica, given back however the stream ends.
    const releaseSlot = this.options.limits.openStream(asked.caller);
    this.open.add(stream);
    try {
      log.debug({ fromPosition }, 'stream opened');
      const reason = await stream.run();
      log.debug(
        {
          reason,
          events: stream.eventsSent,
          deltasDropped: stream.deltasDropped,
          nextPosition: stream.nextPosition,
        },
        'stream ended',
      );
      await stream.closed;
    } finally {
      this.open.delete(stream);
      releaseSlot();
    }
  }

  /**
   * Sends every open stream `event: shutdown` and ends it, and refuses new ones; resolves
   * when they are closed. Returns how many there were.
   */
  async shutdown(): Promise<number> {
    this.shuttingDown = true;
    const streams = [...this.open];
    for (const stream of streams) stream.shutdown();
    await Promise.all(streams.map((stream) => stream.closed));
    return streams.length;
  }
}
