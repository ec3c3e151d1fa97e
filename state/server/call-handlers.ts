import { once } from 'node:events';

import type { sendUnaryData, ServerUnaryCall, ServerWritableStream } from '@grpc/grpc-js';
import type { Logger } from 'pino';

import { AppError, errorStatus, isAppError } from '../../common/errors';
import { grpcErrorOf, grpcStatusName } from '../../common/grpc-errors';
import {
  authorize,
  callerIdentityOf,
  describeIdentity,
  type CallerIdentity,
  type StateRole,
} from './caller-identity';
import { rolesFor, type StateService, type StateServiceMethods } from './rpc-roles';
import type { StateMetrics } from './state-metrics';
import {
  extractTraceMetadata,
  recordSpanError,
  SpanKind,
  startSpan,
  type Span,
} from '../../common/tracing';
import { context as otelContext } from '@opentelemetry/api';

/*
 * The one wrapper every state-plane RPC runs in (Journal and Records alike): authorize
 * from the client certificate before anything else, against the roles rpc-roles.ts lists
 * for the method (looked up when the handler is made; the method's type is the table's
 * keys, so a handler cannot name a method the table lacks), count the call by method and
 * status, and answer every failure through grpcErrorOf (common/grpc-errors.ts), so both
 * services share one error contract, the one every gRPC server and client of the system
 * speaks, and one metric.
 */

/** Any call grpc-js hands a handler: what authorization and cancellation need. */
type AnyCall = ServerUnaryCall<unknown, unknown> | ServerWritableStream<unknown, unknown>;

/** What a handler gets besides the request: the caller, cancellation, a logger. */
export interface CallContext {
  readonly identity: CallerIdentity;
  readonly signal: AbortSignal;
  readonly log: Logger;
}

function asAppError(error: unknown, log: Logger, method: string): AppError {
  if (isAppError(error)) return error;
  // Not ours: the detail goes to the log, the caller gets a generic message.
  log.error({ err: error, method }, 'call failed with an unexpected error');
  return new AppError(
    'internal',
    `${method} hit an internal error in the state plane; see its log`,
    {
      cause: error,
    },
  );
}

/** Options of {@link createCallHandlers}. */
export interface CallHandlerOptions<S extends StateService> {
  readonly log: Logger;
  readonly metrics?: StateMetrics;
  /**
   * Aborted when the server shuts down, with the AppError that open-ended streams end
   * with ({@link StreamingOptions.endsOnShutdown}). Without it no stream is ended early.
   */
  readonly shutdown?: AbortSignal;
  /** The gRPC service (`polychrome.state.v1.Journal`): its role table, and span names. */
  readonly service: S;
}

/** Options of one server-streaming method. */
export interface StreamingOptions<Req> {
  /**
   * True for a call that has no end of its own (a follow read): on shutdown its
   * `context.signal` aborts with the shutdown reason, so it ends at once with that status
   * instead of holding the server until the grace period runs out. Other streams run to
   * their end. @default never
   */
  readonly endsOnShutdown?: (request: Req) => boolean;
}

/** Wraps unary and server-streaming handlers; see {@link createCallHandlers}. */
export interface CallHandlers<S extends StateService> {
  /**
   * A unary handler that authorizes the caller for `method` (its roles in rpc-roles.ts),
   * runs `run` and answers with its result or its error's status. A refused call never
   * reaches `run`.
   */
  readonly unary: <Req, Res>(
    method: StateServiceMethods[S],
    run: (request: Req, context: CallContext) => Promise<Res>,
  ) => (call: ServerUnaryCall<Req, Res>, callback: sendUnaryData<Res>) => void;
  /**
   * A server-streaming handler: as `unary`, writing what `produce` yields with
   * backpressure; a cancelled call aborts `context.signal`.
   */
  readonly streaming: <Req, Item>(
    method: StateServiceMethods[S],
    produce: (request: Req, context: CallContext) => AsyncIterable<Item>,
    streamingOptions?: StreamingOptions<Req>,
  ) => (call: ServerWritableStream<Req, Item>) => void;
}

/**
 * A signal that aborts with the reason of whichever of `call` or `shutdown` aborts first,
 * and `release`, which detaches it from both (the shutdown signal outlives every call, so
 * a listener left on it would leak).
 */
function linkSignals(
  call: AbortSignal,
  shutdown: AbortSignal,
): { signal: AbortSignal; release: () => void } {
  const controller = new AbortController();
  const onCall = (): void => controller.abort(call.reason);
  const onShutdown = (): void => controller.abort(shutdown.reason);
  const release = (): void => {
    call.removeEventListener('abort', onCall);
    shutdown.removeEventListener('abort', onShutdown);
  };
  if (call.aborted) onCall();
  else if (shutdown.aborted) onShutdown();
  else {
    call.addEventListener('abort', onCall, { once: true });
    shutdown.addEventListener('abort', onShutdown, { once: true });
  }
  return { signal: controller.signal, release };
}

/**
 * Builds the handler wrappers for one service. Messages of refused or failed calls go to
 * the log (they never hold secrets: AppError messages are written for users); requests
 * are never logged.
 */
export function createCallHandlers<S extends StateService>(
  options: CallHandlerOptions<S>,
): CallHandlers<S> {
  const { metrics } = options;

  /**
   * Authorizes the call and builds its context. The signal and the logger are made on
   * first use: most calls never log, and a pino child (with redaction) and an
   * AbortController wired to the call cost more than a Head call's own work.
   */
  function begin(call: AnyCall, method: string, roles: readonly StateRole[]): CallContext {
    const identity = authorize(
      callerIdentityOf(call.getAuthContext().sslPeerCertificate),
      method,
      roles,
    );
    let signal: AbortSignal | undefined;
    let log: Logger | undefined;
    return {
      identity,
      get signal(): AbortSignal {
        if (signal === undefined) {
          const controller = new AbortController();
          const cancel = (): void =>
            controller.abort(new AppError('cancelled', `${method} was cancelled by the caller`));
          if (call.cancelled) cancel();
          else call.once('cancelled', cancel);
          signal = controller.signal;
        }
        return signal;
      },
      get log(): Logger {
        log ??= options.log.child({ method, caller: describeIdentity(identity) });
        return log;
      },
    };
  }

  function count(method: string, code: number): void {
    metrics?.calls.inc({ method, status: grpcStatusName(code) });
  }

  /** The call's SERVER span, its parent the caller's span (metadata); none when off. */
  function callSpan(call: AnyCall, method: string): ReturnType<typeof startSpan> {
    const { service } = options;
    return startSpan(`${service}/${method}`, {
      kind: SpanKind.SERVER,
      parent: extractTraceMetadata(call.metadata),
      attributes: { 'rpc.system': 'grpc', 'rpc.service': service, 'rpc.method': method },
    });
  }

  function endSpan(span: Span | undefined, code: number, error?: AppError): void {
    if (span === undefined) return;
    span.setAttribute('rpc.grpc.status_code', code);
    // A caller's refusal (a moved head, a stale token) is an answer, not a server fault.
    if (error !== undefined) {
      if (code === 2 || code === 13 || code === 14 || code === 15) recordSpanError(span, error);
      else span.setAttribute('error.type', error.code);
    }
    span.end();
  }

  function unary<Req, Res>(
    method: StateServiceMethods[S],
    run: (request: Req, context: CallContext) => Promise<Res>,
  ): (call: ServerUnaryCall<Req, Res>, callback: sendUnaryData<Res>) => void {
    const access = rolesFor(options.service, method);
    return (call, callback) => {
      const traced = callSpan(call, method);
      if (traced === undefined) answerUnary(call, callback, method, access, run, undefined);
      else {
        otelContext.with(traced.context, () =>
          answerUnary(call, callback, method, access, run, traced.span),
        );
      }
    };
  }

  function answerUnary<Req, Res>(
    call: ServerUnaryCall<Req, Res>,
    callback: sendUnaryData<Res>,
    method: string,
    access: readonly StateRole[],
    run: (request: Req, context: CallContext) => Promise<Res>,
    span: Span | undefined,
  ): void {
    let context: CallContext;
    try {
      context = begin(call, method, access);
    } catch (error) {
      const appError = asAppError(error, options.log, method);
      options.log.warn({ method, code: appError.code, err: appError }, 'call refused');
      count(method, errorStatus[appError.code].grpc);
      endSpan(span, errorStatus[appError.code].grpc, appError);
      callback(grpcErrorOf(appError));
      return;
    }
    // A handler that throws synchronously (a bad partition name in store.head) must
    // still answer with its status.
    new Promise<Res>((resolve) => resolve(run(call.request, context))).then(
      (response) => {
        count(method, 0);
        endSpan(span, 0);
        callback(null, response);
      },
      (error: unknown) => {
        const appError = asAppError(error, context.log, method);
        count(method, errorStatus[appError.code].grpc);
        endSpan(span, errorStatus[appError.code].grpc, appError);
        context.log.debug({ code: appError.code, message: appError.message }, 'call failed');
        callback(grpcErrorOf(appError));
      },
    );
  }

  function streaming<Req, Item>(
    method: StateServiceMethods[S],
    produce: (request: Req, context: CallContext) => AsyncIterable<Item>,
    streamingOptions: StreamingOptions<Req> = {},
  ): (call: ServerWritableStream<Req, Item>) => void {
    const access = rolesFor(options.service, method);
    return (call) => {
      const traced = callSpan(call, method);
      if (traced === undefined) answerStreaming(call, method, access, produce, streamingOptions);
      else {
        otelContext.with(traced.context, () =>
          answerStreaming(call, method, access, produce, streamingOptions, traced.span),
        );
      }
    };
  }

  function answerStreaming<Req, Item>(
    call: ServerWritableStream<Req, Item>,
    method: string,
    access: readonly StateRole[],
    produce: (request: Req, context: CallContext) => AsyncIterable<Item>,
    streamingOptions: StreamingOptions<Req>,
    span?: Span,
  ): void {
    let context: CallContext;
    try {
      context = begin(call, method, access);
    } catch (error) {
      const appError = asAppError(error, options.log, method);
      options.log.warn({ method, code: appError.code, err: appError }, 'call refused');
      count(method, errorStatus[appError.code].grpc);
      endSpan(span, errorStatus[appError.code].grpc, appError);
      call.emit('error', grpcErrorOf(appError));
      return;
    }
    let release = (): void => undefined;
    if (
      options.shutdown !== undefined &&
      streamingOptions.endsOnShutdown?.(call.request) === true
    ) {
      const linked = linkSignals(context.signal, options.shutdown);
      release = linked.release;
      const base = context;
      context = {
        identity: base.identity,
        signal: linked.signal,
        get log(): Logger {
          return base.log;
        },
      };
    }
    const sent = { messages: 0 };
    const running = pump(call, produce(call.request, context), context, sent);
    running.then(release, release);
    void running.then(
      () => {
        count(method, 0);
        span?.setAttribute('polychrome.stream.messages', sent.messages);
        endSpan(span, 0);
      },
      (error: unknown) => {
        const appError = asAppError(error, context.log, method);
        count(method, errorStatus[appError.code].grpc);
        span?.setAttribute('polychrome.stream.messages', sent.messages);
        endSpan(span, errorStatus[appError.code].grpc, appError);
        // A cancelled call has nobody listening; anything else gets its status.
        if (!call.cancelled) call.emit('error', grpcErrorOf(appError));
      },
    );
  }

  async function pump<Item>(
    call: ServerWritableStream<unknown, Item>,
    items: AsyncIterable<Item>,
    context: CallContext,
    sent: { messages: number },
  ): Promise<void> {
    for await (const item of items) {
      if (context.signal.aborted) throw context.signal.reason;
      sent.messages += 1;
      if (!call.write(item)) {
        // Backpressure: the client (or HTTP/2 flow control) is behind; wait for room, or
        // stop at once if the call goes away meanwhile.
        const controller = new AbortController();
        const stop = (): void => controller.abort();
        context.signal.addEventListener('abort', stop, { once: true });
        try {
          await once(call, 'drain', { signal: controller.signal });
        } catch {
          throw context.signal.reason;
        } finally {
          context.signal.removeEventListener('abort', stop);
        }
      }
    }
    call.end();
  }

  return { unary, streaming };
}
