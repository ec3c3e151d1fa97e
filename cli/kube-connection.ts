import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import type { Socket } from 'node:net';
import { homedir } from 'node:os';
import { delimiter, join } from 'node:path';
import { Readable } from 'node:stream';

import type { KubeConfig } from '@kubernetes/client-node';

import type { ClientNode } from './kube-client-node';

/*
 * One connection to a Kubernetes API server as kubectl would make it from a kubeconfig:
 * the file (or list of files), the context, the namespace, and a `fetch` that carries the
 * context's credentials (client certificate, bearer token, exec or auth-provider plugin,
 * basic auth) and trusts the cluster's CA. `kubectl polychrome` and its dashboard reach the
 * Kubernetes door through it (docs/kubectl.md).
 *
 * `@kubernetes/client-node`'s KubeConfig parses the files and runs the plugins; the request
 * itself goes over node:https (the global fetch cannot present a client certificate without
 * an undici dispatcher), and its answer is a WHATWG Response whose body streams, so
 * server-sent events work through it.
 */

/** How to find the kubeconfig, the context and the namespace (kubectl's flags). */
export interface KubeConnectionOptions {
  /** --kubeconfig, else KUBECONFIG (a list, as kubectl), else ~/.kube/config. */
  readonly kubeconfig?: string;
  /** --context, else the kubeconfig's current-context. */
  readonly context?: string;
  /** -n/--namespace, else the context's namespace, else "default". */
  readonly namespace?: string;
  /** @default process.env */
  readonly env?: Readonly<Record<string, string | undefined>>;
}

/** A resolved context: where the API server is, and a fetch with the context's credentials. */
export interface KubeConnection {
  /** The cluster's server URL, no trailing slash. */
  readonly server: string;
  readonly namespace: string;
  readonly contextName: string;
  /**
   * fetch with the kubeconfig's credentials applied (client certificate, bearer token,
   * exec/auth plugins, the cluster CA, tls-server-name, insecure-skip-tls-verify); never
   * logs or returns a credential. Streams (SSE) work through it.
   */
  fetch(url: string, init?: RequestInit): Promise<Response>;
}

/** A kubeconfig that cannot be used; the message names what to set. */
export class KubeConfigError extends Error {
  override readonly name = 'KubeConfigError';
}

/** The kubeconfig files to read, in kubectl's order of precedence, and where they came from. */
export function kubeconfigPaths(options: KubeConnectionOptions): {
  readonly paths: readonly string[];
  readonly source: string;
} {
  const env = options.env ?? process.env;
  if (options.kubeconfig !== undefined && options.kubeconfig !== '') {
    return { paths: [options.kubeconfig], source: '--kubeconfig' };
  }
  const list = (env.KUBECONFIG ?? '').split(delimiter).filter((p) => p !== '');
  if (list.length > 0) {
    return { paths: list, source: 'KUBECONFIG' };
  }
  const home = env.HOME ?? homedir();
  return { paths: [join(home, '.kube', 'config')], source: 'the default ~/.kube/config' };
}

let clientNode: Promise<ClientNode> | undefined;

/**
 * `@kubernetes/client-node`, loaded on first use: it is most of the modules the plugin
 * would load (its kubeconfig code imports the whole generated API), and `help`, usage
 * errors and verb completion need none of it (bench/cli-start.bench.ts).
 */
function loadClientNode(): Promise<ClientNode> {
  return (clientNode ??= import('./kube-client-node.ts').then((m) => m.clientNode));
}

function readOne(lib: ClientNode, path: string): KubeConfig {
  const kc = new lib.KubeConfig();
  try {
    kc.loadFromFile(path);
  } catch (error) {
    const reason = error instanceof Error ? error.message : String(error);
    throw new KubeConfigError(`cannot read kubeconfig ${path}: ${reason}`, { cause: error });
  }
  return kc;
}

/**
 * Reads and merges the kubeconfig files as kubectl does: files that do not exist are
 * skipped (an explicit --kubeconfig must exist), the first file to name a cluster, user or
 * context wins, and so does the first current-context.
 */
function loadKubeConfig(lib: ClientNode, options: KubeConnectionOptions): KubeConfig {
  const { paths, source } = kubeconfigPaths(options);
  const present = paths.filter((p) => existsSync(p));
  if (present.length === 0 || (source === '--kubeconfig' && present.length !== paths.length)) {
    throw new KubeConfigError(
      `no kubeconfig: ${paths.join(', ')} (from ${source}) does not exist; ` +
        'pass --kubeconfig FILE, set KUBECONFIG, or create ~/.kube/config',
    );
  }
  const merged = new lib.KubeConfig();
  merged.currentContext = '';
  for (const kc of present.map((path) => readOne(lib, path))) {
    const has = <T extends { name: string }>(list: readonly T[], name: string): boolean =>
      list.some((e) => e.name === name);
    kc.clusters.filter((c) => !has(merged.clusters, c.name)).forEach((c) => merged.addCluster(c));
    kc.users.filter((u) => !has(merged.users, u.name)).forEach((u) => merged.addUser(u));
    kc.contexts.filter((c) => !has(merged.contexts, c.name)).forEach((c) => merged.addContext(c));
    if (merged.currentContext === '' && kc.currentContext) {
      merged.currentContext = kc.currentContext;
    }
  }
  return merged;
}

/** Picks the context, its cluster and namespace; a clear error when one is missing. */
function selectContext(kc: KubeConfig, options: KubeConnectionOptions) {
  const files = kubeconfigPaths(options).paths.join(', ');
  const name = options.context ?? kc.getCurrentContext();
  if (!name) {
    throw new KubeConfigError(
      `kubeconfig ${files} has no current-context; pass --context NAME ` +
        '(or run kubectl config use-context NAME)',
    );
  }
  const context = kc.getContextObject(name);
  if (context === null) {
    const known = kc.contexts.map((c) => c.name).join(', ') || 'none';
    throw new KubeConfigError(
      `context "${name}" is not in kubeconfig ${files} (contexts: ${known}); ` +
        'pass --context with one of them',
    );
  }
  kc.setCurrentContext(name);
  const cluster = kc.getCurrentCluster();
  if (cluster === null) {
    throw new KubeConfigError(
      `context "${name}" names cluster "${context.cluster}", which is not in kubeconfig ` +
        `${files}; add the cluster (kubectl config set-cluster) or pick another --context`,
    );
  }
  if (context.user && kc.getCurrentUser() === null) {
    throw new KubeConfigError(
      `context "${name}" names user "${context.user}", which is not in kubeconfig ${files}; ` +
        'add the user (kubectl config set-credentials) or pick another --context',
    );
  }
  const namespace = options.namespace || context.namespace || 'default';
  return { name, cluster, namespace };
}

/** The TLS and header options of one request, as KubeConfig applies them (plugins included). */
async function requestOptions(lib: ClientNode, kc: KubeConfig): Promise<https.RequestOptions> {
  const opts: https.RequestOptions = { headers: {} };
  await kc.applyToHTTPSOptions(opts);
  // A context without a user gets no TLS options from KubeConfig: apply the cluster's.
  const cluster = kc.getCurrentCluster();
  if (cluster !== null) {
    opts.ca ??= lib.bufferFromFileOrString(cluster.caFile, cluster.caData) ?? undefined;
    if (cluster.tlsServerName) opts.servername = cluster.tlsServerName;
    if (cluster.skipTLSVerify) opts.rejectUnauthorized = false;
  }
  return opts;
}

function requestHeaders(init: RequestInit, opts: https.RequestOptions): Record<string, string> {
  const headers: Record<string, string> = {};
  new Headers(init.headers).forEach((value, key) => {
    headers[key] = value;
  });
  for (const [key, value] of Object.entries(opts.headers ?? {})) {
    if (typeof value === 'string' || typeof value === 'number') {
      headers[key.toLowerCase()] = String(value);
    }
  }
  if (typeof opts.auth === 'string' && opts.auth !== '') {
    headers.authorization = `Basic ${Buffer.from(opts.auth).toString('base64')}`;
  }
  return headers;
}

function requestBody(body: RequestInit['body']): Buffer | undefined {
  if (body === undefined || body === null) return undefined;
  if (typeof body === 'string') return Buffer.from(body);
  if (body instanceof Uint8Array) return Buffer.from(body);
  if (body instanceof ArrayBuffer) return Buffer.from(body);
  throw new TypeError('kube-connection fetch: the body must be a string or bytes');
}

function toResponse(res: http.IncomingMessage): Response {
  const headers = new Headers();
  for (const [key, value] of Object.entries(res.headers)) {
    if (Array.isArray(value)) value.forEach((v) => headers.append(key, v));
    else if (value !== undefined) headers.set(key, value);
  }
  const status = res.statusCode ?? 500;
  const empty = status === 204 || status === 205 || status === 304;
  if (empty) res.resume();
  const body = empty ? null : (Readable.toWeb(res) as ReadableStream<Uint8Array>);
  return new Response(body, { status, statusText: res.statusMessage ?? '', headers });
}

/** Agents by TLS identity, so requests reuse connections and a rotated exec cert gets a new one. */
function agentCache(secure: boolean): (opts: https.RequestOptions) => http.Agent {
  let last: { key: string; agent: http.Agent } | undefined;
  return (opts) => {
    const hash = createHash('sha256');
    for (const part of [opts.ca, opts.cert, opts.key, opts.servername, opts.rejectUnauthorized]) {
      hash.update(Buffer.isBuffer(part) ? part : String(JSON.stringify(part ?? null)));
      hash.update('\0');
    }
    const key = hash.digest('hex');
    if (last?.key !== key) {
      last?.agent.destroy();
      const agent = secure
        ? new https.Agent({
            keepAlive: true,
            ca: opts.ca,
            cert: opts.cert,
            key: opts.key,
            servername: opts.servername,
            rejectUnauthorized: opts.rejectUnauthorized ?? true,
          })
        : new http.Agent({ keepAlive: true });
      // Idle keep-alive sockets must not hold a short-lived CLI open.
      agent.on('free', (socket: Socket) => socket.unref());
      last = { key, agent };
    }
    return last.agent;
  };
}

function makeFetch(lib: ClientNode, kc: KubeConfig, server: string): KubeConnection['fetch'] {
  const secure = server.startsWith('https:');
  const agentFor = agentCache(secure);
  return async (url, init = {}) => {
    const target = new URL(url);
    if (target.protocol !== (secure ? 'https:' : 'http:')) {
      throw new TypeError(`kube-connection fetch: ${target.protocol} URL for a ${server} cluster`);
    }
    const opts = await requestOptions(lib, kc);
    const headers = requestHeaders(init, opts);
    const body = requestBody(init.body);
    if (body !== undefined) headers['content-length'] = String(body.length);
    const signal = init.signal ?? undefined;
    signal?.throwIfAborted();
    return new Promise<Response>((resolve, reject) => {
      const req = (secure ? https : http).request(target, {
        method: init.method ?? 'GET',
        headers,
        agent: agentFor(opts),
        ...(signal ? { signal } : {}),
      });
      req.once('response', (res) => resolve(toResponse(res)));
      req.once('error', (error) => {
        const reason: unknown = signal?.aborted ? signal.reason : undefined;
        reject(reason instanceof Error ? reason : error);
      });
      req.end(body);
    });
  };
}

/**
 * Resolves the kubeconfig, the context and the namespace as kubectl does. A missing
 * kubeconfig, an unknown context, or a context whose cluster (or user) is missing is a
 * {@link KubeConfigError} naming what to set.
 */
export async function loadKubeConnection(options: KubeConnectionOptions): Promise<KubeConnection> {
  const lib = await loadClientNode();
  const kc = loadKubeConfig(lib, options);
  const { name, cluster, namespace } = selectContext(kc, options);
  const server = cluster.server.replace(/\/+$/u, '');
  if (!/^https?:\/\//u.test(server)) {
    throw new KubeConfigError(
      `cluster "${cluster.name}" has server "${server}", not an http(s) URL; fix the kubeconfig`,
    );
  }
  if (server.startsWith('http:') && !cluster.skipTLSVerify) {
    throw new KubeConfigError(
      `cluster "${cluster.name}" is plain http (${server}); credentials are not sent in the ` +
        'clear: use https, or set insecure-skip-tls-verify on the cluster to allow it',
    );
  }
  return { server, namespace, contextName: name, fetch: makeFetch(lib, kc, server) };
}
