import { randomUUID } from 'node:crypto';
import { once } from 'node:events';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import type { TLSSocket } from 'node:tls';
import type { Logger } from 'pino';
import type { Registry } from 'prom-client';
import {
  certificateIdentityOf,
  CertificateRole,
  describeCertificateIdentity,
  describeRoles,
  isControlPlaneReplica,
} from '../../common/certificate-identity';
import { isAppError } from '../../common/errors';
import { componentLogger, LogComponent } from '../../common/log';
import openapiDocument from '../../docs/api/openapi.json';
import type { ConversationForensics } from '../forensics/conversation-forensics';
import { checkpointHeader, publicKeysHeader } from '../forensics/conversation-forensics';
import {
  parseAcceptRollbackRequest,
  parseActor,
  parseRepairRequest,
  parseResolveRequest,
} from '../forensics/forensics-access';
import type { Caller, PostMessage, TurnReply, TurnService } from '../turns/turn-service';
import type { KubeAdmission, KubeDoor } from '../kube-api/kube-door';
import type { KubeUser } from '../kube-api/front-proxy';
import type { KubeSessions } from '../kube-api/kube-sessions';
import type { UiAssets } from '../ui/ui-assets';
import {
  KUBE_SUBRESOURCES,
  KUBE_UI,
  kubeUiTemplate,
  kubeSessionsTemplate,
  kubeStatusBody,
  kubeSubresourceTemplate,
  matchKubeRoute,
  type KubeSubresource,
  type SessionsAction,
} from '../kube-api/kube-routes';
import { ApiError, bearerChallenge, errorAnswer, errorOfAnswer } from './api-error';
import { ApiMetrics } from './api-metrics';
import { CallerLimits, LimitError, LimitName, type CallerLimitsOptions } from './caller-limits';
import { AuthCache, DEFAULT_AUTH_CACHE_MS, type Authenticate } from './auth-cache';
import { parseBearerToken } from './bearer-token';
import { EventStream } from './event-stream';
import type { PeerDirectory } from './peer-endpoints';
import {
  DEFAULT_PEER_PORT,
  FORWARDED_HEADER,
  parsePeerEnvelope,
  PeerClient,
  type PeerAnswer,
  type PeerTls,
} from './peer-hop';
import {
  DEFAULT_LINGER_MS,
  DEFAULT_RING_SIZE,
  JournalHub,
  type FollowJournal,
  type FollowRetryOptions,
} from './journal-hub';
import {
  contentTypeRefusal,
  DEFAULT_MAX_BODY_BYTES,
  discardBody,
  hasNoBody,
  readJsonBody,
} from './request-body';
import {
  parseApprovalAnswer,
  parseConversationId,
  parseCreateConversation,
  parseMessageInput,
  parseQuestionAnswer,
  parseRequestId,
  parseStreamCursor,
  resolveIdempotencyKey,
  type MessageInput,
} from './request-parsers';
import { tracedRequest } from './request-span';
import { matchRoute, Operation, ROUTES, UNMATCHED_ROUTE, type Route } from './routes';

/** The public API's port (docs/design.md, "Three planes"). */
export const DEFAULT_PUBLIC_API_PORT = 8080;
/** Interval of `: keep-alive` comments on streams. */
export const DEFAULT_HEARTBEAT_MS = 15_000;
/** How long a closing stream's client gets to read its last bytes. */
export const DEFAULT_STREAM_CLOSE_TIMEOUT_MS = 5_000;
/**
 * How long every listener keeps an idle keep-alive connection open. It must outlast the
 * idle timeout of whatever pools connections to it, so that the client, never the server,
 * closes an idle connection: kube-apiserver's proxy to an aggregated API (Go's default
 * transport, 90 s), ingress-nginx's upstream pool and AWS load balancers (60 s), Google
 * Cloud's load balancers (600 s, fixed). Node's default of 5 s loses a race with them: a
 * request sent on a connection the server is closing fails, and a proxy does not retry a
 * POST, so kube-apiserver answered an approval 503 "error trying to reach service: EOF".
 */
export const KEEP_ALIVE_TIMEOUT_MS = 620_000;

/** The replica-to-replica side of the API (docs/api.md, "Between replicas"). */
export interface PeerOptions {
  /** @default '0.0.0.0' */
  readonly host?: string;
  /** 0 lets the system pick (tests). @default {@link DEFAULT_PEER_PORT} */
  readonly port?: number;
  /** The control plane's certificate: served to peers and presented to them. */
  readonly tls: PeerTls;
  /** Where the replica that holds a conversation listens (peer-endpoints.ts). */
  readonly directory: PeerDirectory;
  /** @default 5000 */
  readonly connectTimeoutMs?: number;
}

/** Options of {@link PublicApiServer}. */
export interface PublicApiServerOptions {
  /** @default '0.0.0.0' */
  readonly host?: string;
  /** 0 lets the system pick (tests). @default {@link DEFAULT_PUBLIC_API_PORT} */
  readonly port?: number;
  /** Does everything past parsing: authorization, claims, turns, transcripts. */
  readonly service: TurnService;
  /**
   * The admins' export and repair (operator/forensics). None: those routes answer 503
   * `unavailable`.
   */
  readonly forensics?: Pick<ConversationForensics, 'export' | 'repair'>;
  /** Bearer token to caller (records-authenticator.ts adapts the RecordsClient). */
  readonly authenticate: Authenticate;
  /** Journal follow for streams (journal-follower.ts adapts the StateClient). */
  readonly follow: FollowJournal;
  /** Parent logger; the server logs under `component: api`. */
  readonly logger: Logger;
  /** @default {@link DEFAULT_HEARTBEAT_MS} */
  readonly heartbeatMs?: number;
  /**
   * How long a successful authentication is reused; a revoked token keeps working for at
   * most this long (an open stream: until the first heartbeat after it). 0 disables reuse.
   * @default 10000
   */
  readonly authCacheMs?: number;
  /** @default 10000 */
  readonly authCacheMaxEntries?: number;
  /** How long a refused token is refused again without asking; 0: never. @default 5000 */
  readonly authFailureCacheMs?: number;
  /**
   * Per-caller limits: conversations, open streams, request rate (caller-limits.ts), or
   * the limits themselves (tests look at them).
   * @default DEFAULT_LIMITS, with only in-flight creates counted as conversations
   */
  readonly limits?: CallerLimitsOptions | CallerLimits;
  /** @default {@link DEFAULT_MAX_BODY_BYTES} (64 KiB) */
  readonly maxBodyBytes?: number;
  /** Where the `polychrome_api_*` metrics are registered; none: not collected. */
  readonly registry?: Registry;
  /** Journal follow retries (shared follows and catch-up reads). @default 5 attempts, 100 ms doubling to 2 s */
  readonly followRetry?: FollowRetryOptions;
  /** Recent events kept per followed partition, and each stream's lag bound. @default 256 */
  readonly journalRingSize?: number;
  /** How long a partition's shared follow outlives its last stream. @default 5000 */
  readonly journalLingerMs?: number;
  /** @default {@link DEFAULT_STREAM_CLOSE_TIMEOUT_MS} */
  readonly streamCloseTimeoutMs?: number;
  /** Idempotency key for a message sent without one. @default `api-` + a random UUID */
  readonly newIdempotencyKey?: () => string;
  /** Milliseconds clock of the authentication cache. @default Date.now */
  readonly now?: () => number;
  /**
   * Forwarding to the replica that holds a conversation, and the peer listener that takes
   * forwarded requests. None: a request for a conversation another replica holds is
   * answered 503, and no peer listener opens.
   */
  readonly peers?: PeerOptions;
  /**
   * The Kubernetes door (docs/kube-api.md): an HTTPS listener that serves
   * api.polychrome.dev to kube-apiserver's front proxy. None: no such listener.
   */
  readonly kube?: KubeListenerOptions;
}

/** The Kubernetes door's listener. */
export interface KubeListenerOptions {
  /** @default '0.0.0.0' */
  readonly host?: string;
  /** 0 lets the system pick (tests). @default {@link DEFAULT_KUBE_API_PORT} */
  readonly port?: number;
  /** The serving certificate (PEM) the APIService's caBundle vouches for, and its key. */
  readonly cert: string;
  readonly key: string;
  /**
   * Registers a listener for a renewed certificate and key (common/serving-certificate.ts); the
   * listener serves them to new connections. None: served as given until restart.
   */
  readonly onCertificateChange?: (listener: (pair: { cert: string; key: string }) => void) => void;
  /** Who is calling and may they: the front proxy, SubjectAccessReviews, names to uids. */
  readonly door: KubeDoor;
  /** The `sessions` resource (kube-sessions.ts). None: answered NotFound. */
  readonly sessions?: KubeSessions;
  /** The forensics UI's files (operator/ui). None: answered NotFound. */
  readonly ui?: UiAssets;
}

/** The Kubernetes door's port (the APIService's Service targets it). */
export const DEFAULT_KUBE_API_PORT = 8444;

/** Which listener a request came in on. */
const Listener = { Public: 'public', Peer: 'peer', Kube: 'kube' } as const;
type Listener = (typeof Listener)[keyof typeof Listener];

/** The only operations the peer listener serves: the ones a replica forwards. */
const PEER_OPERATIONS: ReadonlySet<Operation> = new Set([
  Operation.PostMessage,
  Operation.AnswerApproval,
  Operation.AnswerQuestion,
  Operation.RepairConversation,
  Operation.ResolveTurn,
  Operation.AcceptRollback,
]);

/** Who asks, and a reader of what they sent. */
interface Asked {
  readonly caller: Caller;
  readonly body: () => Promise<unknown>;
}

/** What a handler knows about its request. */
interface RequestContext {
  readonly request: IncomingMessage;
  readonly response: ServerResponse;
  readonly requestId: string;
  readonly listener: Listener;
  readonly route: Route;
  readonly params: Readonly<Record<string, string>>;
  readonly query: URLSearchParams;
  /** Aborts when the client goes away before the answer is sent. */
  readonly signal: AbortSignal;
  /** What the request log line adds. */
  readonly notes: RequestNotes;
  /** The Kubernetes door's verdict on this request (Kube listener, once admitted). */
  kube?: KubeAdmission;
}

/** Facts a handler learns that the request's log line carries. */
interface RequestNotes {
  /** Set once the conversation id parsed. */
  conversation?: string;
  /** The error code answered. */
  errorCode?: string;
}

const OPENAPI_BODY = JSON.stringify(openapiDocument);

/**
 * The control plane's public API: JSON over HTTP plus Server-Sent Events on port 8080
 * (docs/api.md; the OpenAPI document is docs/api/openapi.json). It authenticates (bearer
 * session tokens), parses and validates, maps errors to statuses (common/errors.ts
 * `errorStatus`) and streams journals; the {@link TurnService} does the rest.
 *
 * With `peers`, a message or answer for a conversation another replica holds is forwarded
 * once to that replica's peer listener (mutual TLS, the caller it authenticated, never the
 * token), and this replica's own peer listener takes such requests from replicas only
 * (docs/api.md, "Between replicas").
 *
 * Every request gets an `X-Request-Id`, one log line at `info` (method, route template,
 * status, duration; never a token or message text) and the request metrics.
 *
 * @example
 * async function serve(service: TurnService, records: RecordsClient, state: StateClient, log: Logger) {
 *   const api = new PublicApiServer({
 *     service,
 *     authenticate: recordsAuthenticator(records),
 *     follow: stateJournalFollower(state),
 *     logger: log,
 *   });
 *   await api.start();
 *   return api; // await api.close() on SIGTERM
 * }
 */
export class PublicApiServer {
  private readonly options: PublicApiServerOptions;
  private readonly log: Logger;
  private readonly auth: AuthCache;
  private readonly metrics: ApiMetrics;
  private readonly limits: CallerLimits;
  private readonly streams = new Set<EventStream>();
  /** One journal follow per partition, shared by its streams. */
  private readonly hub: JournalHub;
  private readonly inFlight = new Set<Promise<void>>();
  /** The requests being answered: close() aborts them. */
  private readonly requestAborters = new Map<AbortController, ServerResponse>();
  private readonly maxBodyBytes: number;
  private server: Server | undefined;
  private peerServer: Server | undefined;
  private kubeServer: Server | undefined;
  private readonly peerClient: PeerClient | undefined;
  private closing: Promise<void> | undefined;

  constructor(options: PublicApiServerOptions) {
    this.options = options;
    this.log = componentLogger(options.logger, LogComponent.Api);
    this.auth = new AuthCache({
      authenticate: options.authenticate,
      ttlMs: options.authCacheMs ?? DEFAULT_AUTH_CACHE_MS,
      ...(options.authCacheMaxEntries === undefined
        ? {}
        : { maxEntries: options.authCacheMaxEntries }),
      ...(options.now === undefined ? {} : { now: options.now }),
      ...(options.authFailureCacheMs === undefined
        ? {}
        : { failureTtlMs: options.authFailureCacheMs }),
    });
    this.limits =
      options.limits instanceof CallerLimits ? options.limits : new CallerLimits(options.limits);
    this.maxBodyBytes = options.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES;
    this.peerClient =
      options.peers === undefined
        ? undefined
        : new PeerClient({
            tls: options.peers.tls,
            ...(options.peers.connectTimeoutMs === undefined
              ? {}
              : { connectTimeoutMs: options.peers.connectTimeoutMs }),
          });
    this.hub = new JournalHub({
      follow: options.follow,
      log: this.log,
      ...(options.followRetry === undefined ? {} : { retry: options.followRetry }),
      ringSize: options.journalRingSize ?? DEFAULT_RING_SIZE,
      lingerMs: options.journalLingerMs ?? DEFAULT_LINGER_MS,
    });
    this.metrics = new ApiMetrics(
      options.registry,
      () => this.streams.size,
      () => this.hub.follows,
      Object.values(LimitName),
    );
  }

  /** Streams open now (the `polychrome_api_open_streams` gauge). */
  get openStreams(): number {
    return this.streams.size;
  }

  /** Shared journal follows open now (the `polychrome_api_journal_follows` gauge). */
  get journalFollows(): number {
    return this.hub.follows;
  }

  /**
   * Listens; resolves with the bound address.
   *
   * @throws Error from node:http when the port cannot be bound, or when called twice.
   */
  async start(): Promise<{ host: string; port: number }> {
    if (this.server !== undefined) throw new Error('public API: start() called twice');
    const server = createServer((request, response) =>
      this.track(
        tracedRequest(request, response, () => this.handle(request, response, Listener.Public)),
      ),
    );
    this.server = server;
    await listen(server, this.options.port ?? DEFAULT_PUBLIC_API_PORT, this.options.host);
    const peers = this.options.peers;
    if (peers !== undefined) {
      // Deny by default: the handshake refuses a client without a certificate from the
      // Polychrome CA; each request then checks that the certificate is the control plane's.
      const peerServer = createHttpsServer(
        {
          ca: peers.tls.ca,
          cert: peers.tls.cert,
          key: peers.tls.key,
          requestCert: true,
          rejectUnauthorized: true,
          minVersion: 'TLSv1.3',
        },
        (request, response) =>
          this.track(
            tracedRequest(request, response, () => this.handle(request, response, Listener.Peer)),
          ),
      );
      this.peerServer = peerServer;
      await listen(peerServer, peers.port ?? DEFAULT_PEER_PORT, peers.host);
      this.log.info(this.peerAddress(), 'peer listener listening');
    }
    const kube = this.options.kube;
    if (kube !== undefined) {
      // The handshake asks for a client certificate but admits every client: a request
      // without one from the requestheader CA is answered 401 by the door, with a message
      // (rejecting in the handshake would leave the caller with a bare TLS alert).
      const requestHeader = await kube.door.start(AbortSignal.timeout(30_000));
      // What new connections get: the front-proxy CA and the serving pair, each replaced
      // when it changes (a rotated CA, a renewed certificate).
      let clientCa = requestHeader.clientCa;
      let serving = { cert: kube.cert, key: kube.key };
      const context = (): { cert: string; key: string; ca: string } => ({
        ...serving,
        ca: clientCa,
      });
      const kubeServer = createHttpsServer(
        {
          ...context(),
          requestCert: true,
          rejectUnauthorized: false,
          minVersion: 'TLSv1.2',
        },
        (request, response) =>
          this.track(
            tracedRequest(
              request,
              response,
              () => this.handle(request, response, Listener.Kube),
              kubeRouteTemplate,
            ),
          ),
      );
      kube.door.onConfigChange((next) => {
        clientCa = next.clientCa;
        kubeServer.setSecureContext(context());
      });
      kube.onCertificateChange?.((next) => {
        serving = next;
        kubeServer.setSecureContext(context());
      });
      this.kubeServer = kubeServer;
      await listen(kubeServer, kube.port ?? DEFAULT_KUBE_API_PORT, kube.host);
      this.log.info(this.kubeAddress(), 'Kubernetes door listening');
    }
    const address = this.address();
    this.log.info(address, 'public API listening');
    return address;
  }

  /**
   * The Kubernetes door's bound address.
   *
   * @throws Error when it is not listening (no `kube` option, or not started).
   */
  kubeAddress(): { host: string; port: number } {
    return boundAddress(this.kubeServer, 'the Kubernetes door');
  }

  private track(handling: Promise<void>): void {
    this.inFlight.add(handling);
    void handling.finally(() => this.inFlight.delete(handling));
  }

  /**
   * The peer listener's bound address.
   *
   * @throws Error when it is not listening (no `peers` option, or not started).
   */
  peerAddress(): { host: string; port: number } {
    return boundAddress(this.peerServer, 'the peer listener');
  }

  /**
   * The bound address.
   *
   * @throws Error when the server is not listening.
   */
  address(): { host: string; port: number } {
    return boundAddress(this.server, 'public API');
  }

  /**
   * Stops listening; sends every open stream `event: shutdown` and ends it; aborts the
   * signal of every request in progress (a running turn is cancelled by the service and
   * stays recoverable from the journal) and answers it 503 `unavailable` (retry with the
   * same idempotency key: another replica resumes the turn); then closes the remaining
   * connections. Resolves when all is closed. Idempotent.
   */
  close(): Promise<void> {
    const server = this.server;
    if (server === undefined) return Promise.resolve();
    this.closing ??= (async () => {
      const stopped = new Promise<void>((resolve) => server.close(() => resolve()));
      const peerServer = this.peerServer;
      const peerStopped = new Promise<void>((resolve) =>
        peerServer === undefined ? resolve() : peerServer.close(() => resolve()),
      );
      const kubeServer = this.kubeServer;
      const kubeStopped = new Promise<void>((resolve) =>
        kubeServer === undefined ? resolve() : kubeServer.close(() => resolve()),
      );
      this.options.kube?.door.stop();
      const streams = [...this.streams];
      for (const stream of streams) stream.shutdown();
      for (const [aborter, response] of this.requestAborters) {
        if (!response.headersSent) response.setHeader('connection', 'close');
        aborter.abort(new Error('the public API is shutting down'));
      }
      await Promise.all(streams.map((stream) => stream.closed));
      await this.hub.close();
      await Promise.all([...this.inFlight]);
      server.closeAllConnections();
      peerServer?.closeAllConnections();
      kubeServer?.closeAllConnections();
      await Promise.all([stopped, peerStopped, kubeStopped]);
      this.log.info({ streams: streams.length }, 'public API closed');
    })();
    return this.closing;
  }

  private async handle(
    request: IncomingMessage,
    response: ServerResponse,
    listener: Listener,
  ): Promise<void> {
    const startedAt = performance.now();
    const requestId = randomUUID();
    response.setHeader('x-request-id', requestId);
    if (this.closing !== undefined) response.setHeader('connection', 'close');
    const rawUrl = request.url ?? '/';
    const queryAt = rawUrl.indexOf('?');
    const path = queryAt < 0 ? rawUrl : rawUrl.slice(0, queryAt);
    const query = new URLSearchParams(queryAt < 0 ? '' : rawUrl.slice(queryAt + 1));
    const method = request.method ?? 'GET';
    const match =
      listener === Listener.Kube ? kubeRouteMatch(method, path) : matchRoute(method, path);
    const routeLabel =
      match.kind === 'matched' ||
      match.kind === 'discovery' ||
      match.kind === 'sessions' ||
      match.kind === 'ui'
        ? match.route.template
        : match.kind === 'method_not_allowed'
          ? match.template
          : UNMATCHED_ROUTE;
    const aborter = new AbortController();
    this.requestAborters.set(aborter, response);
    const notes: RequestNotes = {};
    response.once('close', () => {
      this.requestAborters.delete(aborter);
      if (!response.writableFinished) aborter.abort(new Error('client closed the connection'));
      const ms = performance.now() - startedAt;
      this.metrics.observe(routeLabel, response.statusCode, ms / 1000);
      this.log.info(
        {
          requestId,
          method,
          route: routeLabel,
          ...(listener === Listener.Public ? {} : { listener }),
          status: response.statusCode,
          ms: Math.round(ms),
          ...(notes.conversation === undefined ? {} : { conversation: notes.conversation }),
          ...(notes.errorCode === undefined ? {} : { code: notes.errorCode }),
          ...(response.writableFinished ? {} : { aborted: true }),
        },
        'request served',
      );
    });

    // First of all, on every listener: a POST or DELETE that is not declared JSON is what a
    // cross-site page can send (request-body.ts), so nothing else may happen for it.
    const notJson = contentTypeRefusal(
      method,
      headerOf(request, 'content-type'),
      listener === Listener.Kube,
    );
    if (notJson !== undefined) {
      notes.errorCode = notJson.code;
      this.sendError(request, response, requestId, notJson, listener);
      return;
    }
    const refusal =
      listener === Listener.Peer &&
      match.kind !== 'discovery' &&
      match.kind !== 'sessions' &&
      match.kind !== 'ui'
        ? peerRefusal(request, match)
        : undefined;
    if (refusal !== undefined) {
      notes.errorCode = refusal.code;
      this.sendError(request, response, requestId, refusal, listener);
      return;
    }
    if (match.kind === 'discovery') {
      this.serveDiscovery(request, response, requestId, match.body, notes);
      return;
    }
    if (match.kind === 'sessions' || match.kind === 'ui') {
      try {
        if (match.kind === 'ui') await this.serveUi(request, response, match, aborter.signal);
        else await this.serveSessions(request, response, match.action, aborter.signal);
      } catch (error) {
        notes.errorCode = isAppError(error) ? error.code : 'internal';
        if (!response.headersSent && !response.destroyed) {
          const answer = this.sendError(request, response, requestId, error, Listener.Kube);
          if (answer.isServerFault) {
            this.log.error({ err: error, requestId, route: routeLabel }, 'request failed');
          }
        }
      }
      return;
    }
    if (match.kind !== 'matched') {
      const error =
        match.kind === 'not_found'
          ? new ApiError(
              'not_found',
              listener === Listener.Kube
                ? `no subresource ${method} ${path.slice(0, 200)}; docs/kube-api.md lists them (kubectl get --raw /apis/api.polychrome.dev/v1alpha1)`
                : `no route ${method} ${path.slice(0, 200)}; docs/api.md lists the routes (GET /v1/openapi.json)`,
            )
          : new ApiError(
              'invalid_argument',
              `${match.template} does not accept ${method}; use ${match.allow.join(' or ')}`,
              { httpStatus: 405, headers: { allow: match.allow.join(', ') } },
            );
      notes.errorCode = error.code;
      this.sendError(request, response, requestId, error, listener);
      return;
    }
    const context: RequestContext = {
      request,
      response,
      requestId,
      listener,
      route: match.route,
      params: match.params,
      query,
      signal: aborter.signal,
      notes,
    };
    try {
      if (listener === Listener.Kube) context.kube = await this.admitKube(context);
      await this.dispatch(context);
    } catch (caught) {
      // Aborted by close() (the client is still there): whatever the service made of the
      // abort, the client should retry elsewhere.
      const error =
        this.closing !== undefined && aborter.signal.aborted && !response.destroyed
          ? new ApiError(
              'unavailable',
              'this control plane replica shut down while handling the request; retry ' +
                '(with the same idempotency key for a message: another replica resumes the turn)',
              { cause: caught },
            )
          : caught;
      notes.errorCode = isAppError(error) ? error.code : 'internal';
      if (error instanceof LimitError) this.metrics.refused(error.limit);
      if (!response.headersSent && !response.destroyed) {
        const answer = this.sendError(request, response, requestId, error, listener);
        if (answer.isServerFault) {
          this.log.error({ err: error, requestId, route: routeLabel }, 'request failed');
        }
      }
    }
  }

  private async dispatch(ctx: RequestContext): Promise<void> {
    switch (ctx.route.operation) {
      case Operation.GetOpenApi:
        sendBody(ctx.response, 200, OPENAPI_BODY, { 'cache-control': 'public, max-age=300' });
        return;
      case Operation.CreateConversation:
        return this.createConversation(ctx);
      case Operation.GetConversation: {
        const caller = await this.authenticate(ctx);
        const conversationId = this.conversationId(ctx);
        sendJson(
          ctx.response,
          200,
          await this.options.service.conversation(caller, conversationId),
        );
        return;
      }
      case Operation.PostMessage:
        return this.postMessage(ctx);
      case Operation.GetTranscript: {
        const caller = await this.authenticate(ctx);
        const conversationId = this.conversationId(ctx);
        sendJson(
          ctx.response,
          200,
          await this.options.service.transcript(caller, conversationId, ctx.signal),
        );
        return;
      }
      case Operation.AnswerApproval: {
        const { caller, body } = await this.asked(ctx);
        const conversationId = this.conversationId(ctx);
        const requestId = parseRequestId(ctx.params.requestId ?? '');
        const answer = parseApprovalAnswer(await this.answerBody(ctx, body, 'approval'));
        let reply: TurnReply;
        try {
          reply = await this.options.service.answerApproval(
            caller,
            { conversationId, requestId, ...answer },
            ctx.signal,
          );
        } catch (error) {
          if (await this.forwarded(ctx, error, { caller, body: answer })) return;
          throw error;
        }
        sendJson(ctx.response, 200, reply);
        return;
      }
      case Operation.AnswerQuestion: {
        const { caller, body } = await this.asked(ctx);
        const conversationId = this.conversationId(ctx);
        const requestId = parseRequestId(ctx.params.requestId ?? '');
        const answer = parseQuestionAnswer(await this.answerBody(ctx, body, 'question'));
        let reply: TurnReply;
        try {
          reply = await this.options.service.answerQuestion(
            caller,
            { conversationId, requestId, ...answer },
            ctx.signal,
          );
        } catch (error) {
          if (await this.forwarded(ctx, error, { caller, body: answer })) return;
          throw error;
        }
        sendJson(ctx.response, 200, reply);
        return;
      }
      case Operation.StreamEvents:
        return this.streamEvents(ctx);
      case Operation.ExportConversation:
        return this.exportConversation(ctx);
      case Operation.RepairConversation: {
        const { caller, body } = await this.asked(ctx);
        const conversationId = this.conversationId(ctx);
        const request = parseRepairRequest(await body());
        let answer: unknown;
        try {
          answer = await this.forensicsOf().repair(caller, conversationId, request, ctx.signal);
        } catch (error) {
          if (await this.forwarded(ctx, error, { caller, body: request })) return;
          throw error;
        }
        sendJson(ctx.response, 200, answer);
        return;
      }
      case Operation.ResolveTurn:
        return this.resolveTurn(ctx);
      case Operation.AcceptRollback:
        return this.acceptRollback(ctx);
    }
  }

  /** An admin accepts a rolled-back journal (docs/turns.md, "A rolled-back journal"). */
  private async acceptRollback(ctx: RequestContext): Promise<void> {
    const { caller, body } = await this.asked(ctx);
    const conversationId = this.conversationId(ctx);
    const raw = await body();
    const request = { conversationId, ...parseAcceptRollbackRequest(raw) };
    let answer: unknown;
    try {
      answer = await this.options.service.acceptRollback(caller, request, ctx.signal);
    } catch (error) {
      if (await this.forwarded(ctx, error, { caller, body: raw })) return;
      throw error;
    }
    sendJson(ctx.response, 200, answer);
  }

  /**
   * An admin settles a quarantined turn; the Kubernetes door's `resolve` names the turn in
   * the body (docs/api.md, "Resolve a quarantined turn").
   */
  private async resolveTurn(ctx: RequestContext): Promise<void> {
    const { caller, body } = await this.asked(ctx);
    const conversationId = this.conversationId(ctx);
    const raw = await body();
    const request = { conversationId, ...parseResolveRequest(raw, ctx.params.turnId) };
    let answer: unknown;
    try {
      answer = await this.options.service.resolveTurn(caller, request, ctx.signal);
    } catch (error) {
      if (await this.forwarded(ctx, error, { caller, body: raw })) return;
      throw error;
    }
    sendJson(ctx.response, 200, answer);
  }

  private forensicsOf(): Pick<ConversationForensics, 'export' | 'repair'> {
    const forensics = this.options.forensics;
    if (forensics === undefined) {
      throw new ApiError(
        'unavailable',
        'this control plane serves no export or repair (it was started without a forensics service)',
      );
    }
    return forensics;
  }

  /**
   * The journal export, streamed as NDJSON in the file format of `polychrome state export`;
   * the Conversation's status checkpoint goes in `X-Polychrome-Checkpoint`, its journal keys
   * in `X-Polychrome-Public-Keys`. A failure after the first line cuts the stream (the file
   * then fails verification where it stops).
   */
  private async exportConversation(ctx: RequestContext): Promise<void> {
    const caller = await this.authenticate(ctx);
    const conversationId = this.conversationId(ctx);
    const actor = parseActor(ctx.query.get('actor') ?? undefined);
    const exported = await this.forensicsOf().export(caller, conversationId, actor, ctx.signal);
    ctx.response.writeHead(200, {
      'content-type': 'application/x-ndjson; charset=utf-8',
      'cache-control': 'no-store',
      ...(exported.checkpoint === undefined
        ? {}
        : { 'x-polychrome-checkpoint': checkpointHeader(exported.checkpoint) }),
      ...(exported.publicKeys.length === 0
        ? {}
        : { 'x-polychrome-public-keys': publicKeysHeader(exported.publicKeys) }),
    });
    try {
      for await (const line of exported.lines) {
        if (!ctx.response.write(line)) await once(ctx.response, 'drain', { signal: ctx.signal });
      }
      ctx.response.end();
    } catch (error) {
      this.log.warn(
        { err: error, requestId: ctx.requestId, conversation: conversationId },
        'export cut short',
      );
      ctx.response.destroy(error instanceof Error ? error : new Error(String(error)));
    }
  }

  private async createConversation(ctx: RequestContext): Promise<void> {
    const caller = await this.authenticate(ctx);
    const body = hasNoBody(ctx.request) ? {} : await this.body(ctx);
    const input = parseCreateConversation(body);
    const header = headerOf(ctx.request, 'idempotency-key');
    if (input.message === undefined && header !== undefined) {
      throw new ApiError(
        'invalid_argument',
        'the Idempotency-Key header applies to a first message, and the body has none; ' +
          'creating a conversation is not idempotent: send no key, or send a message',
        { details: { field: 'Idempotency-Key' } },
      );
    }
    let key: string | undefined;
    const message =
      input.message === undefined
        ? undefined
        : this.withKey(input.message, header, 'message.idempotencyKey', (k) => (key = k));
    const release = this.limits.reserveConversation(caller);
    let created: Awaited<ReturnType<TurnService['createConversation']>>;
    try {
      created = await this.options.service.createConversation(
        caller,
        message === undefined ? {} : { message },
        ctx.signal,
      );
    } finally {
      release();
    }
    const conversationId = created.summary.conversationId;
    ctx.notes.conversation = conversationId;
    sendJson(
      ctx.response,
      201,
      {
        conversationId,
        conversation: created.summary,
        ...(created.turn === undefined ? {} : { turn: created.turn }),
      },
      {
        location: `/v1/conversations/${conversationId}`,
        ...(key === undefined ? {} : { 'idempotency-key': key }),
      },
    );
  }

  private async postMessage(ctx: RequestContext): Promise<void> {
    const { caller, body } = await this.asked(ctx);
    const conversationId = this.conversationId(ctx);
    const input = parseMessageInput(await body(), '');
    let key = '';
    const message = this.withKey(
      input,
      headerOf(ctx.request, 'idempotency-key'),
      'idempotencyKey',
      (k) => (key = k),
    );
    const request: PostMessage = { conversationId, ...message };
    let reply: TurnReply;
    try {
      reply = await this.options.service.postMessage(caller, request, ctx.signal);
    } catch (error) {
      // The same key travels on, so a generated one names the same turn there.
      if (await this.forwarded(ctx, error, { caller, body: message })) return;
      throw error;
    }
    sendJson(ctx.response, 200, reply, { 'idempotency-key': key });
  }

  /** The message with its idempotency key settled (body, header or generated). */
  private withKey(
    input: MessageInput,
    header: string | undefined,
    bodyField: string,
    onKey: (key: string) => void,
  ): Omit<PostMessage, 'conversationId'> {
    const { key } = resolveIdempotencyKey(
      input.idempotencyKey,
      header,
      bodyField,
      this.options.newIdempotencyKey ?? (() => `api-${randomUUID()}`),
    );
    onKey(key);
    return {
      text: input.text,
      idempotencyKey: key,
      ...(input.directive === undefined ? {} : { directive: input.directive }),
    };
  }

  private async streamEvents(ctx: RequestContext): Promise<void> {
    const caller = await this.authenticate(ctx);
    const conversationId = this.conversationId(ctx);
    const recheck = this.streamRecheck(ctx, conversationId);
    const fromPosition = parseStreamCursor({
      lastEventIdHeader: headerOf(ctx.request, 'last-event-id'),
      lastEventIdQuery: ctx.query.get('lastEventId') ?? undefined,
      since: ctx.query.get('since') ?? undefined,
    });
    const summary = await this.options.service.conversation(caller, conversationId);
    if (this.closing !== undefined) {
      throw new ApiError(
        'unavailable',
        'this control plane replica is shutting down; reconnect to reach another one',
      );
    }
    const stream = new EventStream({
      response: ctx.response,
      conversationId,
      partition: summary.partition,
      fromPosition,
      subscribe: (partition, from, signal) => this.hub.subscribe(partition, from, signal),
      onTextDelta: (id, listener) => this.options.service.onTextDelta(id, listener),
      heartbeatMs: this.options.heartbeatMs ?? DEFAULT_HEARTBEAT_MS,
      recheck,
      closeTimeoutMs: this.options.streamCloseTimeoutMs ?? DEFAULT_STREAM_CLOSE_TIMEOUT_MS,
      requestId: ctx.requestId,
      log: this.log.child({ conversation: conversationId, requestId: ctx.requestId }),
      ...(this.options.now === undefined ? {} : { now: this.options.now }),
    });
    // One of the caller's stream slots on this replica, given back however the stream ends.
    const releaseSlot = this.limits.openStream(caller);
    this.streams.add(stream);
    try {
      this.log.debug({ conversation: conversationId, fromPosition }, 'stream opened');
      const reason = await stream.run();
      this.log.debug(
        {
          conversation: conversationId,
          reason,
          events: stream.eventsSent,
          deltasDropped: stream.deltasDropped,
          nextPosition: stream.nextPosition,
        },
        'stream ended',
      );
      await stream.closed;
    } finally {
      this.streams.delete(stream);
      releaseSlot();
    }
  }

  /** The request's caller, counted against its request rate (caller-limits.ts). */
  private async authenticate(ctx: RequestContext): Promise<Caller> {
    const caller =
      ctx.listener === Listener.Kube
        ? admitted(ctx).caller
        : await this.authenticateToken(parseBearerToken(headerOf(ctx.request, 'authorization')));
    this.limits.admitRequest(caller);
    return caller;
  }

  /** The front proxy's user, or the door's 401 (no certificate from the requestheader CA). */
  private kubeUser(request: IncomingMessage): KubeUser {
    const door = this.options.kube?.door;
    if (door === undefined) throw new Error('the Kubernetes door is not configured');
    const socket = request.socket as TLSSocket;
    const commonName: unknown = socket.authorized
      ? Reflect.get(socket.getPeerCertificate().subject ?? {}, 'CN')
      : undefined;
    return door.authenticate(
      {
        authorized: socket.authorized,
        commonName: typeof commonName === 'string' ? commonName : undefined,
      },
      request.headersDistinct,
    );
  }

  /**
   * The Kubernetes door's verdict: the front proxy's user, allowed this subresource of this
   * Conversation by a SubjectAccessReview, with the Conversation's uid.
   */
  private async admitKube(ctx: RequestContext): Promise<KubeAdmission> {
    const door = this.options.kube?.door;
    const target = kubeTarget(ctx);
    if (door === undefined || target === undefined) {
      throw new Error('a Kubernetes door request without its door or target');
    }
    const admission = await door.admit(this.kubeUser(ctx.request), target, ctx.signal);
    ctx.notes.conversation = admission.caller.kubernetes?.conversationId;
    return admission;
  }

  /**
   * The `sessions` resource: the front proxy's user, then kube-sessions.ts (which asks its
   * own SubjectAccessReview). The answer holds the new token; nothing here logs it.
   */
  private async serveSessions(
    request: IncomingMessage,
    response: ServerResponse,
    action: SessionsAction,
    signal: AbortSignal,
  ): Promise<void> {
    const user = this.kubeUser(request);
    const sessions = this.options.kube?.sessions;
    if (sessions === undefined) {
      throw new ApiError(
        'not_found',
        'this control plane does not serve sessions (it was started without a records link); mint tokens through the records',
      );
    }
    if (action.kind === 'revoke') {
      sendJson(response, 200, await sessions.revoke(user, action.id, signal));
      return;
    }
    const body = await readJsonBody(request, this.maxBodyBytes);
    if (action.kind === 'set-roles') {
      sendJson(response, 200, await sessions.setRoles(user, body, signal));
      return;
    }
    sendJson(response, 201, await sessions.mint(user, body, signal));
  }

  /**
   * The forensics UI's files (docs/ui.md): the front proxy's user, the SubjectAccessReview
   * for `get` on `ui` in the namespace, then the file from memory (operator/ui).
   */
  private async serveUi(
    request: IncomingMessage,
    response: ServerResponse,
    target: { readonly namespace: string; readonly file: string },
    signal: AbortSignal,
  ): Promise<void> {
    const user = this.kubeUser(request);
    const { door, ui } = this.options.kube ?? {};
    if (door === undefined) throw new Error('a Kubernetes door request without its door');
    await door.admitNamespaced(
      user,
      {
        namespace: target.namespace,
        resource: KUBE_UI.resource,
        verb: KUBE_UI.verb,
        name: target.file,
      },
      signal,
    );
    if (ui === undefined) {
      throw new ApiError('not_found', 'this control plane serves no forensics UI (docs/ui.md)');
    }
    const answer = ui.serve(target.file, headerOf(request, 'if-none-match'));
    response.writeHead(answer.status, {
      ...answer.headers,
      'content-length': answer.body.length,
    });
    response.end(answer.body);
  }

  /** Discovery: any user the front proxy vouches for may read it (the aggregator does). */
  private serveDiscovery(
    request: IncomingMessage,
    response: ServerResponse,
    requestId: string,
    body: object,
    notes: RequestNotes,
  ): void {
    try {
      this.kubeUser(request);
    } catch (error) {
      notes.errorCode = isAppError(error) ? error.code : 'internal';
      this.sendError(request, response, requestId, error, Listener.Kube);
      return;
    }
    sendJson(response, 200, body);
  }

  /**
   * The caller and the body: on the public port from the bearer token (before the body is
   * read) and the body; on the peer port from the envelope the forwarding replica sent,
   * trusted because the peer proved with its certificate that it is a replica.
   */
  /**
   * The answer body of an approval or question. On the Kubernetes door a DELETE is the
   * cancel (RBAC `delete`), with an optional body `{"comment"}`; a POST is read as sent (its
   * `cancel` is refused by the turn code: a `create` grant does not cancel).
   */
  private async answerBody(
    ctx: RequestContext,
    body: () => Promise<unknown>,
    type: 'approval' | 'question',
  ): Promise<unknown> {
    if (ctx.listener !== Listener.Kube || ctx.route.method !== 'DELETE') return body();
    const sent: unknown = hasNoBody(ctx.request) ? {} : await body();
    const fields = typeof sent === 'object' && sent !== null && !Array.isArray(sent) ? sent : {};
    const extra = Object.keys(fields).find((k) => k !== 'comment');
    if (extra !== undefined || fields !== sent) {
      throw new ApiError(
        'invalid_argument',
        `a DELETE of ${type}s/{requestId} cancels it and takes no body but {"comment": "..."}; got ${extra === undefined ? 'a body that is not an object' : `the field ${JSON.stringify(extra.slice(0, 40))}`}`,
        { details: { field: extra ?? 'body' } },
      );
    }
    const comment: unknown = Reflect.get(fields, 'comment');
    const withComment = comment === undefined ? {} : { comment };
    return type === 'approval'
      ? { decision: 'cancel', ...withComment }
      : { cancel: true, ...withComment };
  }

  private async asked(ctx: RequestContext): Promise<Asked> {
    if (ctx.listener !== Listener.Peer) {
      const caller = await this.authenticate(ctx);
      return { caller, body: () => this.body(ctx) };
    }
    const envelope = parsePeerEnvelope(await this.body(ctx));
    return { caller: envelope.caller, body: () => Promise.resolve(envelope.body) };
  }

  /**
   * What each heartbeat of a stream asks again, the same as the routes ask. The public API:
   * does the token hold (the cache answers until its entry expires), and may its caller
   * still read the conversation? The Kubernetes door: does RBAC still allow the stream (a
   * new SubjectAccessReview), and does the name still mean the same Conversation?
   */
  private streamRecheck(ctx: RequestContext, conversationId: string): () => Promise<void> {
    if (ctx.listener === Listener.Kube) {
      return async () => {
        const again = await this.admitKube(ctx);
        if (again.caller.kubernetes?.conversationId !== conversationId) {
          throw new ApiError(
            'not_found',
            `the Conversation this stream followed (${conversationId}) is gone; its name now means another one`,
          );
        }
      };
    }
    const token = parseBearerToken(headerOf(ctx.request, 'authorization'));
    return async () => {
      const current = await this.authenticateToken(token);
      await this.options.service.conversation(current, conversationId);
    };
  }

  /** @throws ApiError 401 with the `invalid_token` challenge for a token that does not hold. */
  private async authenticateToken(token: string): Promise<Caller> {
    try {
      return await this.auth.authenticate(token);
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

  /**
   * The route a forwarded request takes on the holder's peer listener, which serves public
   * routes only: its own, or for the Kubernetes door the public route of the same operation
   * (a cancel there is a DELETE, here the POST whose body says cancel), naming the
   * conversation by the uid the door resolved, and the turn of a `resolve` by the one its
   * body names (the door's path has no room for it).
   */
  private peerTarget(ctx: RequestContext, body: unknown): { method: string; path: string } {
    const route =
      ctx.listener === Listener.Kube
        ? ROUTES.find((r) => r.operation === ctx.route.operation)
        : undefined;
    if (route === undefined) {
      return { method: ctx.request.method ?? 'POST', path: ctx.request.url ?? '/' };
    }
    const turnId: unknown =
      typeof body === 'object' && body !== null ? Reflect.get(body, 'turnId') : undefined;
    const values: Readonly<Record<string, string>> = {
      ...(typeof turnId === 'string' ? { turnId } : {}),
      ...ctx.params,
      conversationId: this.conversationId(ctx),
    };
    const path = route.template.replace(/\{([A-Za-z]+)\}/gu, (_, name: string) =>
      encodeURIComponent(values[name] ?? ''),
    );
    return { method: route.method, path };
  }

  private conversationId(ctx: RequestContext): string {
    if (ctx.listener === Listener.Kube) {
      const id = admitted(ctx).caller.kubernetes?.conversationId ?? '';
      ctx.notes.conversation = id;
      return id;
    }
    const id = parseConversationId(ctx.params.conversationId ?? '');
    ctx.notes.conversation = id;
    return id;
  }

  /**
   * Another replica holds the conversation (the service names it, as `forwardTo`): sends
   * the already authenticated caller and the parsed body once to that replica's peer
   * listener, found by the holder's Pod in the control plane's namespace, and relays its
   * answer.
   * The bearer token stays here. False when the error is not that or the request came in
   * on the peer listener (never forwarded twice), or forwarding is off (the caller then
   * gets the original 503).
   *
   * @throws ApiError 503 `unavailable` when no Ready control-plane pod is the holder or the hop fails:
   *   nothing was sent anywhere, or the holder may have started the turn, and either way a
   *   retry with the same idempotency key is safe.
   */
  private async forwarded(
    ctx: RequestContext,
    error: unknown,
    envelope: { caller: Caller; body: unknown },
  ): Promise<boolean> {
    const holder = isAppError(error) ? error.details?.forwardTo : undefined;
    const peers = this.options.peers;
    const client = this.peerClient;
    if (
      typeof holder !== 'string' ||
      ctx.listener === Listener.Peer ||
      peers === undefined ||
      client === undefined
    ) {
      return false;
    }
    const conversation = ctx.notes.conversation ?? 'of this request';
    const address = peers.directory.find(holder);
    if (address === undefined) {
      throw new ApiError(
        'unavailable',
        `replica ${JSON.stringify(holder.slice(0, 100))} holds conversation ${conversation}, and ` +
          `no Ready pod of that name is among ${peers.directory.source}, so the request was ` +
          'not forwarded; retry shortly (with the same idempotency key for a message: that is safe)',
        { details: { holder: holder.slice(0, 100) }, cause: error },
      );
    }
    let answer: PeerAnswer;
    try {
      answer = await client.send(
        address,
        {
          ...this.peerTarget(ctx, envelope.body),
          envelope,
          requestId: ctx.requestId,
        },
        ctx.signal,
      );
    } catch (cause) {
      const reason = cause instanceof Error ? cause.message : String(cause);
      this.log.warn(
        { err: cause, requestId: ctx.requestId, holder, peer: address },
        'forwarding failed',
      );
      throw new ApiError(
        'unavailable',
        `replica ${holder} holds conversation ${conversation}, and forwarding to it failed ` +
          `(${reason}); retry (with the same idempotency key for a message: that is safe)`,
        { details: { holder }, cause },
      );
    }
    if (ctx.listener === Listener.Kube && answer.status >= 400) {
      // The holder answered in the public API's error shape; a Kubernetes client reads a Status.
      throw errorOfAnswer(
        answer.status,
        answer.text,
        `replica ${holder} answered ${String(answer.status)}`,
        {
          holder,
        },
      );
    }
    const headers: Record<string, string> = { 'x-polychrome-served-by': holder };
    if (answer.idempotencyKey !== undefined) headers['idempotency-key'] = answer.idempotencyKey;
    ctx.response.writeHead(answer.status, {
      'content-type': answer.contentType ?? 'application/json; charset=utf-8',
      'content-length': Buffer.byteLength(answer.text),
      'cache-control': 'no-store',
      ...headers,
    });
    ctx.response.end(answer.text);
    return true;
  }

  /** The JSON body (handle() refused any other content type before routing). */
  private body(ctx: RequestContext): Promise<unknown> {
    return readJsonBody(ctx.request, this.maxBodyBytes);
  }

  private sendError(
    request: IncomingMessage,
    response: ServerResponse,
    requestId: string,
    error: unknown,
    listener: Listener = Listener.Public,
  ): ReturnType<typeof errorAnswer> {
    const answer = errorAnswer(error, requestId);
    // An answer before the body was read: drop the rest so the client can read this.
    discardBody(request);
    if (listener === Listener.Kube) {
      // Kubernetes clients read a Status; no Bearer challenge on this door.
      const { 'www-authenticate': _challenge, ...headers } = answer.headers;
      sendJson(response, answer.status, kubeStatusBody(answer.status, answer.body.error), headers);
      return answer;
    }
    sendJson(response, answer.status, answer.body, answer.headers);
    return answer;
  }
}

/**
 * Why the peer listener refuses a request before anything reads it, or undefined. Only a
 * control-plane replica's certificate is accepted (its own role: a state-plane role such
 * as the writer is not enough) (the handshake already refused one without a
 * certificate from the Polychrome CA); a bearer token never travels on a hop, so one that
 * arrives means a misrouted client; only the forwarded routes are served.
 */
function peerRefusal(
  request: IncomingMessage,
  match: ReturnType<typeof matchRoute>,
): ApiError | undefined {
  const socket = request.socket as TLSSocket;
  const identity = socket.authorized
    ? certificateIdentityOf(socket.getPeerCertificate())
    : undefined;
  if (!isControlPlaneReplica(identity)) {
    return new ApiError(
      'permission_denied',
      `the peer port takes requests only from control-plane replicas (a certificate with O or ` +
        `OU ${CertificateRole.ControlPlaneReplica}), and this one is ` +
        (identity === undefined
          ? 'not authorized'
          : `"${describeCertificateIdentity(identity)}", holding ${describeRoles(identity.roles)}`) +
        '; clients use the public API',
    );
  }
  if (request.headers.authorization !== undefined) {
    return new ApiError(
      'invalid_argument',
      'a forwarded request never carries an Authorization header; send the caller in the body',
      { details: { field: 'Authorization' } },
    );
  }
  if (headerOf(request, FORWARDED_HEADER) === undefined) {
    return new ApiError(
      'invalid_argument',
      `a forwarded request names the forwarding replica's request id in ${FORWARDED_HEADER}`,
      { details: { field: FORWARDED_HEADER } },
    );
  }
  if (match.kind !== 'matched' || !PEER_OPERATIONS.has(match.route.operation)) {
    return new ApiError(
      'not_found',
      'the peer port serves only forwarded messages, approval answers and question answers; ' +
        'use the public API for anything else',
    );
  }
  return undefined;
}

/** A request matched on the Kubernetes door, as the route table's terms. */
type AnyRouteMatch =
  | ReturnType<typeof matchRoute>
  | {
      readonly kind: 'discovery';
      readonly route: { readonly template: string };
      readonly body: object;
    }
  | {
      readonly kind: 'sessions';
      readonly route: { readonly template: string };
      readonly action: SessionsAction;
    }
  | {
      readonly kind: 'ui';
      readonly route: { readonly template: string };
      readonly namespace: string;
      readonly file: string;
    };

/** The Kubernetes door's paths as routes: a subresource runs its public API operation. */
function kubeRouteMatch(method: string, path: string): AnyRouteMatch {
  const match = matchKubeRoute(method, path);
  switch (match.kind) {
    case 'discovery':
      return { kind: 'discovery', route: { template: path }, body: match.body };
    case 'method_not_allowed':
      return { kind: 'method_not_allowed', template: path, allow: [...match.allow] };
    case 'not_found':
      return match;
    case 'sessions':
      return {
        kind: 'sessions',
        route: { template: kubeSessionsTemplate(match.action) },
        action: match.action,
      };
    case 'ui':
      return { ...match, route: { template: kubeUiTemplate() } };
    case 'subresource':
      return {
        kind: 'matched',
        route: {
          method: match.subresource.method,
          template: kubeSubresourceTemplate(
            match.subresource.name,
            match.subresource.perRequest === true,
          ),
          operation: match.subresource.operation,
          authenticated: true,
        },
        params: {
          namespace: match.namespace,
          name: match.name,
          subresource: match.subresource.name,
          ...(match.requestId === undefined ? {} : { requestId: match.requestId }),
        },
      };
  }
}

/**
 * A Kubernetes door request's route template for its span name: the subresource's
 * template or the discovery path, never a path holding a namespace or a name.
 */
function kubeRouteTemplate(method: string, path: string): string | undefined {
  const match = kubeRouteMatch(method, path);
  return match.kind === 'matched' || match.kind === 'discovery' ? match.route.template : undefined;
}

/** The namespace, name and subresource a Kubernetes door request names. */
function kubeTarget(
  ctx: RequestContext,
): { namespace: string; name: string; subresource: KubeSubresource } | undefined {
  const { namespace, name, subresource } = ctx.params;
  const sub = KUBE_SUBRESOURCES.find(
    (s) => s.name === subresource && s.method === ctx.route.method,
  );
  if (namespace === undefined || name === undefined || sub === undefined) return undefined;
  return { namespace, name, subresource: sub };
}

/** The door's verdict, which a Kubernetes door handler always has. */
function admitted(ctx: RequestContext): KubeAdmission {
  if (ctx.kube === undefined) throw new Error('a Kubernetes door request was not admitted');
  return ctx.kube;
}

/** Listens on `port` at `host` (default every address). */
async function listen(server: Server, port: number, host = '0.0.0.0'): Promise<void> {
  server.keepAliveTimeout = KEEP_ALIVE_TIMEOUT_MS;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
}

function boundAddress(server: Server | undefined, what: string): { host: string; port: number } {
  const address: string | AddressInfo | null | undefined = server?.address();
  if (address === null || address === undefined || typeof address === 'string') {
    throw new Error(`${what}: not listening`);
  }
  return { host: address.address, port: address.port };
}

function headerOf(request: IncomingMessage, name: string): string | undefined {
  const value = request.headers[name];
  return Array.isArray(value) ? value.join(', ') : value;
}

function sendJson(
  response: ServerResponse,
  status: number,
  body: unknown,
  headers: Readonly<Record<string, string>> = {},
): void {
  sendBody(response, status, JSON.stringify(body), headers);
}

function sendBody(
  response: ServerResponse,
  status: number,
  body: string,
  headers: Readonly<Record<string, string>>,
): void {
  response.writeHead(status, {
    'content-type': 'application/json; charset=utf-8',
    'content-length': Buffer.byteLength(body),
    'cache-control': 'no-store',
    ...headers,
  });
  response.end(body);
}
