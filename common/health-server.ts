import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Registry } from 'prom-client';

/**
 * The side port every process serves (docs/design.md, "Three planes"): `/healthz` answers 200
 * while the process runs, `/readyz` answers 200 only while the readiness callback says so
 * (Kubernetes stops routing to a process that is not ready), `/metrics` serves the
 * process's prom-client registry. Nothing else; no request body is read.
 */

/** The side port's default. */
export const DEFAULT_HEALTH_PORT = 9090;

/** Options of {@link HealthServer}. */
export interface HealthServerOptions {
  /** @default '0.0.0.0' */
  readonly host?: string;
  /** 0 lets the system pick (tests). @default 9090 */
  readonly port?: number;
  /** Asked on every `/readyz`; must be cheap and must not throw. */
  readonly isReady: () => boolean;
  /**
   * Why the process is not ready, asked when `isReady` is false; `/readyz` answers
   * `not ready: <reason>`. Must be cheap and must not throw. @default no reason given
   */
  readonly notReadyReason?: () => string | undefined;
  readonly registry: Registry;
}

/** The side-port HTTP server. */
export class HealthServer {
  private readonly options: HealthServerOptions;
  private server: Server | undefined;
  private closing: Promise<void> | undefined;

  constructor(options: HealthServerOptions) {
    this.options = options;
  }

  /**
   * Listens; resolves with the bound address.
   *
   * @throws Error from node:http when the port cannot be bound (in use, no permission), or
   *   when called twice.
   */
  async start(): Promise<{ host: string; port: number }> {
    if (this.server !== undefined) throw new Error('health server: start() called twice');
    const server = createServer((request, response) => {
      void this.handle(request, response);
    });
    this.server = server;
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(
        this.options.port ?? DEFAULT_HEALTH_PORT,
        this.options.host ?? '0.0.0.0',
        () => {
          server.off('error', reject);
          resolve();
        },
      );
    });
    return this.address();
  }

  /**
   * The bound address.
   *
   * @throws Error when the server is not listening.
   */
  address(): { host: string; port: number } {
    const address: string | AddressInfo | null | undefined = this.server?.address();
    if (address === null || address === undefined || typeof address === 'string') {
      throw new Error('health server: not listening');
    }
    return { host: address.address, port: address.port };
  }

  /** Stops listening and drops idle keep-alive connections. Idempotent. */
  close(): Promise<void> {
    const server = this.server;
    if (server === undefined) return Promise.resolve();
    this.closing ??= new Promise<void>((resolve) => {
      server.close(() => resolve());
      server.closeAllConnections();
    });
    return this.closing;
  }

  private async handle(request: IncomingMessage, response: ServerResponse): Promise<void> {
    const path = (request.url ?? '/').split('?')[0];
    if (request.method !== 'GET' && request.method !== 'HEAD') {
      send(response, 405, 'method not allowed\n');
      return;
    }
    switch (path) {
      case '/healthz':
        send(response, 200, 'ok\n');
        return;
      case '/readyz': {
        if (this.options.isReady()) {
          send(response, 200, 'ready\n');
          return;
        }
        const reason = this.options.notReadyReason?.();
        send(response, 503, reason === undefined ? 'not ready\n' : `not ready: ${reason}\n`);
        return;
      }
      case '/metrics':
        try {
          const body = await this.options.registry.metrics();
          send(response, 200, body, this.options.registry.contentType);
        } catch {
          // A collector failed; the scrape shows as failed rather than half a page.
          send(response, 500, 'metrics collection failed\n');
        }
        return;
      default:
        send(response, 404, 'not found\n');
    }
  }
}

function send(
  response: ServerResponse,
  status: number,
  body: string,
  contentType = 'text/plain; charset=utf-8',
): void {
  response.writeHead(status, {
    'content-type': contentType,
    'content-length': Buffer.byteLength(body),
    'cache-control': 'no-store',
  });
  response.end(body);
}
