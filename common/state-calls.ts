import {
  Metadata,
  type CallOptions,
  type ClientReadableStream,
  type ServiceError,
} from '@grpc/grpc-js';

import { stateErrorFromGrpc, StateCallError } from './state-call-errors';
import { injectTraceMetadata } from './tracing';

/*
 * One call to the state plane, unary or a server stream: deadline, cancellation, trace
 * context in the metadata, backpressure, and every failure rebuilt as an AppError
 * ({@link stateErrorFromGrpc}). Every client of the state plane's services calls through here.
 */

/** Per-call options. */
export interface StateCallOptions {
  /** Cancels the call; the server sees the cancellation (streams stop reading the store). */
  readonly signal?: AbortSignal;
  /** Overrides {@link StateClientOptions.callTimeoutMs} for this call. */
  readonly timeoutMs?: number;
}

/** Starts one unary call of a generated client; {@link callStateUnary} finishes it. */
export type StartUnaryCall<R> = (
  metadata: Metadata,
  callOptions: Partial<CallOptions>,
  done: (error: ServiceError | null, response: R) => void,
) => { cancel(): void };

/**
 * Runs one unary call with a deadline and cancellation, rebuilding a failure as an
 * AppError ({@link stateErrorFromGrpc}). The call carries the active trace context in its
 * metadata, so the state plane's SERVER span is a child of the caller's span; it makes no
 * CLIENT span of its own (docs/observability.md#spans).
 *
 * @param options `timeoutMs` is required here: the client passes its default.
 * @throws StateCallError (or JournalConflictError) as the server or transport reports it;
 *   `cancelled` when `signal` is already aborted.
 */
export function callStateUnary<R>(
  target: string,
  method: string,
  options: { readonly signal?: AbortSignal; readonly timeoutMs: number },
  start: StartUnaryCall<R>,
): Promise<R> {
  return new Promise<R>((resolve, reject) => {
    const signal = options.signal;
    if (signal?.aborted === true) {
      reject(
        new StateCallError('cancelled', `${method} was cancelled before it was sent`, {
          method,
          grpcStatus: 1,
          fromServer: false,
          cause: signal.reason,
        }),
      );
      return;
    }
    const deadline = Date.now() + options.timeoutMs;
    const onAbort = (): void => call.cancel();
    const metadata = new Metadata();
    injectTraceMetadata(metadata);
    const call = start(metadata, { deadline }, (error, response) => {
      signal?.removeEventListener('abort', onAbort);
      if (error === null) resolve(response);
      else reject(stateErrorFromGrpc(error, method, target));
    });
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

const STREAM_HIGH_WATER = 64;

/**
 * Runs one server-streaming call as an async iterable: `convert` turns each message into a
 * value (`undefined`: skip it). Backpressure: the HTTP/2 stream is paused while the
 * consumer is behind. `signal` and leaving the loop early both cancel the call on the
 * server. The call carries the active trace context, as {@link callStateUnary} does.
 *
 * @param target names the server in messages about transport failures (its address).
 * @throws StateCallError from the iterator, as the server or transport reports it.
 */
export async function* streamStateCall<P, T>(
  target: string,
  method: string,
  signal: AbortSignal | undefined,
  start: (metadata: Metadata) => ClientReadableStream<P>,
  convert: (proto: P) => T | undefined,
): AsyncGenerator<T> {
  // The active trace context, for the state plane's SERVER span (no CLIENT span here).
  const metadata = new Metadata();
  injectTraceMetadata(metadata);
  const call = start(metadata);
  const queue: P[] = [];
  let ended = false;
  let failure: unknown;
  let wake: (() => void) | undefined;
  const notify = (): void => {
    wake?.();
    wake = undefined;
  };
  call.on('data', (item: P) => {
    queue.push(item);
    // Backpressure: stop pulling from the network until the consumer catches up.
    if (queue.length >= STREAM_HIGH_WATER) call.pause();
    notify();
  });
  call.on('end', () => {
    ended = true;
    notify();
  });
  call.on('error', (error: unknown) => {
    failure = error;
    notify();
  });
  const onAbort = (): void => call.cancel();
  signal?.addEventListener('abort', onAbort, { once: true });
  try {
    for (;;) {
      const item = queue.shift();
      if (item !== undefined) {
        if (queue.length < STREAM_HIGH_WATER / 2 && call.isPaused()) call.resume();
        const converted = convert(item);
        if (converted !== undefined) yield converted;
        continue;
      }
      if (failure !== undefined) {
        throw stateErrorFromGrpc(failure, method, target);
      }
      if (ended) return;
      await new Promise<void>((resolve) => {
        wake = resolve;
      });
    }
  } finally {
    signal?.removeEventListener('abort', onAbort);
    // Leaving early (break, throw in the loop body) must stop the server's read too.
    if (!ended && failure === undefined) call.cancel();
  }
}
