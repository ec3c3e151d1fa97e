/**
 * `kubectl polychrome dashboard`: a local proxy on 127.0.0.1, as `kubectl proxy` runs one,
 * to the forensics UI the control plane serves on the Kubernetes door (docs/ui.md). The
 * browser talks to the proxy only; the proxy forwards what cli/dashboard-policy.ts allows
 * to the cluster with the kubeconfig's credentials (cli/kube-connection.ts), so the user's
 * RBAC applies and no credential reaches the browser.
 */
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Readable } from 'node:stream';

import { kubernetesIdentityOf } from '../common/identity';
import {
  decide,
  FORWARDED_REQUEST_HEADERS,
  FORWARDED_RESPONSE_HEADERS,
  type DashboardPolicy,
} from './dashboard-policy';
import { ExitCode, parse, stringValue, UsageError, write, type CliIo } from './cli-support';
import { loadKubeConnection, type KubeConnection } from './kube-connection';

/** Headers on every answer the proxy itself writes. */
const OWN_HEADERS = {
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  'cache-control': 'no-store',
} as const;

export interface DashboardOptions {
  readonly connection: KubeConnection;
  /** @default 127.0.0.1 */
  readonly address?: string;
  /** 0 picks a free port. @default 0 */
  readonly port?: number;
  /** The session secret; random by default (tests pass none). */
  readonly secret?: string;
}

export interface Dashboard {
  /** The URL to open: it holds the secret, once. */
  readonly url: string;
  readonly policy: DashboardPolicy;
  close(): Promise<void>;
}

/** The user's identity as the door names it, from a SelfSubjectReview (made by the proxy). */
async function whoAmI(connection: KubeConnection): Promise<string | undefined> {
  const response = await connection.fetch(
    `${connection.server}/apis/authentication.k8s.io/v1/selfsubjectreviews`,
    {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json' },
      body: JSON.stringify({ apiVersion: 'authentication.k8s.io/v1', kind: 'SelfSubjectReview' }),
    },
  );
  if (!response.ok) return undefined;
  const review = (await response.json()) as { status?: { userInfo?: { username?: string } } };
  const username = review.status?.userInfo?.username;
  return username === undefined || username === '' ? undefined : kubernetesIdentityOf(username);
}

function answer(response: ServerResponse, status: number, message: string, extra = {}): void {
  const body = `${message}\n`;
  response.writeHead(status, {
    ...OWN_HEADERS,
    'content-type': 'text/plain; charset=utf-8',
    'content-length': Buffer.byteLength(body),
    ...extra,
  });
  response.end(body);
}

/** Starts the proxy; `close()` stops it and ends every open stream. */
export async function startDashboard(options: DashboardOptions): Promise<Dashboard> {
  const { connection } = options;
  const secret = options.secret ?? randomBytes(32).toString('base64url');
  let actor: Promise<string | undefined> | undefined;
  const aborters = new Set<AbortController>();
  // Known once the server listens (the Host names its port).
  const state: { policy?: DashboardPolicy } = {};

  const forward = async (
    request: IncomingMessage,
    response: ServerResponse,
    path: string,
    needsActor: boolean,
  ): Promise<void> => {
    let target = path;
    if (needsActor) {
      actor ??= whoAmI(connection).catch(() => undefined);
      const identity = await actor;
      if (identity !== undefined) {
        target += `${target.includes('?') ? '&' : '?'}actor=${encodeURIComponent(identity)}`;
      }
    }
    const headers: Record<string, string> = {};
    for (const name of FORWARDED_REQUEST_HEADERS) {
      const value = request.headers[name];
      if (typeof value === 'string') headers[name] = value;
    }
    const aborter = new AbortController();
    aborters.add(aborter);
    response.once('close', () => {
      aborter.abort();
      aborters.delete(aborter);
    });
    let upstream: Response;
    try {
      upstream = await connection.fetch(`${connection.server}${target}`, {
        headers,
        signal: aborter.signal,
      });
    } catch (error) {
      answer(
        response,
        502,
        `the cluster could not be reached (${connection.server}): ${error instanceof Error ? error.message : String(error)}`,
      );
      return;
    }
    const out: Record<string, string> = {
      'x-content-type-options': 'nosniff',
      'referrer-policy': 'no-referrer',
    };
    for (const name of FORWARDED_RESPONSE_HEADERS) {
      const value = upstream.headers.get(name);
      if (value !== null) out[name] = value;
    }
    response.writeHead(upstream.status, out);
    if (upstream.body === null) {
      response.end();
      return;
    }
    const body = Readable.fromWeb(upstream.body);
    body.on('error', () => response.destroy());
    body.pipe(response);
  };

  const server: Server = createServer((request, response) => {
    const { policy } = state;
    if (policy === undefined) return answer(response, 503, 'starting');
    const decision = decide(
      { method: request.method ?? 'GET', url: request.url ?? '/', headers: request.headers },
      policy,
    );
    switch (decision.kind) {
      case 'refuse':
        return answer(response, decision.status, decision.message);
      case 'login':
        return answer(response, 303, 'signed in; continue to the UI', {
          location: decision.location,
          'set-cookie': decision.cookie,
        });
      case 'redirect':
        return answer(response, 302, 'to the UI', { location: decision.location });
      case 'forward':
        forward(request, response, decision.path, decision.needsActor).catch(() =>
          response.destroy(),
        );
        return;
    }
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 0, options.address ?? '127.0.0.1', () => resolve());
  });
  const { address, port } = server.address() as AddressInfo;
  const host = `${address}:${String(port)}`;
  const policy: DashboardPolicy = { host, namespace: connection.namespace, secret };
  state.policy = policy;
  return {
    url: `http://${host}/?token=${secret}`,
    policy,
    async close() {
      for (const aborter of aborters) aborter.abort();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/**
 * Opens `url` in the user's browser when there is a display (xdg-open on Linux, open on
 * macOS); returns false when it did not try.
 */
export function openBrowser(
  url: string,
  env: Readonly<Record<string, string | undefined>> = process.env,
  platform: NodeJS.Platform = process.platform,
): boolean {
  const command =
    platform === 'darwin'
      ? 'open'
      : platform === 'linux' && (env.DISPLAY !== undefined || env.WAYLAND_DISPLAY !== undefined)
        ? 'xdg-open'
        : undefined;
  if (command === undefined) return false;
  const child = spawn(command, [url], { detached: true, stdio: 'ignore' });
  child.on('error', () => undefined);
  child.unref();
  return true;
}

/**
 * `kubectl polychrome dashboard [--kubeconfig F] [--context C] [-n NS] [--port P] [--no-open]`:
 * starts the proxy, prints the URL (and opens it when there is a display), and serves until
 * interrupted.
 */
export async function dashboardCommand(
  args: readonly string[],
  io: CliIo,
  env: Readonly<Record<string, string | undefined>> = process.env,
): Promise<ExitCode> {
  const { values, positionals } = parse(args, {
    kubeconfig: { type: 'string' },
    context: { type: 'string' },
    namespace: { type: 'string', short: 'n' },
    port: { type: 'string' },
    'no-open': { type: 'boolean' },
  });
  if (positionals.length > 0) {
    throw new UsageError(
      `dashboard takes no arguments, got ${JSON.stringify(positionals.join(' '))}`,
    );
  }
  const portText = stringValue(values.port) ?? '0';
  const port = Number(portText);
  if (!/^[0-9]{1,5}$/u.test(portText) || port > 65_535) {
    throw new UsageError(
      `--port must be a port number (0 picks a free one), got ${JSON.stringify(portText)}`,
    );
  }
  const kubeconfig = stringValue(values.kubeconfig);
  const context = stringValue(values.context);
  const namespace = stringValue(values.namespace);
  const connection = await loadKubeConnection({
    env,
    ...(kubeconfig === undefined ? {} : { kubeconfig }),
    ...(context === undefined ? {} : { context }),
    ...(namespace === undefined ? {} : { namespace }),
  });
  const dashboard = await startDashboard({ connection, port });
  const opened = values['no-open'] !== true && openBrowser(dashboard.url, env);
  await write(
    io.stdout,
    `Polychrome forensics UI for namespace ${connection.namespace} (context ${connection.contextName}):\n` +
      `  ${dashboard.url}\n` +
      `${opened ? 'Opened in your browser. ' : ''}The URL holds this session's secret: do not share it. Ctrl-C stops.\n`,
  );
  await new Promise<void>((resolve) => {
    if (io.signal === undefined) return;
    if (io.signal.aborted) resolve();
    else io.signal.addEventListener('abort', () => resolve(), { once: true });
  });
  await dashboard.close();
  return ExitCode.Ok;
}
