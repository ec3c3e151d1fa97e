/*
 * The CLI's one transport seam: how a command reaches one conversation's operations (and
 * one persona's payment policy). The
 * commands and the API client speak of a conversation and an operation (`messages`,
 * `transcript`, `stream`, `approvals/REQ`, ...); a transport turns that into a URL and
 * applies the caller's credentials. Two doors serve the same operations (docs/kube-api.md):
 *
 * - the public API, `/v1/conversations/{id}/...`, with a bearer session token, for edges and
 *   scripts (`polychrome`);
 * - the Kubernetes API by Conversation name, under RBAC, through the kubeconfig
 *   (`kubectl polychrome`).
 */

/**
 * An operation on one conversation, by its public-API name. A transport maps the name onto
 * its own door (the Kubernetes door serves `stream` as `log`, the subresource name
 * kube-apiserver treats as long-running).
 */
export const ConversationOperation = {
  Messages: 'messages',
  Transcript: 'transcript',
  /** The agent's memory: GET reads it, DELETE clears it (all, or `rest` `[key]`). */
  Memory: 'memory',
  Stream: 'stream',
  Approvals: 'approvals',
  Questions: 'questions',
  /** The journal export (admins; docs/replay.md). */
  Export: 'export',
  /** Repair of unreadable journal entries (admins). */
  Repair: 'repair',
  /** Erasure of readable entries' content (admins; docs/state-plane.md, "Erasure"). */
  Erase: 'erase',
  /**
   * An admin settles a quarantined turn; `rest` is `[turnId]`. The public API names the
   * turn in the path (`turns/{turnId}/resolve`); the body names it too, so the Kubernetes
   * door's `resolve` subresource needs no path for it.
   */
  Resolve: 'resolve',
  /** An admin accepts a rolled-back journal (admins; docs/turns.md). */
  AcceptRollback: 'accept-rollback',
  /** The payment policy: GET reads it, PUT links or unlinks a wallet (admins; docs/payments.md). */
  PaymentPolicy: 'payment-policy',
} as const;
export type ConversationOperation =
  (typeof ConversationOperation)[keyof typeof ConversationOperation];

/** Where one request goes. */
export interface ConversationTarget {
  /** The conversation as the door names it: the uid on the public API, the name on the kube door. */
  readonly conversation: string;
  readonly operation: ConversationOperation;
  /** Path segments below the operation (e.g. a request id), encoded by the transport. */
  readonly rest?: readonly string[];
  readonly query?: Readonly<Record<string, string>>;
}

/** An operation on one persona, by its public-API name. */
export const PersonaOperation = {
  /** A persona's payment policy: GET reads it with its history, PUT sets it (admins). */
  PaymentPolicy: 'payment-policy',
} as const;
export type PersonaOperation = (typeof PersonaOperation)[keyof typeof PersonaOperation];

/**
 * Where one request on a persona goes: the public API's `/v1/personas/{id}/...`, the
 * Kubernetes door's cluster-scoped `personapaymentpolicies/{id}`.
 */
export interface PersonaTarget {
  /** The persona's id in the records. */
  readonly persona: string;
  readonly operation: PersonaOperation;
  readonly query?: Readonly<Record<string, string>>;
}

/** What a request names: one conversation's operation, or one persona's. */
export type ApiTarget = ConversationTarget | PersonaTarget;

/** How the CLI reaches the conversations of one door, as one caller. */
export interface Transport {
  /** The door, for messages: "the Polychrome API at URL". */
  readonly description: string;
  /** What to check when nothing answers (appended to "cannot reach ..."). */
  readonly unreachableHint: string;
  /** The URL of one operation on one conversation or one persona. */
  url(target: ApiTarget): string;
  /** `fetch` with the caller's credentials applied; the credentials never appear in a message. */
  fetch(url: string, init: RequestInit): Promise<Response>;
  /**
   * The door cancels an approval or question with `DELETE .../{requestId}` (the Kubernetes
   * door, where RBAC's `delete` verb is the admin's), not with a POST of the cancel.
   */
  readonly cancelsWithDelete?: boolean;
  /**
   * The door takes what the public API serves as a PUT as a POST (the Kubernetes door, where
   * a POST is RBAC's `create`).
   */
  readonly putsAsPost?: boolean;
}

/** Options of {@link publicApiTransport}. */
export interface PublicApiTransportOptions {
  /** Base URL, e.g. `http://127.0.0.1:8080` (a path prefix is kept). */
  readonly baseUrl: string;
  /** The bearer session token (`pcs_...`). */
  readonly token: string;
  /** @default globalThis.fetch */
  readonly fetch?: typeof fetch;
}

/** Appends encoded path segments and a query to `base`. */
export function joinUrl(
  base: string,
  segments: readonly string[],
  query: Readonly<Record<string, string>> = {},
): string {
  const path = segments.map((s) => `/${encodeURIComponent(s)}`).join('');
  const search = new URLSearchParams(query).toString();
  return `${base}${path}${search === '' ? '' : `?${search}`}`;
}

/** The public API with a bearer session token (docs/api.md). */
export function publicApiTransport(options: PublicApiTransportOptions): Transport {
  const baseUrl = options.baseUrl.replace(/\/+$/u, '');
  const fetchFn = options.fetch ?? globalThis.fetch;
  const authorization = `Bearer ${options.token}`;
  return {
    description: `the Polychrome API at ${baseUrl}`,
    unreachableHint:
      'is the control plane running (make dev), and is --api / POLYCHROME_API_URL right?',
    url: (target) =>
      'persona' in target
        ? joinUrl(`${baseUrl}/v1/personas`, [target.persona, target.operation], target.query)
        : joinUrl(
            `${baseUrl}/v1/conversations`,
            target.operation === ConversationOperation.Resolve
              ? [target.conversation, 'turns', ...(target.rest ?? []), target.operation]
              : [target.conversation, target.operation, ...(target.rest ?? [])],
            target.query,
          ),
    fetch: (url, init) =>
      fetchFn(url, {
        ...init,
        headers: { ...(init.headers as Record<string, string>), authorization },
      }),
  };
}
