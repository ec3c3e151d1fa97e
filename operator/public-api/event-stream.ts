import type { ServerResponse } from 'node:http';
import type { Logger } from 'pino';
import { AppError, isAppError } from '../../common/errors';
import type { TextDeltaEvent, TurnService } from '../turns/turn-service';
import { errorAnswer } from './api-error';
import { isRetryable, untilAborted, type PreparedEvent } from './journal-hub';

export type { FollowJournal, FollowRetryOptions } from './journal-hub';

/** A partition's prepared events from a position, in order, until the signal aborts ({@link JournalHub.subscribe}). */
export type SubscribeJournal = (
  partition: string,
  fromPosition: number,
  signal: AbortSignal,
) => AsyncIterable<PreparedEvent>;

/** The client's reconnection delay, sent once at the start (`retry:`). */
export const SSE_RETRY_MS = 1000;

/** Options of {@link EventStream}. */
export interface EventStreamOptions {
  readonly response: ServerResponse;
  readonly conversationId: string;
  readonly partition: string;
  /** First position sent. */
  readonly fromPosition: number;
  /** The shared journal follow (a {@link JournalHub}); it retries `unavailable` itself. */
  readonly subscribe: SubscribeJournal;
  readonly onTextDelta: TurnService['onTextDelta'];
  readonly heartbeatMs: number;
  /**
   * Checked at heartbeats, at most every `recheckEveryMs`: throws `unauthenticated` once
   * the caller's token no longer holds (revoked, expired), which ends the stream.
   */
  readonly recheck?: () => Promise<void>;
  readonly recheckEveryMs?: number;
  /** After the last write, how long the client gets to read it before the socket is cut. */
  readonly closeTimeoutMs: number;
  readonly requestId: string;
  readonly log: Logger;
  readonly now?: () => number;
}

/** Why a stream ended. */
export type StreamEnd = 'client_closed' | 'shutdown' | 'failed';

/**
 * One client's Server-Sent Events stream of a conversation (docs/api.md, "Streaming").
 *
 * - Committed events: `id: <position>`, `event: <kind>`, `data: {position, kind, payload}`;
 *   the id is the journal position, so `Last-Event-ID` resumes exactly after it.
 * - Live text deltas: `event: delta` without an id (not committed: a resumed stream must not
 *   skip past committed events because of them). Dropped while the client is behind.
 * - `: keep-alive` comments every `heartbeatMs`.
 * - Events come prepared (frame built once) from the partition's shared follow
 *   (journal-hub.ts), which resumes a follow that ends or fails with `unavailable` without
 *   the client noticing; when it gives up the stream sends `event: error` and ends (the
 *   client reconnects).
 * - {@link shutdown}: `event: shutdown`, then the end.
 *
 * Backpressure: the next event is pulled only after the previous one was taken by the
 * socket (`write()` returned true, or `drain`); a client that falls a ring behind the shared
 * follow reads on its own (the hub), never holding up the others.
 */
export class EventStream {
  private readonly options: EventStreamOptions;
  private readonly response: ServerResponse;
  private readonly controller = new AbortController();
  private readonly now: () => number;
  private next: number;
  private ended = false;
  private endReason: StreamEnd = 'client_closed';
  private heartbeat: NodeJS.Timeout | undefined;
  private unsubscribe: (() => void) | undefined;
  private nextRecheckAtMs: number;
  private recheckRunning = false;
  /** Committed events written. */
  eventsSent = 0;
  /** Deltas dropped because the client was behind. */
  deltasDropped = 0;
  /** Resolves once the response is closed (finished or cut). */
  readonly closed: Promise<void>;

  constructor(options: EventStreamOptions) {
    this.options = options;
    this.response = options.response;
    this.next = options.fromPosition;
    this.now = options.now ?? Date.now;
    this.nextRecheckAtMs = this.now() + (options.recheckEveryMs ?? 0);
    this.closed = new Promise((resolve) => {
      this.response.once('close', () => {
        this.controller.abort(new Error('stream closed'));
        this.ended = true;
        resolve();
      });
    });
  }

  /** The next position the stream will send. */
  get nextPosition(): number {
    return this.next;
  }

  /**
   * Sends the head, follows the journal until the client leaves, {@link shutdown} is
   * called, or the follow gives up; then ends the response. Never throws.
   *
   * @returns why the stream ended.
   */
  async run(): Promise<StreamEnd> {
    const response = this.response;
    response.writeHead(200, {
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-store',
      connection: 'keep-alive',
      // Reverse proxies (nginx) otherwise buffer the stream.
      'x-accel-buffering': 'no',
    });
    response.write(`retry: ${String(SSE_RETRY_MS)}\n\n`);
    this.unsubscribe = this.options.onTextDelta(this.options.conversationId, (delta) =>
      this.sendDelta(delta),
    );
    this.heartbeat = setInterval(() => this.beat(), this.options.heartbeatMs);
    try {
      await this.followLoop();
    } catch (error) {
      this.fail(error);
    } finally {
      this.cleanUp();
    }
    return this.endReason;
  }

  /** Sends `event: shutdown` and ends the stream, so the client reconnects elsewhere. */
  shutdown(): void {
    this.end('shutdown', {
      event: 'shutdown',
      data: {
        conversationId: this.options.conversationId,
        reason:
          'this control plane replica is shutting down; reconnect (with Last-Event-ID) to resume',
      },
    });
  }

  private async followLoop(): Promise<void> {
    const signal = this.controller.signal;
    let failure: unknown;
    try {
      await this.pump(signal);
      if (signal.aborted) return;
      failure = new AppError('unavailable', 'the journal follow ended');
    } catch (error) {
      if (signal.aborted) return;
      failure = error;
    }
    this.fail(
      isRetryable(failure)
        ? new AppError(
            'unavailable',
            `the journal of conversation ${this.options.conversationId} cannot be ` +
              'followed right now; reconnect with Last-Event-ID to resume',
            { details: { nextPosition: this.next }, cause: failure },
          )
        : failure,
    );
  }

  /** The subscription, until it ends; throws what it throws. */
  private async pump(signal: AbortSignal): Promise<void> {
    const source = this.options.subscribe(this.options.partition, this.next, signal);
    const iterator = source[Symbol.asyncIterator]();
    let finished = false;
    try {
      for (;;) {
        const result = await untilAborted(iterator.next(), signal);
        if (result === undefined) return;
        if (result.done === true) {
          finished = true;
          return;
        }
        const event = result.value;
        if (event.position < this.next) continue;
        if (event.position > this.next) {
          throw new AppError(
            'unavailable',
            `the journal follow skipped from ${String(this.next)} to ${String(event.position)}`,
          );
        }
        await this.sendEvent(event, signal);
        this.next = event.position + 1;
      }
    } catch (error) {
      finished = true;
      throw error;
    } finally {
      // Leaving early (abort, gap): let the source stop; do not wait for it.
      if (!finished) void iterator.return?.().catch(() => undefined);
    }
  }

  private async sendEvent(event: PreparedEvent, signal: AbortSignal): Promise<void> {
    if (this.ended) return;
    this.eventsSent += 1;
    if (!this.response.write(event.frame)) await this.drained(signal);
  }

  private sendDelta(delta: TextDeltaEvent): void {
    if (this.ended) return;
    if (this.response.writableNeedDrain) {
      this.deltasDropped += 1;
      return;
    }
    const data = { turnId: delta.turnId, step: delta.step, text: delta.text };
    this.response.write(`event: delta\ndata: ${JSON.stringify(data)}\n\n`);
  }

  private beat(): void {
    if (this.ended) return;
    if (!this.response.writableNeedDrain) this.response.write(': keep-alive\n\n');
    const recheck = this.options.recheck;
    if (recheck === undefined || this.recheckRunning || this.now() < this.nextRecheckAtMs) return;
    this.recheckRunning = true;
    this.nextRecheckAtMs = this.now() + (this.options.recheckEveryMs ?? 0);
    recheck().then(
      () => {
        this.recheckRunning = false;
      },
      (error: unknown) => {
        this.recheckRunning = false;
        if (isAppError(error) && error.code === 'unauthenticated') this.fail(error);
        else this.options.log.debug({ err: error }, 'stream token re-check failed; keeping on');
      },
    );
  }

  private drained(signal: AbortSignal): Promise<void> {
    const response = this.response;
    return new Promise((resolve) => {
      const done = (): void => {
        response.off('drain', done);
        response.off('close', done);
        signal.removeEventListener('abort', done);
        resolve();
      };
      response.on('drain', done);
      response.on('close', done);
      signal.addEventListener('abort', done, { once: true });
    });
  }

  private fail(error: unknown): void {
    if (this.ended) return;
    const answer = errorAnswer(error, this.options.requestId);
    if (answer.isServerFault) this.options.log.error({ err: error }, 'stream failed');
    else this.options.log.info({ code: answer.body.error.code }, 'stream ended with an error');
    this.end('failed', { event: 'error', data: answer.body });
  }

  private end(reason: StreamEnd, last: { event: string; data: unknown }): void {
    if (this.ended) return;
    this.ended = true;
    this.endReason = reason;
    const response = this.response;
    if (!response.headersSent) response.writeHead(200);
    response.end(`event: ${last.event}\ndata: ${JSON.stringify(last.data)}\n\n`);
    this.controller.abort(new Error(`stream ended: ${reason}`));
    // A client that stopped reading would keep the response (and close()) open forever.
    const cut = setTimeout(() => response.destroy(), this.options.closeTimeoutMs);
    cut.unref();
    void this.closed.then(() => clearTimeout(cut));
  }

  private cleanUp(): void {
    if (this.heartbeat !== undefined) clearInterval(this.heartbeat);
    this.heartbeat = undefined;
    this.unsubscribe?.();
    this.unsubscribe = undefined;
    this.controller.abort(new Error('stream finished'));
    if (!this.response.writableEnded && !this.response.destroyed) this.response.end();
  }
}
