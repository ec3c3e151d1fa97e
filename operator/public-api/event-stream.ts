import type { ServerResponse } from 'node:http';
import type { Logger } from 'pino';
import { AppError, isAppError, isRetryable, type ErrorCode } from '../../common/errors';
import type { TextDeltaEvent, TurnService } from '../turns/turn-service';
import { errorAnswer } from './api-error';
import type { JournalSink, JournalSubscription } from './journal-feed';

/** A partition's prepared events from a position, in order, until the signal aborts ({@link JournalHub.subscribe}). */
export type SubscribeJournal = (
  partition: string,
  fromPosition: number,
  signal: AbortSignal,
) => JournalSubscription;

/** The client's reconnection delay, sent once at the start (`retry:`). */
export const SSE_RETRY_MS = 1000;

/**
 * How long a live text delta waits for the next ones, so that a reply streamed word by
 * word costs each stream one write per interval rather than one per word.
 */
export const DELTA_INTERVAL_MS = 25;

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
   * Checked at heartbeats (at most every `recheckEveryMs`, default every one): throws
   * `unauthenticated` once the caller's token no longer holds (revoked, expired), and
   * `permission_denied` or `not_found` once the caller may no longer read the conversation
   * (removed from its participants, the conversation deleted). Any of these ends the stream
   * with `event: error`; other failures (the records unreachable) keep it open.
   */
  readonly recheck?: () => Promise<void>;
  readonly recheckEveryMs?: number;
  /** After the last write, how long the client gets to read it before the socket is cut. */
  readonly closeTimeoutMs: number;
  readonly requestId: string;
  readonly log: Logger;
  readonly now?: () => number;
}

/** The last delta's frame: every stream of the conversation is handed the same delta in turn. */
let lastDelta: { readonly delta: TextDeltaEvent; readonly frame: Buffer } | undefined;

/** The SSE frame of a live text delta (no id), built once for all the streams it goes to. */
function deltaFrame(delta: TextDeltaEvent): Buffer {
  const last = lastDelta;
  if (
    last !== undefined &&
    last.delta.text === delta.text &&
    last.delta.step === delta.step &&
    last.delta.turnId === delta.turnId &&
    (last.delta.thread ?? '') === (delta.thread ?? '')
  ) {
    return last.frame;
  }
  // A delegate's fragments name its thread; the turn's own agent's name none.
  const thread = delta.thread ?? '';
  const data = {
    turnId: delta.turnId,
    step: delta.step,
    text: delta.text,
    ...(thread === '' ? {} : { thread }),
  };
  const frame = Buffer.from(`event: delta\ndata: ${JSON.stringify(data)}\n\n`);
  lastDelta = { delta, frame };
  return frame;
}

/** Re-check answers that mean the caller lost the stream: it ends with `event: error`. */
const ACCESS_LOST: ReadonlySet<string> = new Set<ErrorCode>([
  'unauthenticated',
  'permission_denied',
  'not_found',
]);

/** Why a stream ended. */
export type StreamEnd = 'client_closed' | 'shutdown' | 'failed';

/**
 * One client's Server-Sent Events stream of a conversation (docs/api.md, "Streaming").
 *
 * - Committed events: `id: <position>`, `event: <kind>`, `data: {position, kind, payload}`;
 *   the id is the journal position, so `Last-Event-ID` resumes exactly after it.
 * - Live text deltas: `event: delta` without an id (not committed: a resumed stream must not
 *   skip past committed events because of them). Dropped while the client is behind. They
 *   wait up to {@link DELTA_INTERVAL_MS} and go out together (before any committed event
 *   that comes meanwhile), in one write per stream.
 * - `: keep-alive` comments every `heartbeatMs`.
 * - Events come prepared (frames built once) from the partition's shared follow
 *   (journal-hub.ts), which writes them to the response as they come, and resumes a follow
 *   that ends or fails with `unavailable` without the client noticing; when it gives up the
 *   stream sends `event: error` and ends (the client reconnects).
 * - {@link shutdown}: `event: shutdown`, then the end.
 *
 * Backpressure: once the socket's buffer is full (`write()` returned false) the hub writes
 * nothing more until `drain`; meanwhile the stream falls behind the shared follow and then
 * catches up on its own (from the hub's ring, or the journal), never holding up the others.
 */
export class EventStream {
  /** Streams with deltas waiting, and the timer that writes them all. */
  private static readonly waitingDeltas = new Set<EventStream>();
  private static deltaTimer: NodeJS.Timeout | undefined;

  private readonly options: EventStreamOptions;
  private readonly response: ServerResponse;
  private readonly controller = new AbortController();
  private readonly now: () => number;
  private next: number;
  private ended = false;
  private endReason: StreamEnd = 'client_closed';
  private heartbeat: NodeJS.Timeout | undefined;
  /** What the hub writes committed events to. */
  private readonly sink: JournalSink;
  /** Frames of the deltas waiting for the interval's end. */
  private deltas: Buffer[] = [];
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
    this.sink = {
      write: (frames, from, next) => this.sendEvents(frames, from, next),
      drained: () => this.drained(),
      fail: (error) => this.followFailed(error),
    };
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
    const signal = this.controller.signal;
    const finished = new Promise((resolve) => {
      if (signal.aborted) resolve(undefined);
      else signal.addEventListener('abort', resolve, { once: true });
    });
    try {
      this.options.subscribe(this.options.partition, this.next, signal).start(this.sink);
    } catch (error) {
      this.fail(error);
    }
    await finished;
    this.cleanUp();
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

  /** The follow gave up: `event: error` (reconnect with Last-Event-ID for `unavailable`). */
  private followFailed(failure: Error): void {
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

  /** The hub's write of positions [from, next). @returns false once the socket's buffer is full. */
  private sendEvents(frames: Buffer, from: number, next: number): boolean {
    if (this.ended) return true;
    if (from !== this.next) {
      this.followFailed(
        new AppError(
          'unavailable',
          `the journal follow skipped from ${String(this.next)} to ${String(from)}`,
        ),
      );
      return true;
    }
    this.next = next;
    this.eventsSent += next - from;
    this.writeDeltas();
    return this.response.write(frames);
  }

  private sendDelta(delta: TextDeltaEvent): void {
    if (this.ended) return;
    if (this.response.writableNeedDrain) {
      this.deltasDropped += 1;
      return;
    }
    this.deltas.push(deltaFrame(delta));
    EventStream.waitingDeltas.add(this);
    if (EventStream.deltaTimer === undefined) {
      EventStream.deltaTimer = setTimeout(EventStream.writeWaitingDeltas, DELTA_INTERVAL_MS);
      EventStream.deltaTimer.unref();
    }
  }

  private static writeWaitingDeltas(this: void): void {
    EventStream.deltaTimer = undefined;
    for (const stream of EventStream.waitingDeltas) stream.writeDeltas();
    EventStream.waitingDeltas.clear();
  }

  private writeDeltas(): void {
    const frames = this.deltas;
    if (frames.length === 0) return;
    this.deltas = [];
    if (this.ended) return;
    this.response.write(frames.length === 1 ? (frames[0] as Buffer) : Buffer.concat(frames));
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
        if (isAppError(error) && ACCESS_LOST.has(error.code)) this.fail(error);
        else this.options.log.debug({ err: error }, 'stream access re-check failed; keeping on');
      },
    );
  }

  private drained(): Promise<void> {
    const response = this.response;
    const signal = this.controller.signal;
    if (signal.aborted) return Promise.resolve();
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
