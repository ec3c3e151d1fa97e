/**
 * One request's way through the API, the same on every door: an `X-Request-Id`, the
 * refusal of a POST or DELETE that is not JSON (before anything else), the door's route,
 * the door's caller, the operation, and one log line and the request metrics when the
 * answer is done (never a token or message text). Errors are answered in the door's shape.
 */
import { randomUUID } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Logger } from 'pino';
import { isAppError } from '../../common/errors';
import { ApiError } from './api-error';
import type { ApiMetrics } from './api-metrics';
import { LimitError } from './caller-limits';
import { Listener, type Door, type Exchange, type RequestNotes } from './door';
import { headerOf } from './http-io';
import type { ApiOperations } from './operations';
import { contentTypeRefusal } from './request-body';
import type { Route } from './routes';

export interface RequestPipelineOptions {
  readonly log: Logger;
  readonly metrics: ApiMetrics;
}

/** A door and the operations its requests run. */
export interface Entrance {
  readonly door: Door;
  readonly operations: ApiOperations;
}

export class RequestPipeline {
  /** The requests being answered: {@link abortAll} aborts them. */
  private readonly aborters = new Map<AbortController, ServerResponse>();
  private readonly inFlight = new Set<Promise<void>>();
  private closing = false;

  constructor(private readonly options: RequestPipelineOptions) {}

  /** Handles one request that came in through `entrance`; tracked until it settles. */
  serve(entrance: Entrance, request: IncomingMessage, response: ServerResponse): Promise<void> {
    const handling = this.handle(entrance, request, response);
    this.inFlight.add(handling);
    void handling.finally(() => this.inFlight.delete(handling));
    return handling;
  }

  /**
   * From now on every answer closes its connection; aborts the signal of every request in
   * progress (a running turn is cancelled by the service and stays recoverable from the
   * journal), which then answers 503 `unavailable`.
   */
  abortAll(reason: string): void {
    this.closing = true;
    for (const [aborter, response] of this.aborters) {
      if (!response.headersSent) response.setHeader('connection', 'close');
      aborter.abort(new Error(reason));
    }
  }

  /** Resolves when every request in progress has settled. */
  async settled(): Promise<void> {
    await Promise.all([...this.inFlight]);
  }

  private async handle(
    { door, operations }: Entrance,
    request: IncomingMessage,
    response: ServerResponse,
  ): Promise<void> {
    const requestId = randomUUID();
    response.setHeader('x-request-id', requestId);
    if (this.closing) response.setHeader('connection', 'close');
    const rawUrl = request.url ?? '/';
    const queryAt = rawUrl.indexOf('?');
    const path = queryAt < 0 ? rawUrl : rawUrl.slice(0, queryAt);
    const method = request.method ?? 'GET';
    const match = door.match(request, method, path);
    const aborter = new AbortController();
    const exchange: Exchange = {
      request,
      response,
      requestId,
      query: new URLSearchParams(queryAt < 0 ? '' : rawUrl.slice(queryAt + 1)),
      signal: aborter.signal,
      notes: {},
    };
    this.aborters.set(aborter, response);
    this.logWhenDone(exchange, door, method, match.template, aborter);

    // First of all, on every listener: a POST or DELETE that is not declared JSON is what a
    // cross-site page can send (request-body.ts), so nothing else may happen for it.
    const notJson = contentTypeRefusal(
      method,
      headerOf(request, 'content-type'),
      door.listener === Listener.Kube,
    );
    if (notJson !== undefined || match.kind === 'refused') {
      const error = notJson ?? (match.kind === 'refused' ? match.error : undefined);
      this.answerError(exchange, door, error, match.template);
      return;
    }
    try {
      if (match.kind === 'own') await match.serve(exchange);
      else await this.run({ door, operations }, exchange, match.route, match.params);
    } catch (caught) {
      // Aborted by close() (the client is still there): whatever the service made of the
      // abort, the client should retry elsewhere.
      const error =
        this.closing && aborter.signal.aborted && !response.destroyed
          ? new ApiError(
              'unavailable',
              'this control plane replica shut down while handling the request; retry ' +
                '(with the same idempotency key for a message: another replica resumes the turn)',
              { cause: caught },
            )
          : caught;
      if (error instanceof LimitError) this.options.metrics.refused(error.limit);
      this.answerError(exchange, door, error, match.template);
    }
  }

  /** Who asks (unless anyone may), then the operation. */
  private async run(
    { door, operations }: Entrance,
    exchange: Exchange,
    route: Route,
    params: Readonly<Record<string, string>>,
  ): Promise<void> {
    const asked = route.authenticated ? await door.ask(exchange, route, params) : undefined;
    await operations.run(exchange, route, params, asked);
  }

  /** Answers `error` unless an answer has started; logs it when the fault is ours. */
  private answerError(exchange: Exchange, door: Door, error: unknown, route: string): void {
    exchange.notes.errorCode = isAppError(error) ? error.code : 'internal';
    const { response } = exchange;
    if (response.headersSent || response.destroyed) return;
    const answer = door.answerError(exchange, error);
    if (answer.isServerFault) {
      this.options.log.error(
        { err: error, requestId: exchange.requestId, route },
        'request failed',
      );
    }
  }

  /** The request's log line and metrics, when its answer is done or the client went away. */
  private logWhenDone(
    exchange: Exchange,
    door: Door,
    method: string,
    route: string,
    aborter: AbortController,
  ): void {
    const startedAt = performance.now();
    const { response, notes } = exchange;
    response.once('close', () => {
      this.aborters.delete(aborter);
      if (!response.writableFinished) aborter.abort(new Error('client closed the connection'));
      const ms = performance.now() - startedAt;
      this.options.metrics.observe(route, response.statusCode, ms / 1000);
      this.options.log.info(
        {
          requestId: exchange.requestId,
          method,
          route,
          ...(door.listener === Listener.Public ? {} : { listener: door.listener }),
          status: response.statusCode,
          ms: Math.round(ms),
          ...logNotes(notes),
          ...(response.writableFinished ? {} : { aborted: true }),
        },
        'request served',
      );
    });
  }
}

function logNotes(notes: RequestNotes): Record<string, string> {
  return {
    ...(notes.conversation === undefined ? {} : { conversation: notes.conversation }),
    ...(notes.errorCode === undefined ? {} : { code: notes.errorCode }),
  };
}
