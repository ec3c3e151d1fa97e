/**
 * What the journal hub (journal-hub.ts) reads and delivers: the follow of a partition,
 * the SSE frame each committed event becomes once for every stream, and the sink and
 * subscription a stream holds.
 */
import type { JournalEntry } from '../../common/state-journal';
import { eventData, type EventData } from './event-json';
import { threadEventOf } from './thread-events';

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

/**
 * The SSE frame of a committed event (docs/api.md, "Streaming"). A `turn_dispatched` that
 * runs an interrupted turn again (`resumed`) is followed, in the same frame, by a
 * `turn_resumed` event with the same id, so every stream and every resume from an earlier
 * Last-Event-ID sees both or neither; so is the `tool_call` opening a delegation thread by
 * `thread_started`, and the `tool_result` closing it by `thread_closed` (thread-events.ts).
 */
export function prepareEvent(entry: JournalEntry): PreparedEvent {
  const kind = entry.kind.replace(/[\r\n]/gu, '');
  const data = eventData(entry);
  const id = `id: ${String(entry.position)}\n`;
  const resumed = turnResumedOf(data);
  const thread = threadEventOf(data);
  return {
    position: entry.position,
    kind,
    frame: Buffer.from(
      `${id}event: ${kind}\ndata: ${JSON.stringify(data)}\n\n` +
        (resumed === undefined
          ? ''
          : `${id}event: turn_resumed\ndata: ${JSON.stringify(resumed)}\n\n`) +
        (thread === undefined
          ? ''
          : `${id}event: ${thread.event}\ndata: ${JSON.stringify(thread.data)}\n\n`),
    ),
  };
}

/** The `data` of a `turn_resumed` event: the position of its dispatch, the turn and the attempt. */
export interface TurnResumedData {
  readonly position: number;
  readonly turnId: string;
  readonly attempt: number;
}

function turnResumedOf(data: EventData): TurnResumedData | undefined {
  if (data.kind !== 'turn_dispatched') return undefined;
  const payload = data.payload;
  if (typeof payload !== 'object' || payload === null) return undefined;
  if (Reflect.get(payload, 'resumed') !== true) return undefined;
  const turnId: unknown = Reflect.get(payload, 'turnId');
  const attempt: unknown = Reflect.get(payload, 'attempt');
  return {
    position: data.position,
    turnId: typeof turnId === 'string' ? turnId : '',
    attempt: typeof attempt === 'number' ? attempt : 0,
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

/** The frames of consecutive events as one buffer (the frame itself for one event). */
export function concatFrames(events: readonly PreparedEvent[]): Buffer {
  return events.length === 1 && events[0] !== undefined
    ? events[0].frame
    : Buffer.concat(events.map((event) => event.frame));
}
