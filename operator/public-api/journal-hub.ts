import type { Logger } from 'pino';
import { AppError, isRetryable } from '../../common/errors';
import type { JournalEntry } from '../../common/state-client';
import { eventData } from './event-json';

/** What a bounded (catch-up) read asks of a {@link FollowJournal}. */
export interface JournalReadOptions {
  /**
   * Read at most this many events from `fromPosition`, and end at the head instead of
   * following (a plain read, `follow: false`). A source may end earlier, or ignore it
   * and keep going: the reader stops when it has what it needs.
   */
  readonly limit?: number;
}

/**
 * Follows a journal partition from `fromPosition`: every committed event, in order, then
 * each new one as it commits, until `signal` aborts. It ends (or throws `unavailable`) when
 * the source goes away; the follow is then started again from the next position. With
 * `options.limit` it is a bounded read instead (see {@link JournalReadOptions}).
 */
export type FollowJournal = (
  partition: string,
  fromPosition: number,
  signal: AbortSignal,
  options?: JournalReadOptions,
) => AsyncIterable<JournalEntry>;

/** How the hub retries a journal follow (or catch-up read) that ended or failed with `unavailable`. */
export interface FollowRetryOptions {
  /** Retries in a row without a delivered event before giving up. @default 5 */
  readonly attempts?: number;
  /** First delay; doubles each retry. @default 100 */
  readonly baseDelayMs?: number;
  /** @default 2000 */
  readonly maxDelayMs?: number;
}

/** A committed event ready for the wire: decoded and encoded once, shared by every stream. */
export interface PreparedEvent {
  readonly position: number;
  readonly kind: string;
  /** The exact SSE bytes (UTF-8): `id: <position>`, `event: <kind>`, `data: {position, kind, payload}`. */
  readonly frame: Buffer;
}

/** The SSE frame of a committed event (docs/api.md, "Streaming"). */
export function prepareEvent(entry: JournalEntry): PreparedEvent {
  const kind = entry.kind.replace(/[\r\n]/gu, '');
  return {
    position: entry.position,
    kind,
    frame: Buffer.from(
      `id: ${String(entry.position)}\nevent: ${kind}\n` +
        `data: ${JSON.stringify(eventData(entry))}\n\n`,
    ),
  };
}

/**
 * Where the hub delivers one subscriber's events (an EventStream's response), in order:
 * each write starts where the previous one ended.
 */
export interface JournalSink {
  /**
   * Takes the frames of positions [`from`, `next`), concatenated. The buffer is shared
   * with the other sinks: it must not be changed.
   *
   * @returns false when the sink is full: the hub writes nothing more before {@link drained}.
   */
  write(frames: Buffer, from: number, next: number): boolean;
  /** Resolves once the sink takes writes again, or is gone. */
  drained(): Promise<void>;
  /** The subscription ended for good: the follow or a catch-up read gave up, or the hub closed. */
  fail(error: Error): void;
}

/** A subscriber's place in a partition ({@link JournalHub.subscribe}). */
export interface JournalSubscription {
  /** Delivers the events to `sink` from now until the subscription's signal aborts. */
  start(sink: JournalSink): void;
}

export const DEFAULT_RING_SIZE = 256;
export const DEFAULT_LINGER_MS = 5_000;
/** The most events one catch-up read asks for. */
const CATCH_UP_BATCH = 1_000;

/** Options of {@link JournalHub}. */
export interface JournalHubOptions {
  readonly follow: FollowJournal;
  readonly log: Logger;
  readonly retry?: FollowRetryOptions;
  /**
   * Recent prepared events kept per partition. A subscriber further behind than this reads
   * the events it missed from the journal on its own.
   * @default {@link DEFAULT_RING_SIZE}
   */
  readonly ringSize?: number;
  /** How long a partition's follow outlives its last subscriber. @default {@link DEFAULT_LINGER_MS} */
  readonly lingerMs?: number;
  /** Builds the frame of an event (tests count calls). @default {@link prepareEvent} */
  readonly prepare?: (entry: JournalEntry) => PreparedEvent;
}

interface Subscriber {
  readonly sink: JournalSink;
  readonly signal: AbortSignal;
  /** The next position this subscriber takes. */
  next: number;
}

/** One partition's shared follow, its ring and its subscribers. */
class Channel {
  readonly controller = new AbortController();
  readonly subscribers = new Set<Subscriber>();
  /**
   * The subscribers the follow's events are pushed to as they come: each at (or ahead of)
   * {@link flushedNext}, its sink not full. The others catch up on their own and come back.
   */
  readonly live = new Set<Subscriber>();
  /** Prepared events of positions [ringStart, liveNext). */
  readonly ring: PreparedEvent[] = [];
  ringStart: number;
  /** The next position the shared follow delivers. */
  liveNext: number;
  /** The end of the ring not yet pushed to {@link live}: one flush per turn of the event loop. */
  pending: PreparedEvent[] = [];
  flushing: NodeJS.Immediate | undefined;
  linger: NodeJS.Timeout | undefined;
  running: Promise<void> = Promise.resolve();
  private demandResolve: (() => void) | undefined;

  constructor(
    readonly partition: string,
    fromPosition: number,
  ) {
    this.ringStart = fromPosition;
    this.liveNext = fromPosition;
  }

  /** The next position {@link live} subscribers get (pushed up to here). */
  get flushedNext(): number {
    return this.liveNext - this.pending.length;
  }

  /** The ring's events of positions [from, to). */
  slice(from: number, to: number): PreparedEvent[] {
    return this.ring.slice(from - this.ringStart, to - this.ringStart);
  }

  append(event: PreparedEvent, ringSize: number): void {
    this.ring.push(event);
    this.pending.push(event);
    this.liveNext = event.position + 1;
    if (this.ring.length > ringSize) {
      this.ring.shift();
      this.ringStart += 1;
    }
  }

  /**
   * Whether someone wants the next event now: no subscriber (lingering: keep the ring
   * current), or one that is not a full ring behind. When every subscriber is that far
   * behind, nobody is served by reading on, so the follow waits (the journal's own
   * backpressure) — a fast subscriber keeps it going whatever the slow ones do.
   */
  hasDemand(ringSize: number): boolean {
    if (this.subscribers.size === 0 || this.live.size > 0) return true;
    const floor = this.liveNext - ringSize;
    for (const subscriber of this.subscribers) if (subscriber.next > floor) return true;
    return false;
  }

  /** Resolves once {@link hasDemand} may have changed (a subscriber moved, joined, or left). */
  demandChanged(): Promise<void> {
    return new Promise((resolve) => {
      this.demandResolve = () => {
        this.demandResolve = undefined;
        resolve();
      };
    });
  }

  /** A subscriber moved: wakes a follow waiting for demand. */
  moved(): void {
    this.demandResolve?.();
  }
}

/**
 * One shared journal follow per partition on this replica, fanned out to every stream of
 * it: each event is read once and its SSE frame built once ({@link PreparedEvent}).
 *
 * - The follow's events are pushed to the subscribers that keep up, synchronously, without
 *   a promise per subscriber: the events that came in one turn of the event loop are
 *   concatenated once and that one buffer is written to every such sink.
 * - A subscriber whose sink is full, or that starts behind the follow, catches up on its
 *   own: from the ring of the last {@link ringSize} prepared events (so a reconnect usually
 *   reads nothing), else with bounded reads of the journal (`limit`, no follow), as fast as
 *   its sink takes them; then it is pushed to again. A slow client never slows the others
 *   nor the follow. One ahead of the follow waits for it. Each subscriber sees every
 *   position once, in order.
 * - The follow starts at the first subscriber's position, is resumed from the next
 *   position after a backoff when it ends or fails with `unavailable`, fails every
 *   subscriber after `retry.attempts` fruitless tries (or at once on another error), and
 *   stops {@link lingerMs} after its last subscriber left.
 */
export class JournalHub {
  private readonly follow: FollowJournal;
  private readonly log: Logger;
  private readonly retry: Required<FollowRetryOptions>;
  private readonly ringSize: number;
  private readonly lingerMs: number;
  private readonly prepare: (entry: JournalEntry) => PreparedEvent;
  private readonly channels = new Map<string, Channel>();
  private readonly live = new Set<Channel>();
  private closed = false;

  constructor(options: JournalHubOptions) {
    this.follow = options.follow;
    this.log = options.log;
    this.retry = {
      attempts: options.retry?.attempts ?? 5,
      baseDelayMs: options.retry?.baseDelayMs ?? 100,
      maxDelayMs: options.retry?.maxDelayMs ?? 2_000,
    };
    this.ringSize = Math.max(1, options.ringSize ?? DEFAULT_RING_SIZE);
    this.lingerMs = options.lingerMs ?? DEFAULT_LINGER_MS;
    this.prepare = options.prepare ?? prepareEvent;
  }

  /** Upstream follows open now (the `polychrome_api_journal_follows` gauge). */
  get follows(): number {
    return this.live.size;
  }

  /**
   * The partition's events from `fromPosition`, in order, each once, then each new one,
   * written to the sink given to {@link JournalSubscription.start} until `signal` aborts.
   * Once the follow gave up (after its attempts, or at once for a failure that is not
   * `isRetryable`, common/errors.ts), or when the hub is closed, the sink's `fail` is
   * called instead, and nothing more.
   */
  subscribe(partition: string, fromPosition: number, signal: AbortSignal): JournalSubscription {
    return {
      start: (sink) => {
        if (signal.aborted) return;
        if (this.closed) {
          sink.fail(new AppError('unavailable', 'the journal hub is closed'));
          return;
        }
        const channel = this.channelFor(partition, fromPosition);
        const subscriber: Subscriber = { sink, signal, next: fromPosition };
        channel.subscribers.add(subscriber);
        if (channel.linger !== undefined) clearTimeout(channel.linger);
        channel.linger = undefined;
        signal.addEventListener(
          'abort',
          () => {
            channel.subscribers.delete(subscriber);
            channel.live.delete(subscriber);
            channel.moved();
            this.release(channel);
          },
          { once: true },
        );
        if (fromPosition >= channel.flushedNext) channel.live.add(subscriber);
        else void this.catchUp(channel, subscriber, false);
        channel.moved();
      },
    };
  }

  /** Stops every follow at once (the server is closing). Resolves when they ended. */
  async close(): Promise<void> {
    this.closed = true;
    const channels = [...this.channels.values()];
    this.channels.clear();
    for (const channel of channels) {
      if (channel.linger !== undefined) clearTimeout(channel.linger);
      channel.controller.abort(new Error('the journal hub is closing'));
      this.failAll(
        channel,
        new AppError('unavailable', 'the journal follow stopped (the hub is closing)'),
      );
    }
    await Promise.all(channels.map((channel) => channel.running));
  }

  private channelFor(partition: string, fromPosition: number): Channel {
    const existing = this.channels.get(partition);
    if (existing !== undefined) return existing;
    const channel = new Channel(partition, fromPosition);
    this.channels.set(partition, channel);
    this.live.add(channel);
    channel.running = this.runFollow(channel).finally(() => this.live.delete(channel));
    return channel;
  }

  private release(channel: Channel): void {
    if (channel.subscribers.size > 0 || channel.controller.signal.aborted) return;
    if (channel.linger !== undefined) clearTimeout(channel.linger);
    channel.linger = setTimeout(() => {
      channel.linger = undefined;
      if (channel.subscribers.size > 0) return;
      this.drop(channel);
      channel.controller.abort(new Error('no subscriber left'));
    }, this.lingerMs);
    channel.linger.unref();
  }

  private drop(channel: Channel): void {
    if (this.channels.get(channel.partition) === channel) this.channels.delete(channel.partition);
  }

  /** Delivers what is pending, then fails every subscriber with `error`. */
  private failAll(channel: Channel, error: Error): void {
    this.flush(channel);
    for (const subscriber of channel.subscribers) subscriber.sink.fail(error);
  }

  /**
   * Pushes the events appended since the last flush to every live subscriber: one shared
   * buffer for those at its start (all of them, but a subscriber that started ahead). A
   * sink that is full leaves {@link Channel.live} and catches up on its own.
   */
  private flush(channel: Channel): void {
    if (channel.flushing !== undefined) clearImmediate(channel.flushing);
    channel.flushing = undefined;
    const run = channel.pending;
    const first = run[0];
    if (first === undefined) return;
    channel.pending = [];
    const next = channel.liveNext;
    let shared: Buffer | undefined;
    for (const subscriber of channel.live) {
      const from = subscriber.next;
      if (from >= next) continue;
      const frames =
        from === first.position
          ? (shared ??= concatFrames(run))
          : concatFrames(run.slice(from - first.position));
      subscriber.next = next;
      if (!subscriber.sink.write(frames, from, next)) {
        channel.live.delete(subscriber);
        void this.catchUp(channel, subscriber, true);
      }
    }
    channel.moved();
  }

  /** The shared follow: resumed after `unavailable` or an end; fails the channel for good otherwise. */
  private async runFollow(channel: Channel): Promise<void> {
    const signal = channel.controller.signal;
    let failures = 0;
    while (!signal.aborted) {
      const before = channel.liveNext;
      let failure: unknown;
      try {
        await this.pumpFollow(channel, signal);
        failure = new AppError('unavailable', 'the journal follow ended');
      } catch (error) {
        failure = error;
      }
      if (signal.aborted) return;
      if (channel.liveNext > before) failures = 0;
      failures += 1;
      if (!isRetryable(failure) || failures > this.retry.attempts) {
        this.log.warn(
          { err: failure, partition: channel.partition, nextPosition: channel.liveNext },
          'journal follow failed; ending its streams',
        );
        this.drop(channel);
        channel.controller.abort(new Error('the journal follow failed'));
        this.failAll(channel, failure instanceof Error ? failure : new Error(String(failure)));
        return;
      }
      const delayMs = this.delay(failures);
      this.log.warn(
        {
          err: failure,
          partition: channel.partition,
          nextPosition: channel.liveNext,
          attempt: failures,
          delayMs,
        },
        'journal follow interrupted; resuming',
      );
      await sleep(delayMs, signal);
    }
  }

  /** One upstream follow, until it ends; throws what it throws. */
  private async pumpFollow(channel: Channel, signal: AbortSignal): Promise<void> {
    const iterator = this.follow(channel.partition, channel.liveNext, signal)[
      Symbol.asyncIterator
    ]();
    let finished = false;
    try {
      for (;;) {
        while (!channel.hasDemand(this.ringSize)) {
          await untilAborted(channel.demandChanged(), signal);
          if (signal.aborted) return;
        }
        const entry = await nextInOrder(iterator, channel.liveNext, signal, 'journal follow');
        if (entry === undefined) return;
        if (entry === 'ended') {
          finished = true;
          return;
        }
        channel.append(this.prepare(entry), this.ringSize);
        // The events that come in this turn of the event loop go out together (a ring at most).
        if (channel.pending.length >= this.ringSize) this.flush(channel);
        else channel.flushing ??= setImmediate(() => this.flush(channel));
      }
    } catch (error) {
      finished = true;
      throw error;
    } finally {
      // Leaving early (abort, gap): let the source stop; do not wait for it.
      if (!finished) void iterator.return?.().catch(() => undefined);
    }
  }

  /**
   * A subscriber off the live push: once its sink has room (`full`: wait for it first),
   * writes it the events it lacks, from the ring or else from the journal, as fast as the
   * sink takes them, then puts it back in {@link Channel.live}. Fails the subscriber when a
   * read gives up.
   */
  private async catchUp(channel: Channel, subscriber: Subscriber, full: boolean): Promise<void> {
    const { sink, signal } = subscriber;
    try {
      for (;;) {
        if (full) await sink.drained();
        if (signal.aborted || channel.controller.signal.aborted) return;
        const end = channel.flushedNext;
        if (subscriber.next >= end) {
          channel.live.add(subscriber);
          return;
        }
        if (subscriber.next >= channel.ringStart) {
          full = !this.writeEach(channel, subscriber, channel.slice(subscriber.next, end));
        } else {
          await this.readBehind(channel, subscriber);
          full = false;
        }
      }
    } catch (error) {
      if (!signal.aborted) sink.fail(error instanceof Error ? error : new Error(String(error)));
    }
  }

  /**
   * Writes `events` to the subscriber one by one until its sink is full.
   *
   * @returns false when the sink is full.
   */
  private writeEach(
    channel: Channel,
    subscriber: Subscriber,
    events: readonly PreparedEvent[],
  ): boolean {
    for (const event of events) {
      subscriber.next = event.position + 1;
      const room = subscriber.sink.write(event.frame, event.position, subscriber.next);
      if (!room) {
        channel.moved();
        return false;
      }
    }
    channel.moved();
    return true;
  }

  /**
   * The subscriber's own reads of the journal from its next position up to the ring, with
   * the follow's retry rules, written as its sink takes them.
   */
  private async readBehind(channel: Channel, subscriber: Subscriber): Promise<void> {
    const { sink, signal } = subscriber;
    let failures = 0;
    while (!signal.aborted && subscriber.next < channel.ringStart) {
      const before = subscriber.next;
      const limit = Math.min(channel.ringStart - subscriber.next, CATCH_UP_BATCH);
      const iterator = this.follow(channel.partition, subscriber.next, signal, { limit })[
        Symbol.asyncIterator
      ]();
      let finished = false;
      let failure: unknown;
      try {
        while (subscriber.next < channel.ringStart) {
          const entry = await nextInOrder(iterator, subscriber.next, signal, 'journal read');
          if (entry === undefined) return;
          if (entry === 'ended') {
            finished = true;
            break;
          }
          const event = this.prepare(entry);
          if (!this.writeEach(channel, subscriber, [event])) {
            await sink.drained();
            if (signal.aborted) return;
          }
        }
      } catch (error) {
        finished = true;
        failure = error;
      } finally {
        if (!finished) void iterator.return?.().catch(() => undefined);
      }
      if (failure === undefined && subscriber.next >= channel.ringStart) return;
      if (subscriber.next > before) failures = 0;
      if (failure === undefined && subscriber.next > before) continue;
      failure ??= new AppError('unavailable', 'the journal read ended early');
      failures += 1;
      if (!isRetryable(failure) || failures > this.retry.attempts) throw failure;
      const delayMs = this.delay(failures);
      this.log.warn(
        {
          err: failure,
          partition: channel.partition,
          nextPosition: subscriber.next,
          attempt: failures,
          delayMs,
        },
        'journal catch-up read interrupted; resuming',
      );
      await sleep(delayMs, signal);
    }
  }

  private delay(failures: number): number {
    return Math.min(this.retry.baseDelayMs * 2 ** (failures - 1), this.retry.maxDelayMs);
  }
}

/** The frames of consecutive events as one buffer (the frame itself for one event). */
function concatFrames(events: readonly PreparedEvent[]): Buffer {
  return events.length === 1 && events[0] !== undefined
    ? events[0].frame
    : Buffer.concat(events.map((event) => event.frame));
}

/**
 * The next entry of a journal read at exactly `expected`: earlier positions are skipped
 * (a source resuming too early repeats events the reader has), a later one is a gap
 * (`unavailable`). `'ended'` when the source is done; undefined once `signal` aborted.
 */
async function nextInOrder(
  iterator: AsyncIterator<JournalEntry>,
  expected: number,
  signal: AbortSignal,
  read: string,
): Promise<JournalEntry | 'ended' | undefined> {
  for (;;) {
    const result = await untilAborted(iterator.next(), signal);
    if (result === undefined) return undefined;
    if (result.done === true) return 'ended';
    const entry = result.value;
    if (entry.position < expected) continue;
    if (entry.position > expected) {
      throw new AppError(
        'unavailable',
        `the ${read} skipped from ${String(expected)} to ${String(entry.position)}`,
      );
    }
    return entry;
  }
}

/** `promise`'s value, or `undefined` as soon as `signal` aborts (the promise is left to settle). */
function untilAborted<T>(promise: Promise<T>, signal: AbortSignal): Promise<T | undefined> {
  promise.catch(() => undefined);
  if (signal.aborted) return Promise.resolve(undefined);
  return new Promise<T | undefined>((resolve, reject) => {
    const onAbort = (): void => resolve(undefined);
    signal.addEventListener('abort', onAbort, { once: true });
    promise.then(
      (value) => {
        signal.removeEventListener('abort', onAbort);
        resolve(value);
      },
      (error: unknown) => {
        signal.removeEventListener('abort', onAbort);
        reject(error instanceof Error ? error : new Error(String(error)));
      },
    );
  });
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) {
      resolve();
      return;
    }
    const done = (): void => {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal.addEventListener('abort', done, { once: true });
  });
}
