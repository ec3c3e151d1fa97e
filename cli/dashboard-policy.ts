/**
 * What `kubectl polychrome dashboard`'s local proxy lets through (docs/ui.md, "The proxy's
 * security model"). Deny by default: only GET, only on the proxy's own Host, only from its
 * own origin, only with the session secret (exchanged once for an HttpOnly SameSite=Strict
 * cookie), and only to an allow-list of read paths in the one namespace. Pure.
 */
import { timingSafeEqual } from 'node:crypto';

/** The UI, the door's reads and the Conversation CRD, as paths on the cluster. */
const DOOR = '/apis/api.polychrome.dev/v1alpha1';
const CRD = '/apis/polychrome.dev/v1alpha1';
/** A DNS-1123 name, as Kubernetes allows for namespaces and Conversation names. */
const NAME = '[a-z0-9](?:[-a-z0-9.]{0,251}[a-z0-9])?';
const UI_FILE = '[a-z0-9][a-z0-9.-]{0,63}';

/** The cookie that carries the session secret after the first visit. */
export const DASHBOARD_COOKIE = 'polychrome_dashboard';

/** The door's read subresources the UI uses, and the query parameters each may carry. */
const READS: Readonly<Record<string, readonly string[]>> = {
  transcript: [],
  memory: [],
  log: ['since', 'lastEventId'],
  export: ['actor'],
};

/** The request headers forwarded upstream; every other one (cookies, Authorization) is dropped. */
export const FORWARDED_REQUEST_HEADERS = ['accept', 'last-event-id', 'if-none-match'] as const;

/** The answer headers passed back to the browser; Set-Cookie and the like never are. */
export const FORWARDED_RESPONSE_HEADERS = [
  'content-type',
  'cache-control',
  'etag',
  'content-security-policy',
  'x-content-type-options',
  'x-polychrome-checkpoint',
] as const;

export interface DashboardPolicy {
  /** `127.0.0.1:PORT`: the only Host the proxy answers (DNS rebinding). */
  readonly host: string;
  readonly namespace: string;
  /** The session secret (base64url); the URL printed holds it once. */
  readonly secret: string;
}

/** What the proxy does with a request. */
export type DashboardDecision =
  | {
      readonly kind: 'forward';
      /** The path and query on the cluster. */
      readonly path: string;
      /** An export without `actor`: the proxy adds the user's own identity. */
      readonly needsActor: boolean;
    }
  /** The first visit: set the cookie and send the browser to the UI without the secret in the URL. */
  | { readonly kind: 'login'; readonly location: string; readonly cookie: string }
  | { readonly kind: 'redirect'; readonly location: string }
  | { readonly kind: 'refuse'; readonly status: number; readonly message: string };

export interface DashboardRequest {
  readonly method: string;
  readonly url: string;
  readonly headers: Readonly<Record<string, string | readonly string[] | undefined>>;
}

function header(request: DashboardRequest, name: string): string | undefined {
  const value = request.headers[name];
  return Array.isArray(value) ? value.join(', ') : (value as string | undefined);
}

function refuse(status: number, message: string): DashboardDecision {
  return { kind: 'refuse', status, message };
}

/** True when `given` is the secret, compared in constant time. */
export function isSecret(given: string | undefined, secret: string): boolean {
  if (given === undefined) return false;
  const a = Buffer.from(given);
  const b = Buffer.from(secret);
  return a.length === b.length && timingSafeEqual(a, b);
}

function cookieValue(request: DashboardRequest, name: string): string | undefined {
  for (const part of (header(request, 'cookie') ?? '').split(';')) {
    const at = part.indexOf('=');
    if (at > 0 && part.slice(0, at).trim() === name) return part.slice(at + 1).trim();
  }
  return undefined;
}

/** The UI's entry page for the namespace. */
export function uiIndexPath(namespace: string): string {
  return `${DOOR}/namespaces/${namespace}/ui/index.html`;
}

/** The path on the cluster a request may go to, or why not. */
function allowedPath(path: string, query: URLSearchParams, namespace: string): DashboardDecision {
  const ns = namespace.replace(/\./gu, '\\.');
  const patterns: readonly [RegExp, readonly string[]][] = [
    [new RegExp(`^${DOOR}/namespaces/${ns}/ui/${UI_FILE}$`, 'u'), []],
    [new RegExp(`^${CRD}/namespaces/${ns}/conversations(?:/${NAME})?$`, 'u'), []],
    ...Object.entries(READS).map(([sub, params]): [RegExp, readonly string[]] => [
      new RegExp(`^${DOOR}/namespaces/${ns}/conversations/${NAME}/${sub}$`, 'u'),
      params,
    ]),
  ];
  const match = patterns.find(([pattern]) => pattern.test(path));
  if (match === undefined) {
    return refuse(
      403,
      `the dashboard proxy does not forward ${path.slice(0, 200)}: it serves only the UI, the Conversations of namespace ${namespace} and their transcript, memory, log and export (docs/ui.md)`,
    );
  }
  const extra = [...query.keys()].find((key) => !match[1].includes(key));
  if (extra !== undefined) {
    return refuse(
      400,
      `the query parameter ${JSON.stringify(extra.slice(0, 40))} is not forwarded for ${path.slice(0, 200)}`,
    );
  }
  const search = query.toString();
  return {
    kind: 'forward',
    path: search === '' ? path : `${path}?${search}`,
    needsActor: path.endsWith('/export') && !query.has('actor'),
  };
}

/**
 * Decides what to do with a browser's request. In order: the Host, the method, the
 * Origin (and Sec-Fetch-Site), the secret (the `token` query of the first visit, then the
 * cookie), the path.
 */
export function decide(request: DashboardRequest, policy: DashboardPolicy): DashboardDecision {
  if (header(request, 'host') !== policy.host) {
    return refuse(
      421,
      `this proxy answers only the Host ${policy.host}; open the URL kubectl polychrome dashboard printed`,
    );
  }
  if (request.method !== 'GET') {
    return refuse(
      405,
      `the dashboard is read-only: ${request.method.slice(0, 20)} is not forwarded, only GET`,
    );
  }
  const origin = header(request, 'origin');
  if (origin !== undefined && origin !== `http://${policy.host}`) {
    return refuse(
      403,
      `requests from the origin ${JSON.stringify(origin.slice(0, 100))} are refused: only the dashboard's own pages may use it`,
    );
  }
  if (header(request, 'sec-fetch-site') === 'cross-site') {
    return refuse(
      403,
      "cross-site requests are refused: only the dashboard's own pages may use it",
    );
  }
  let url: URL;
  try {
    url = new URL(request.url, `http://${policy.host}`);
  } catch {
    return refuse(400, 'the request URL does not parse');
  }
  if (url.pathname === '/' && url.searchParams.has('token')) {
    if (!isSecret(url.searchParams.get('token') ?? undefined, policy.secret)) {
      return refuse(
        401,
        "that is not this dashboard's secret; open the URL kubectl polychrome dashboard printed",
      );
    }
    return {
      kind: 'login',
      location: uiIndexPath(policy.namespace),
      cookie: `${DASHBOARD_COOKIE}=${policy.secret}; HttpOnly; SameSite=Strict; Path=/`,
    };
  }
  if (!isSecret(cookieValue(request, DASHBOARD_COOKIE), policy.secret)) {
    return refuse(
      401,
      'no dashboard session: open the URL kubectl polychrome dashboard printed (it holds a one-time secret)',
    );
  }
  if (url.pathname === '/') return { kind: 'redirect', location: uiIndexPath(policy.namespace) };
  return allowedPath(url.pathname, url.searchParams, policy.namespace);
}
