/**
 * The HTTP plumbing every door of the API shares (the public listener, the peer listener,
 * and the Kubernetes door's listener in operator/kube-api): listening with the keep-alive
 * every listener needs, the bound address, a request's header, and JSON answers.
 */
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

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

/** Listens on `port` at `host` (default every address). */
export async function listen(server: Server, port: number, host = '0.0.0.0'): Promise<void> {
  server.keepAliveTimeout = KEEP_ALIVE_TIMEOUT_MS;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
}

/**
 * The address `server` is bound to.
 *
 * @throws Error naming `what` when it is not listening.
 */
export function boundAddress(
  server: Server | undefined,
  what: string,
): { host: string; port: number } {
  const address: string | AddressInfo | null | undefined = server?.address();
  if (address === null || address === undefined || typeof address === 'string') {
    throw new Error(`${what}: not listening`);
  }
  return { host: address.address, port: address.port };
}

/** Stops `server` listening; resolves when it has closed (after its connections). */
export function closed(server: Server | undefined): Promise<void> {
  return new Promise((resolve) =>
    server === undefined ? resolve() : server.close(() => resolve()),
  );
}

/** A request header as one string (repeated headers joined with `, `). */
export function headerOf(request: IncomingMessage, name: string): string | undefined {
  const value = request.headers[name];
  return Array.isArray(value) ? value.join(', ') : value;
}

/** Answers `body` as JSON, never cached. */
export function sendJson(
  response: ServerResponse,
  status: number,
  body: unknown,
  headers: Readonly<Record<string, string>> = {},
): void {
  sendBody(response, status, JSON.stringify(body), headers);
}

/** Answers a JSON text, never cached unless `headers` say otherwise. */
export function sendBody(
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
