import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { createServer as createHttpsServer, type Server as HttpsServer } from 'node:https';
import type { Logger } from 'pino';
import type { Registry } from 'prom-client';
import { componentLogger, LogComponent } from '../../common/log';
import type { ConversationForensics } from '../forensics/conversation-forensics';
import type { PersonaPaymentPolicies } from '../turns/persona-payment-policy';
import type { TurnService } from '../turns/turn-service';
import { ApiMetrics } from './api-metrics';
import { AuthCache, DEFAULT_AUTH_CACHE_MS, type Authenticate } from './auth-cache';
import { CallerLimits, LimitName, type CallerLimitsOptions } from './caller-limits';
import type { ApiListenerContext } from './door';
import { EventStreams } from './event-streams';
import { HolderRouting } from './holder-routing';
import { boundAddress, closed, listen } from './http-io';
import type { FollowJournal, FollowRetryOptions } from './journal-feed';
import { DEFAULT_LINGER_MS, DEFAULT_RING_SIZE, JournalHub } from './journal-hub';
import { ApiOperations } from './operations';
import { PeerDoor } from './peer-door';
import { DEFAULT_PEER_PORT, type PeerDirectory } from './peer-endpoints';
import { PeerClient, type PeerTls } from './peer-hop';
import { PublicDoor } from './public-door';
import { DEFAULT_MAX_BODY_BYTES } from './request-body';
import { tracedRequest } from './request-span';
import { RequestPipeline, type Entrance } from './request-pipeline';

/** The public API's port (docs/design.md, "Three planes"). */
export const DEFAULT_PUBLIC_API_PORT = 8080;

/** The replica-to-replica side of the API (docs/api.md, "Between replicas"). */
export interface PeerOptions {
  /** @default '0.0.0.0' */
  readonly host?: string;
  /** 0 lets the system pick (tests). @default {@link DEFAULT_PEER_PORT} */
  readonly port?: number;
  /** The control plane's certificate: served to peers and presented to them. */
  readonly tls: PeerTls;
  /**
   * Registers a listener for a renewed certificate (operator/state-link-tls.ts): the
   * listener's next handshakes and the next hops take it; open connections keep theirs.
   */
  readonly onTlsChange?: (listener: (tls: PeerTls) => void) => void;
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
  readonly forensics?: Pick<ConversationForensics, 'export' | 'repair' | 'erase'>;
  /** Admins' persona payment policies (the records). None: those routes answer 503. */
  readonly personaPolicies?: PersonaPaymentPolicies;
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
   * The Kubernetes door (docs/kube-api.md, operator/kube-api/kube-listener.ts): an HTTPS
   * listener that serves api.polychrome.dev to kube-apiserver's front proxy, running this
   * API's operations. None: no such listener.
   */
  readonly kube?: ApiListener;
}

/**
 * A listener another part of the control plane provides that serves this API's
 * operations through a door of its own: the Kubernetes door (operator/kube-api).
 */
export interface ApiListener {
  /** Listens; `context.serve` runs a request through the API's pipeline. */
  start(context: ApiListenerContext): Promise<{ host: string; port: number }>;
  address(): { host: string; port: number };
  /** Stops taking connections; resolves once the listener closed. */
  stopListening(): Promise<void>;
  closeAllConnections(): void;
}

/**
 * The control plane's API (docs/api.md; the OpenAPI document is docs/api/openapi.json):
 * JSON over HTTP plus Server-Sent Events on port 8080, the peer listener that takes
 * requests other replicas forward, and the Kubernetes door's listener when given. This
 * class only composes and owns their lifetime; a request's way through is
 * request-pipeline.ts, who calls is each door's (public-door.ts, peer-door.ts,
 * operator/kube-api/kube-listener.ts), what is asked is operations.ts, and where a write
 * runs is holder-routing.ts (docs/design.md, "The API layer").
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
  private readonly limits: CallerLimits;
  /** One journal follow per partition, shared by its streams. */
  private readonly hub: JournalHub;
  private readonly streams: EventStreams;
  private readonly pipeline: RequestPipeline;
  private readonly maxBodyBytes: number;
  /** The public door and its operations, whose writes may be forwarded to the holder. */
  private readonly public: Entrance;
  /** The peer door and its operations, which run here only: never forwarded twice. */
  private readonly peer: Entrance;
  private server: Server | undefined;
  private peerServer: HttpsServer | undefined;
  private closing: Promise<void> | undefined;

  constructor(options: PublicApiServerOptions) {
    this.options = options;
    this.log = componentLogger(options.logger, LogComponent.Api);
    this.limits =
      options.limits instanceof CallerLimits ? options.limits : new CallerLimits(options.limits);
    this.maxBodyBytes = options.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES;
    this.hub = new JournalHub({
      follow: options.follow,
      log: this.log,
      ...(options.followRetry === undefined ? {} : { retry: options.followRetry }),
      ringSize: options.journalRingSize ?? DEFAULT_RING_SIZE,
      lingerMs: options.journalLingerMs ?? DEFAULT_LINGER_MS,
    });
    this.streams = new EventStreams({
      hub: this.hub,
      limits: this.limits,
      service: options.service,
      log: this.log,
      ...(options.heartbeatMs === undefined ? {} : { heartbeatMs: options.heartbeatMs }),
      ...(options.streamCloseTimeoutMs === undefined
        ? {}
        : { closeTimeoutMs: options.streamCloseTimeoutMs }),
      ...(options.now === undefined ? {} : { now: options.now }),
    });
    const metrics = new ApiMetrics(
      options.registry,
      () => this.streams.size,
      () => this.hub.follows,
      Object.values(LimitName),
    );
    this.pipeline = new RequestPipeline({ log: this.log, metrics });
    const peers = options.peers;
    const peerClient = peers === undefined ? undefined : peerClientOf(peers);
    peers?.onTlsChange?.((tls) => {
      peerClient?.useTls(tls);
      this.peerServer?.setSecureContext(peerServerTls(tls));
    });
    this.public = {
      door: new PublicDoor({
        auth: authCacheOf(options),
        limits: this.limits,
        service: options.service,
        maxBodyBytes: this.maxBodyBytes,
      }),
      operations: this.operations(
        peers === undefined || peerClient === undefined
          ? undefined
          : { client: peerClient, directory: peers.directory },
      ),
    };
    this.peer = { door: new PeerDoor(this.maxBodyBytes), operations: this.operations(undefined) };
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
    const server = createServer((request, response) => this.serve(this.public, request, response));
    this.server = server;
    await listen(server, this.options.port ?? DEFAULT_PUBLIC_API_PORT, this.options.host);
    const peers = this.options.peers;
    if (peers !== undefined) {
      // Deny by default: the handshake refuses a client without a certificate from the
      // Polychrome CA; the peer door then checks that the certificate is a replica's.
      const peerServer = createHttpsServer(
        {
          ...peerServerTls(peers.tls),
          requestCert: true,
          rejectUnauthorized: true,
          minVersion: 'TLSv1.3',
        },
        (request, response) => this.serve(this.peer, request, response),
      );
      this.peerServer = peerServer;
      await listen(peerServer, peers.port ?? DEFAULT_PEER_PORT, peers.host);
      this.log.info(this.peerAddress(), 'peer listener listening');
    }
    const kube = this.options.kube;
    if (kube !== undefined) {
      // The Kubernetes door's writes are forwarded like the public door's.
      const operations = this.public.operations;
      await kube.start({
        serve: (door, request, response) =>
          this.pipeline.serve({ door, operations }, request, response),
        limits: this.limits,
        maxBodyBytes: this.maxBodyBytes,
      });
      this.log.info(kube.address(), 'Kubernetes door listening');
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
    const kube = this.options.kube;
    if (kube === undefined) throw new Error('the Kubernetes door: not listening');
    return kube.address();
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
      const kube = this.options.kube;
      const stopped = Promise.all([
        closed(server),
        closed(this.peerServer),
        kube === undefined ? Promise.resolve() : kube.stopListening(),
      ]);
      const streams = this.streams.shutdown();
      this.pipeline.abortAll('the public API is shutting down');
      const count = await streams;
      await this.hub.close();
      await this.pipeline.settled();
      server.closeAllConnections();
      this.peerServer?.closeAllConnections();
      kube?.closeAllConnections();
      await stopped;
      this.log.info({ streams: count }, 'public API closed');
    })();
    return this.closing;
  }

  private serve(entrance: Entrance, request: IncomingMessage, response: ServerResponse): void {
    void tracedRequest(request, response, () => this.pipeline.serve(entrance, request, response));
  }

  /** The operations of a door, whose writes go to the holder through `peers` when given. */
  private operations(
    peers: ConstructorParameters<typeof HolderRouting>[0]['peers'],
  ): ApiOperations {
    const { service, forensics, personaPolicies } = this.options;
    return new ApiOperations({
      service,
      where: new HolderRouting({
        service,
        log: this.log,
        ...(forensics === undefined ? {} : { forensics }),
        ...(peers === undefined ? {} : { peers }),
      }),
      streams: this.streams,
      limits: this.limits,
      log: this.log,
      ...(forensics === undefined ? {} : { forensics }),
      ...(personaPolicies === undefined ? {} : { personaPolicies }),
      ...(this.options.newIdempotencyKey === undefined
        ? {}
        : { newIdempotencyKey: this.options.newIdempotencyKey }),
    });
  }
}

function authCacheOf(options: PublicApiServerOptions): AuthCache {
  return new AuthCache({
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
}

function peerClientOf(peers: PeerOptions): PeerClient {
  return new PeerClient({
    tls: peers.tls,
    ...(peers.connectTimeoutMs === undefined ? {} : { connectTimeoutMs: peers.connectTimeoutMs }),
  });
}

/** The peer listener's certificate, key and the CA its clients' certificates must chain to. */
function peerServerTls(tls: PeerTls): { ca: Buffer; cert: Buffer; key: Buffer } {
  return { ca: tls.ca, cert: tls.cert, key: tls.key };
}
