import type { Logger } from 'pino';
import { AppError, isRetryable } from '../../common/errors';
import type { JournalEntry } from '../../common/state-journal';
import { Channel, type Subscriber } from './journal-channel';
import { nextInOrder, sleep, untilAborted } from './journal-read';
import {
  concatFrames,
  prepareEvent,
  type FollowJournal,
  type FollowRetryOptions,
  type JournalSubscription,
  type PreparedEvent,
} from './journal-feed';

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
