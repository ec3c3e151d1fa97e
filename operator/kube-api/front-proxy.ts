/**
 * Who a request on the Kubernetes door comes from. kube-apiserver authenticates the user
 * (whatever the kubeconfig uses), checks RBAC, then proxies the request to the control
 * plane with its front-proxy client certificate and the user in `X-Remote-*` headers
 * (docs/kube-api.md, "Who is calling"). The control plane believes those headers only on
 * a connection whose client certificate chains to the requestheader CA and whose common
 * name is one of the allowed names: the CA, the names and the header names are what
 * kube-apiserver publishes in `kube-system/extension-apiserver-authentication`.
 * Pure: the server hands in the ConfigMap's data, the TLS verdict and the headers.
 */
import { AppError } from '../../common/errors';
import { kubernetesIdentityOf } from '../../common/identity';

/** The ConfigMap kube-apiserver publishes its front-proxy settings in. */
export const AUTHENTICATION_CONFIG_MAP = {
  namespace: 'kube-system',
  name: 'extension-apiserver-authentication',
} as const;

/** What a front-proxied request is checked against. */
export interface RequestHeaderConfig {
  /** PEM of the CA the front-proxy client certificate must chain to. */
  readonly clientCa: string;
  /** Common names a front-proxy certificate may have; empty: any name from that CA. */
  readonly allowedNames: readonly string[];
  readonly usernameHeaders: readonly string[];
  readonly groupHeaders: readonly string[];
  readonly extraHeaderPrefixes: readonly string[];
}

/** A Kubernetes user, as kube-apiserver authenticated them. */
export interface KubeUser {
  readonly username: string;
  readonly groups: readonly string[];
  /** `X-Remote-Extra-<key>` values, keys lower-cased and unescaped. */
  readonly extra: Readonly<Record<string, readonly string[]>>;
}

/** The TLS facts of one connection, as the server saw them. */
export interface PeerCertificate {
  /** The client certificate chains to the requestheader CA (Node's `socket.authorized`). */
  readonly authorized: boolean;
  /** The certificate's subject common name; undefined without a certificate. */
  readonly commonName: string | undefined;
}

/** Every value of each header, by lower-case name (Node's `req.headersDistinct`). */
export type DistinctHeaders = Readonly<Record<string, readonly string[] | undefined>>;

function listValue(data: Readonly<Record<string, string>>, key: string): readonly string[] {
  const raw = data[key];
  if (raw === undefined || raw.trim() === '') return [];
  let parsed: unknown;
  try {
    parsed = JSON.parse(raw);
  } catch (err: unknown) {
    throw new AppError(
      'failed_precondition',
      `${AUTHENTICATION_CONFIG_MAP.namespace}/${AUTHENTICATION_CONFIG_MAP.name}: ${key} is not a JSON list of strings (${raw.slice(0, 80)}); check kube-apiserver's --requestheader-* flags`,
      { cause: err },
    );
  }
  if (!Array.isArray(parsed) || !parsed.every((v) => typeof v === 'string')) {
    throw new AppError(
      'failed_precondition',
      `${AUTHENTICATION_CONFIG_MAP.namespace}/${AUTHENTICATION_CONFIG_MAP.name}: ${key} is not a JSON list of strings`,
    );
  }
  return parsed;
}

/**
 * The front-proxy settings from the ConfigMap's `data`.
 *
 * @throws AppError `failed_precondition` when kube-apiserver publishes no requestheader CA
 *   (it was started without `--requestheader-client-ca-file`: the aggregation layer is off)
 *   or no username header, or a list that is not JSON.
 */
export function parseRequestHeaderConfig(
  data: Readonly<Record<string, string>> | undefined,
): RequestHeaderConfig {
  const where = `${AUTHENTICATION_CONFIG_MAP.namespace}/${AUTHENTICATION_CONFIG_MAP.name}`;
  const clientCa = data?.['requestheader-client-ca-file'] ?? '';
  if (!clientCa.includes('BEGIN CERTIFICATE')) {
    throw new AppError(
      'failed_precondition',
      `${where} has no requestheader-client-ca-file: start kube-apiserver with --requestheader-client-ca-file and --proxy-client-cert-file (the aggregation layer), or leave the Kubernetes door out of the installation`,
    );
  }
  const values = data ?? {};
  const usernameHeaders = listValue(values, 'requestheader-username-headers');
  if (usernameHeaders.length === 0) {
    throw new AppError(
      'failed_precondition',
      `${where} names no requestheader-username-headers: start kube-apiserver with --requestheader-username-headers=X-Remote-User`,
    );
  }
  return {
    clientCa,
    allowedNames: listValue(values, 'requestheader-allowed-names'),
    usernameHeaders,
    groupHeaders: listValue(values, 'requestheader-group-headers'),
    extraHeaderPrefixes: listValue(values, 'requestheader-extra-headers-prefix'),
  };
}

const unauthenticated = (message: string): AppError => new AppError('unauthenticated', message);

/**
 * The user of a front-proxied request.
 *
 * @throws AppError `unauthenticated` when the connection has no client certificate from the
 *   requestheader CA, its common name is not allowed, or no username header is set. A
 *   request that reaches the control plane any other way than through kube-apiserver has
 *   no user: the headers of a client that speaks to the port directly are never read.
 */
export function authenticateFrontProxy(
  config: RequestHeaderConfig,
  peer: PeerCertificate,
  headers: DistinctHeaders,
): KubeUser {
  if (!peer.authorized || peer.commonName === undefined) {
    throw unauthenticated(
      'this port serves only requests that kube-apiserver proxies (a client certificate from its requestheader CA); use kubectl or the API server URL, not the control plane directly',
    );
  }
  if (config.allowedNames.length > 0 && !config.allowedNames.includes(peer.commonName)) {
    throw unauthenticated(
      `the front-proxy certificate's common name ${JSON.stringify(peer.commonName)} is not among the requestheader allowed names`,
    );
  }
  const first = (names: readonly string[]): string | undefined => {
    for (const name of names) {
      const value = headers[name.toLowerCase()]?.find((v) => v !== '');
      if (value !== undefined) return value;
    }
    return undefined;
  };
  const username = first(config.usernameHeaders);
  if (username === undefined) {
    throw unauthenticated('the proxied request names no user (X-Remote-User is empty)');
  }
  const groups = config.groupHeaders.flatMap((name) => headers[name.toLowerCase()] ?? []);
  const extra: Record<string, string[]> = {};
  for (const prefix of config.extraHeaderPrefixes.map((p) => p.toLowerCase())) {
    for (const [name, values] of Object.entries(headers)) {
      if (!name.startsWith(prefix) || values === undefined) continue;
      // Extra keys are percent-encoded in the header name (as kube-apiserver writes them).
      const key = decodeURIComponent(name.slice(prefix.length)).toLowerCase();
      extra[key] = [...(extra[key] ?? []), ...values];
    }
  }
  return { username, groups: [...new Set(groups)], extra };
}

/**
 * The Polychrome identity of a Kubernetes user: `kubernetes:<username>`, with `%`, `:` and
 * whitespace in the username percent-encoded as the identity rule asks (common/identity.ts),
 * so `system:serviceaccount:team:bot` is `kubernetes:system%3Aserviceaccount%3Ateam%3Abot`
 * and two usernames never share an identity (docs/kube-api.md, "Who is calling").
 */
export function kubernetesIdentity(user: KubeUser): string {
  return kubernetesIdentityOf(user.username);
}
