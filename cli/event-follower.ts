import { AppError, isErrorCode, isRetryable } from '../common/errors';
import type { ApiClient, StreamCursor } from './api-client';
import { ApiCallError } from './api-errors';
import { SseParser, type SseMessage } from './sse-parser';

/** A committed journal event from the stream (`id:` = `position`). */
export interface StreamEvent {
  readonly position: number;
  readonly kind: string;
  /** The payload in proto3 JSON; `null` when the control plane does not know the kind. */
  readonly payload: unknown;
  /** The raw bytes (base64) when `payload` is null. */
  readonly payloadBase64?: string;
}

/** A live, uncommitted text fragment (`event: delta`, no id). */
export interface TextDelta {
  readonly turnId: string;
  readonly step: number;
  readonly text: string;
  /** The delegation thread writing; absent for the turn's own agent. */
  readonly thread?: string;
}

/** Options of {@link followEvents}. */
export interface FollowOptions {
  readonly client: ApiClient;
  readonly conversationId: string;
  /** Where the first connection starts; later ones resume after the last event seen. */
  readonly start: StreamCursor;
  /** Stops following; {@link followEvents} then resolves. */
  readonly signal: AbortSignal;
  readonly onEvent: (event: StreamEvent) => void | Promise<void>;
  readonly onDelta: (delta: TextDelta) => void | Promise<void>;
  /** Reconnects and other things a person watching should know; not part of the output. */
  readonly onNotice: (text: string) => void | Promise<void>;
  /** First reconnect delay until the server sends `retry:`. @default 1000 */
  readonly baseDelayMs?: number;
  /** Cap of the doubling delay. @default 15000 */
  readonly maxDelayMs?: number;
  /** Reconnects in a row that fail (or deliver nothing) before giving up. @default 8 */
  readonly maxAttempts?: number;
  /** A connection silent this long is dead (the API sends a heartbeat every 15 s). @default 45000 */
  readonly idleTimeoutMs?: number;
}

function describe(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/** Why one connection ended without an error answer. */
class ConnectionEnded extends Error {
  override readonly name: string = 'ConnectionEnded';
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) {
      resolve();
      return;
    }
    const timer = setTimeout(done, ms);
    function done(): void {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    }
    signal.addEventListener('abort', done, { once: true });
  });
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/**
 * Follows a conversation's event stream until `signal` aborts, like EventSource but with
 * a bearer token: every committed event once, in order, and live deltas. When a
 * connection drops, ends, or the replica says `shutdown`, it reconnects with
 * `Last-Event-ID` set to the last committed position it handed on (deltas carry no id and
 * never move it), after a delay that doubles from the server's `retry:` up to
 * `maxDelayMs`. An event at or before that position (a server that resent it) is
 * dropped, so none is handed on twice.
 *
 * @throws ApiCallError for an answer no reconnect can change (401, 403, 404, 400: not
 *   `isRetryable`, common/errors.ts), or an `event: error` saying so (a token that
 *   stopped working).
 * @throws AppError `unavailable` after `maxAttempts` reconnects in a row failed.
 */
export async function followEvents(options: FollowOptions): Promise<void> {
  const maxDelayMs = options.maxDelayMs ?? 15_000;
  const maxAttempts = options.maxAttempts ?? 8;
  const idleTimeoutMs = options.idleTimeoutMs ?? 45_000;
  const { signal } = options;
  // The server's `retry:`, kept across connections (each gets a fresh parser: a message
  // torn by a dropped connection must not merge with the next connection's first one).
  let retryMs: number | undefined;
  let last: number | undefined = options.start.lastEventId;
  let failures = 0;

  while (!signal.aborted) {
    const cursor: StreamCursor = {
      ...(options.start.since === undefined ? {} : { since: options.start.since }),
      ...(last === undefined ? {} : { lastEventId: last }),
    };
    const openedAtMs = Date.now();
    let delivered = 0;
    let failure: unknown;
    const parser = new SseParser();
    const connection = new AbortController();
    const abortConnection = (): void => connection.abort(signal.reason);
    signal.addEventListener('abort', abortConnection, { once: true });
    let idle: NodeJS.Timeout | undefined;
    const touch = (): void => {
      clearTimeout(idle);
      idle = setTimeout(
        () =>
          connection.abort(
            new ConnectionEnded(
              `no data for ${String(idleTimeoutMs / 1000)} s, not even a heartbeat`,
            ),
          ),
        idleTimeoutMs,
      );
    };
    try {
      touch();
      const response = await options.client.openStream(
        options.conversationId,
        cursor,
        connection.signal,
      );
      const body = response.body;
      if (body === null) throw new ConnectionEnded('the stream answer had no body');
      const reader: ReadableStreamDefaultReader<Uint8Array> = body.getReader();
      const decoder = new TextDecoder();
      try {
        for (;;) {
          const { done, value } = await reader.read();
          if (done) throw new ConnectionEnded('the server ended the stream');
          touch();
          for (const message of parser.push(decoder.decode(value, { stream: true }))) {
            const position = await handle(message);
            if (position !== undefined) {
              last = position;
              delivered += 1;
            }
          }
        }
      } finally {
        reader.releaseLock();
        await body.cancel().catch(() => undefined);
      }
    } catch (error) {
      failure = connection.signal.aborted && !signal.aborted ? connection.signal.reason : error;
    } finally {
      clearTimeout(idle);
      signal.removeEventListener('abort', abortConnection);
      retryMs = parser.retryMs ?? retryMs;
    }
    if (signal.aborted) return;
    // Worth a reconnect (common/errors.ts `isRetryable`): the connection, a replica going
    // away, a backend outage; a drop mid-body (fetch's TypeError) and a proxy's 502 count
    // as `internal`. What no reconnect changes (refused, not found, ...) ends the follow.
    if (!isRetryable(failure)) throw failure;
    // A connection that stayed up a while was healthy even if the conversation was quiet.
    if (delivered === 0 && Date.now() - openedAtMs < maxDelayMs) failures += 1;
    else failures = 1;
    if (failures > maxAttempts) {
      throw new AppError(
        'unavailable',
        `gave up on the stream of conversation ${options.conversationId}: ` +
          `${String(maxAttempts)} reconnects in a row failed: ${describe(failure)}` +
          (last === undefined ? '' : `; resume with --last-event-id ${String(last)}`),
        { cause: failure },
      );
    }
    const baseMs = retryMs ?? options.baseDelayMs ?? 1000;
    const delayMs = Math.min(baseMs * 2 ** (failures - 1), maxDelayMs);
    await options.onNotice(
      `stream interrupted (${describe(failure)}); reconnecting in ${(delayMs / 1000).toFixed(1)} s ` +
        (last === undefined ? 'from the start' : `after position ${String(last)}`) +
        ` (reconnect ${String(failures)} of ${String(maxAttempts)})`,
    );
    await sleep(delayMs, signal);
  }

  /** Hands one message on; returns the position of a committed event handed on. */
  async function handle(message: SseMessage): Promise<number | undefined> {
    const data = parseJson(message.data);
    if (message.event === 'delta') {
      if (
        isRecord(data) &&
        typeof data.turnId === 'string' &&
        typeof data.step === 'number' &&
        typeof data.text === 'string'
      ) {
        await options.onDelta({
          turnId: data.turnId,
          step: data.step,
          text: data.text,
          ...(typeof data.thread === 'string' && data.thread !== '' ? { thread: data.thread } : {}),
        });
      }
      return undefined;
    }
    if (message.event === 'shutdown') {
      const reason = isRecord(data) && typeof data.reason === 'string' ? data.reason : 'shutdown';
      throw new ConnectionEnded(`the replica is shutting down: ${reason}`);
    }
    if (message.event === 'error') {
      const error = isRecord(data) && isRecord(data.error) ? data.error : {};
      const code = typeof error.code === 'string' ? error.code : 'unavailable';
      const text = typeof error.message === 'string' ? error.message : message.data;
      throw new ApiCallError(
        isErrorCode(code) ? code : 'unavailable',
        `the stream ended: ${text}`,
        { status: 0 },
      );
    }
    if (message.id === undefined || !isRecord(data)) return undefined;
    const position = typeof data.position === 'number' ? data.position : Number(message.id);
    if (!Number.isSafeInteger(position) || position < 0) return undefined;
    if (last !== undefined && position <= last) return undefined;
    await options.onEvent({
      position,
      kind: typeof data.kind === 'string' ? data.kind : message.event,
      payload: data.payload ?? null,
      ...(typeof data.payloadBase64 === 'string' ? { payloadBase64: data.payloadBase64 } : {}),
    });
    return position;
  }
}
