/**
 * The public API's door (docs/api.md): routes from the route table, and the caller from
 * the bearer session token (the authentication cache in front of the records), counted
 * against the caller's request rate. Errors are answered in the public error shape.
 */
import { isAppError } from '../../common/errors';
import type { Caller, TurnService } from '../turns/turn-service';
import { ApiError, bearerChallenge, errorAnswer, type ErrorAnswer } from './api-error';
import type { AuthCache } from './auth-cache';
import { parseBearerToken } from './bearer-token';
import type { CallerLimits } from './caller-limits';
import { Listener, type Asked, type Door, type DoorMatch, type Exchange } from './door';
import { headerOf, sendJson } from './http-io';
import { discardBody, readJsonBody } from './request-body';
import { parseConversationId } from './request-parsers';
import { matchRoute, UNMATCHED_ROUTE } from './routes';

export interface PublicDoorOptions {
  readonly auth: AuthCache;
  readonly limits: CallerLimits;
  /** What a stream's heartbeat asks again: may the caller still see the conversation? */
  readonly service: Pick<TurnService, 'conversation'>;
  readonly maxBodyBytes: number;
}

export class PublicDoor implements Door {
  readonly listener = Listener.Public;

  constructor(private readonly options: PublicDoorOptions) {}

  match(_request: unknown, method: string, path: string): DoorMatch {
    return routeOf(method, path);
  }

  async ask(
    exchange: Exchange,
    _route: unknown,
    params: Readonly<Record<string, string>>,
  ): Promise<Asked> {
    const token = parseBearerToken(headerOf(exchange.request, 'authorization'));
    const caller = await this.authenticate(token);
    this.options.limits.admitRequest(caller);
    return {
      caller,
      conversationId: () => conversationIdOf(exchange, params),
      body: () => readJsonBody(exchange.request, this.options.maxBodyBytes),
      // Does the token still hold (the cache answers until its entry expires), and may its
      // caller still read the conversation?
      recheck: (conversationId) => async () => {
        const current = await this.authenticate(token);
        await this.options.service.conversation(current, conversationId);
      },
    };
  }

  answerError(
    exchange: Pick<Exchange, 'request' | 'response' | 'requestId'>,
    error: unknown,
  ): ErrorAnswer {
    return answerPublicError(exchange, error);
  }

  /** @throws ApiError 401 with the `invalid_token` challenge for a token that does not hold. */
  private async authenticate(token: string): Promise<Caller> {
    try {
      return await this.options.auth.authenticate(token);
    } catch (error) {
      if (isAppError(error) && error.code === 'unauthenticated') {
        throw new ApiError('unauthenticated', error.message, {
          headers: { 'www-authenticate': bearerChallenge('invalid_token') },
          cause: error,
        });
      }
      throw error;
    }
  }
}

/** The public route table's answer for `method` and `path`: an operation, 404 or 405. */
export function routeOf(method: string, path: string): DoorMatch {
  const match = matchRoute(method, path);
  switch (match.kind) {
    case 'matched':
      return {
        kind: 'operation',
        template: match.route.template,
        route: match.route,
        params: match.params,
      };
    case 'method_not_allowed':
      return {
        kind: 'refused',
        template: match.template,
        error: new ApiError(
          'invalid_argument',
          `${match.template} does not accept ${method}; use ${match.allow.join(' or ')}`,
          { httpStatus: 405, headers: { allow: match.allow.join(', ') } },
        ),
      };
    case 'not_found':
      return {
        kind: 'refused',
        template: UNMATCHED_ROUTE,
        error: new ApiError(
          'not_found',
          `no route ${method} ${path.slice(0, 200)}; docs/api.md lists the routes (GET /v1/openapi.json)`,
        ),
      };
  }
}

/** The path's conversation id, checked, and noted for the request's log line. */
export function conversationIdOf(
  exchange: Pick<Exchange, 'notes'>,
  params: Readonly<Record<string, string>>,
): string {
  const id = parseConversationId(params.conversationId ?? '');
  exchange.notes.conversation = id;
  return id;
}

/** Answers `error` in the public error shape (api-error.ts). */
export function answerPublicError(
  exchange: Pick<Exchange, 'request' | 'response' | 'requestId'>,
  error: unknown,
): ErrorAnswer {
  const answer = errorAnswer(error, exchange.requestId);
  // An answer before the body was read: drop the rest so the client can read this.
  discardBody(exchange.request);
  sendJson(exchange.response, answer.status, answer.body, answer.headers);
  return answer;
}
