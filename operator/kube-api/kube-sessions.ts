/**
 * Session tokens minted and revoked through the Kubernetes door (docs/kube-api.md,
 * "Sessions"): an admin with a kubeconfig gets a public-API token for a persona (an edge,
 * a script) without the state plane's writer certificate. The control plane makes the same
 * Records calls `make dev` makes (hack/lib/dev-token.ts) with the certificate it already
 * holds; it gains no credential. The token is in the answer once and nowhere else: not in a
 * log, not in the process after the answer.
 */
import { AppError } from '../../common/errors';
import { isIdentity } from '../../common/identity';
import { Role } from '../../common/persona-roles';
import type { PersonaRecord, RecordsClient, SessionRecord } from '../../common/records-client';
import type { KubeUser } from './front-proxy';
import { KUBE_GROUP_VERSION, KUBE_SESSIONS, KubeVerb } from './kube-routes';

/** The records calls sessions need (RecordsClient; tests pass the real one). */
export type SessionRecords = Pick<
  RecordsClient,
  'findPersonaByIdentity' | 'createPersona' | 'setRoles' | 'createSession' | 'revokeSession'
>;

/** Longest session the records allow (30 days). */
export const MAX_SESSION_TTL_MS = 30 * 24 * 60 * 60 * 1000;
/** A session minted without `ttl`: 12 hours, as the records default. */
export const DEFAULT_SESSION_TTL_MS = 12 * 60 * 60 * 1000;

/** What POST `sessions` asks for. */
export interface SessionRequest {
  /** The persona's identity, `provider:external_id` (created when no persona has it). */
  readonly persona: string;
  /** The persona's roles after the call: exactly these. */
  readonly roles: readonly Role[];
  readonly ttlMs: number;
}

const FIELDS = new Set(['persona', 'role', 'roles', 'ttl', 'apiVersion', 'kind']);
const ROLES: readonly string[] = Object.values(Role);
const DURATION = /^(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?$/u;

function invalid(message: string, field: string): AppError {
  return new AppError('invalid_argument', message, { details: { field } });
}

/**
 * A `ttl` in Go's duration form as kubectl users write it (`720h`, `90m`, `1h30m`, `45s`).
 *
 * @throws AppError `invalid_argument` for anything else, zero, or more than 720h.
 */
export function parseSessionTtl(value: unknown): number {
  const match = typeof value === 'string' && value !== '' ? DURATION.exec(value) : null;
  if (match === null) {
    throw invalid(
      `ttl must be a duration such as "720h", "90m" or "1h30m", got ${JSON.stringify(value)}`,
      'ttl',
    );
  }
  const [hours, minutes, seconds] = [match[1], match[2], match[3]].map((n) => Number(n ?? 0));
  const ms = (((hours ?? 0) * 60 + (minutes ?? 0)) * 60 + (seconds ?? 0)) * 1000;
  if (ms <= 0 || ms > MAX_SESSION_TTL_MS) {
    throw invalid(
      `ttl must be more than 0 and at most 720h (30 days), got ${JSON.stringify(value)}`,
      'ttl',
    );
  }
  return ms;
}

/**
 * The body of POST `sessions`: `{"persona": "bot:support-desk", "role": "edge", "ttl":
 * "720h"}` (or `roles` for several). Pure.
 *
 * @throws AppError `invalid_argument` naming every unknown field, or the field that is wrong.
 */
export function parseSessionRequest(body: unknown): SessionRequest {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    throw invalid(
      'the body must be a JSON object such as {"persona": "bot:desk", "role": "edge"}',
      '',
    );
  }
  const fields = body as Record<string, unknown>;
  const unknown = Object.keys(fields).filter((k) => !FIELDS.has(k));
  if (unknown.length > 0) {
    throw invalid(
      `unknown field${unknown.length === 1 ? '' : 's'} ${unknown.map((k) => `"${k}"`).join(', ')}; a session takes persona, role (or roles) and ttl`,
      unknown[0] ?? '',
    );
  }
  const persona = fields['persona'];
  if (!isIdentity(persona)) {
    throw invalid(
      `persona must be an identity such as "bot:support-desk" (provider:external_id), got ${JSON.stringify(persona)}`,
      'persona',
    );
  }
  if (fields['role'] !== undefined && fields['roles'] !== undefined) {
    throw invalid('send role or roles, not both', 'roles');
  }
  const given: unknown =
    fields['roles'] ?? (fields['role'] === undefined ? [Role.Member] : [fields['role']]);
  if (!Array.isArray(given) || given.length === 0) {
    throw invalid('roles must be a non-empty list of admin, member, edge', 'roles');
  }
  const roles: Role[] = [];
  for (const role of given as unknown[]) {
    if (typeof role !== 'string' || !ROLES.includes(role)) {
      throw invalid(
        `role must be one of ${ROLES.join(', ')}, got ${JSON.stringify(role)}`,
        fields['roles'] === undefined ? 'role' : 'roles',
      );
    }
    if (!roles.includes(role as Role)) roles.push(role as Role);
  }
  const ttlMs =
    fields['ttl'] === undefined ? DEFAULT_SESSION_TTL_MS : parseSessionTtl(fields['ttl']);
  return { persona, roles: roles.sort(), ttlMs };
}

/** The answer to POST `sessions`: a Kubernetes-shaped object with the token, shown once. */
export function sessionObject(
  session: SessionRecord,
  persona: PersonaRecord,
  token: string | undefined,
): object {
  return {
    kind: KUBE_SESSIONS.kind,
    apiVersion: KUBE_GROUP_VERSION,
    metadata: { name: session.id, creationTimestamp: new Date(session.createdAtMs).toISOString() },
    persona: { id: persona.id, identity: persona.identities[0] ?? '', roles: [...persona.roles] },
    expiresAt: new Date(session.expiresAtMs).toISOString(),
    ...(session.revokedAtMs === undefined
      ? {}
      : { revokedAt: new Date(session.revokedAtMs).toISOString() }),
    ...(token === undefined ? {} : { token }),
  };
}

/** Who may mint: the door's cluster-scoped SubjectAccessReview. */
export type AdmitCluster = (
  user: KubeUser,
  target: { resource: string; verb: string; name: string },
  signal: AbortSignal,
) => Promise<void>;

/** Mints and revokes sessions for users the door admitted; see the file comment. */
export class KubeSessions {
  constructor(
    private readonly records: SessionRecords,
    private readonly admit: AdmitCluster,
    private readonly timeoutMs = 10_000,
  ) {}

  /**
   * A new session for the persona `request.persona` (created, or given exactly
   * `request.roles`), after a SubjectAccessReview for `create sessions`.
   *
   * @throws AppError `permission_denied` (RBAC), `invalid_argument`, or the records' error.
   */
  async mint(user: KubeUser, body: unknown, signal: AbortSignal): Promise<object> {
    await this.admit(
      user,
      { resource: KUBE_SESSIONS.name, verb: KubeVerb.Create, name: '' },
      signal,
    );
    const request = parseSessionRequest(body);
    const options = { timeoutMs: this.timeoutMs };
    let persona = await this.records.findPersonaByIdentity(request.persona, options);
    if (persona === undefined) {
      persona = await this.records.createPersona(
        { displayName: request.persona, roles: request.roles, identities: [request.persona] },
        options,
      );
    } else if ([...persona.roles].sort().join() !== request.roles.join()) {
      persona = await this.records.setRoles(persona.id, request.roles, {
        ...options,
        expectedVersion: persona.version,
      });
    }
    const { session, token } = await this.records.createSession(
      persona.id,
      { ttlMs: request.ttlMs },
      options,
    );
    return sessionObject(session, persona, token);
  }

  /**
   * Revokes the session `id` (its token stops working within the public API's
   * authentication cache time), after a SubjectAccessReview for `delete sessions/<id>`.
   *
   * @throws AppError `permission_denied` (RBAC), `not_found` for an unknown session.
   */
  async revoke(user: KubeUser, id: string, signal: AbortSignal): Promise<object> {
    await this.admit(
      user,
      { resource: KUBE_SESSIONS.name, verb: KubeVerb.Delete, name: id },
      signal,
    );
    const session = await this.records.revokeSession(id, { timeoutMs: this.timeoutMs });
    return {
      kind: KUBE_SESSIONS.kind,
      apiVersion: KUBE_GROUP_VERSION,
      metadata: { name: session.id },
      expiresAt: new Date(session.expiresAtMs).toISOString(),
      revokedAt: new Date(session.revokedAtMs ?? Date.now()).toISOString(),
    };
  }
}
