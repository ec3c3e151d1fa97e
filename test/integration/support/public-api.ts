import { pollUntil } from '../../../hack/lib/processes';

/** An answer of the control plane's public API, its JSON body parsed. */
export interface ApiAnswer {
  readonly status: number;
  readonly body: Record<string, unknown>;
  /** `X-Polychrome-Served-By`: set when another replica (the holder) answered. */
  readonly servedBy: string | null;
}

export interface ApiCallOptions {
  readonly token?: string;
  /** Sent as JSON. */
  readonly body?: unknown;
  /** Sent as is (malformed bodies). */
  readonly raw?: string;
  readonly headers?: Readonly<Record<string, string>>;
}

/** One request to the public API at `apiUrl` (e.g. `http://127.0.0.1:8080`). */
export async function apiCall(
  apiUrl: string,
  method: string,
  path: string,
  options: ApiCallOptions = {},
): Promise<ApiAnswer> {
  const headers: Record<string, string> = { ...options.headers };
  if (options.token !== undefined) headers.authorization = `Bearer ${options.token}`;
  let body: string | undefined;
  if (options.raw !== undefined || options.body !== undefined) {
    headers['content-type'] ??= 'application/json';
    body = options.raw ?? JSON.stringify(options.body);
  }
  const response = await fetch(`${apiUrl}${path}`, {
    method,
    headers,
    ...(body === undefined ? {} : { body }),
  });
  const text = await response.text();
  return {
    status: response.status,
    body: text === '' ? {} : (JSON.parse(text) as Record<string, unknown>),
    servedBy: response.headers.get('x-polychrome-served-by'),
  };
}

/**
 * An admin links wallet `wallet` to conversation `uid` with spend limits `limits`
 * (`PUT .../payment-policy`, docs/payments.md "Linking a wallet"), acting as `actor`.
 */
export function linkWallet(
  apiUrl: string,
  token: string,
  uid: string,
  link: { readonly actor: string; readonly wallet: string; readonly limits: unknown },
): Promise<ApiAnswer> {
  return apiCall(apiUrl, 'PUT', `/v1/conversations/${uid}/payment-policy`, {
    token,
    body: { ...link, reason: 'the report budget' },
  });
}

/** Posts a message to conversation `uid` with an idempotency key. */
export function postMessage(
  apiUrl: string,
  token: string,
  uid: string,
  text: string,
  key: string,
): Promise<ApiAnswer> {
  return apiCall(apiUrl, 'POST', `/v1/conversations/${uid}/messages`, {
    token,
    body: { text, idempotencyKey: key },
  });
}

/**
 * Posts the same message (same key) until the answer is not a 503 and the connection
 * held: after a crash the control plane may still be starting or recovering.
 */
export function postUntilSettled(
  apiUrl: string,
  token: string,
  uid: string,
  text: string,
  key: string,
  timeoutMs = 90_000,
): Promise<ApiAnswer> {
  return pollUntil(
    `a settled answer for ${key}`,
    async () => {
      const answer = await postMessage(apiUrl, token, uid, text, key).catch(() => undefined);
      return answer !== undefined && answer.status !== 503 ? answer : undefined;
    },
    { timeoutMs, intervalMs: 300 },
  );
}
