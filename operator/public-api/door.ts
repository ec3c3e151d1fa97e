/**
 * The seams of the API layer (docs/design.md, "The API layer"). A request comes in on one
 * of three doors: the public listener (a bearer session token), the peer listener (a
 * control-plane replica's certificate and the caller it forwards) and the Kubernetes door
 * (kube-apiserver's front proxy, operator/kube-api). Each door answers two questions in
 * its own way, and only those: which operation a method and path ask for, and who is
 * calling. Everything after that (the operations in operations.ts, where they run in
 * holder-routing.ts) takes an {@link Asked} and knows nothing of listeners.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Caller } from '../turns/turn-service';
import type { ApiError, ErrorAnswer } from './api-error';
import type { CallerLimits } from './caller-limits';
import type { Route } from './routes';

/** Which listener a request came in on: the request log line names it. */
export const Listener = { Public: 'public', Peer: 'peer', Kube: 'kube' } as const;
export type Listener = (typeof Listener)[keyof typeof Listener];

/** Facts learnt while a request is handled that its log line carries. */
export interface RequestNotes {
  /** Set once the conversation id is known. */
  conversation?: string;
  /** The error code answered. */
  errorCode?: string;
}

/** One request in flight, as doors and operations see it. */
export interface Exchange {
  readonly request: IncomingMessage;
  readonly response: ServerResponse;
  readonly requestId: string;
  readonly query: URLSearchParams;
  /** Aborts when the client goes away before the answer is sent, or the API closes. */
  readonly signal: AbortSignal;
  readonly notes: RequestNotes;
}

/** What a door's routes make of a request's method and path. */
export type DoorMatch =
  /** An operation of the API, with its path parameters. */
  | {
      readonly kind: 'operation';
      readonly template: string;
      readonly route: Route;
      readonly params: Readonly<Record<string, string>>;
    }
  /** Something the door answers itself (the Kubernetes door's discovery, sessions, UI). */
  | {
      readonly kind: 'own';
      readonly template: string;
      serve(exchange: Exchange): Promise<void>;
    }
  /** No route, a method the route does not take, or a request the door refuses outright. */
  | { readonly kind: 'refused'; readonly template: string; readonly error: ApiError };

/** Who asks, as a door established it, in the terms every operation takes. */
export interface Asked {
  readonly caller: Caller;
  /**
   * The conversation the request names, checked (a uid).
   * @throws ApiError `invalid_argument` for a malformed id
   */
  conversationId(): string;
  /** The JSON body as the operation reads it. */
  body(): Promise<unknown>;
  /**
   * What each heartbeat of a stream of `conversationId` asks again: does the caller still
   * hold the right it was let in with?
   */
  recheck(conversationId: string): () => Promise<void>;
}

/** What the API gives a listener of another folder when it starts (ApiListener). */
export interface ApiListenerContext {
  /** Runs a request that came in through `door` through the API's pipeline. */
  serve(door: Door, request: IncomingMessage, response: ServerResponse): Promise<void>;
  /** The caller limits, which the door counts requests against. */
  readonly limits: CallerLimits;
  readonly maxBodyBytes: number;
}

/** One way in. */
export interface Door {
  readonly listener: Listener;
  /** The request's route, before anything reads its body. */
  match(request: IncomingMessage, method: string, path: string): DoorMatch;
  /**
   * Who is calling, for an operation the door matched.
   * @throws ApiError 401 or 403 (and 429 where the door counts requests)
   */
  ask(exchange: Exchange, route: Route, params: Readonly<Record<string, string>>): Promise<Asked>;
  /** Answers `error` in the door's shape (the public error body, or a Kubernetes Status). */
  answerError(
    exchange: Pick<Exchange, 'request' | 'response' | 'requestId'>,
    error: unknown,
  ): ErrorAnswer;
}
