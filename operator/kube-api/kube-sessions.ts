/**
 * Session tokens minted and revoked through the Kubernetes door (docs/kube-api.md,
 * "Sessions"): an admin with a kubeconfig gets a public-API token for a persona (an edge,
 * a script) without the state plane's writer certificate. The control plane makes the same
 * Records calls `make dev` makes (hack/lib/dev-token.ts) with the certificate it already
 * holds; it gains no credential. The token is in the answer once and nowhere else: not in a
 * log, not in the process after the answer. A mint records its minter and never changes
 * the persona's roles; the roles operation (`personaroles`, also served here) does.
 */
import type { PersonaRecord, SessionRecord } from '../../common/records-types';
import type { RecordsClient } from '../../common/records-client';
import { kubernetesIdentity, type KubeUser } from './front-proxy';
import { identityField, invalid, objectBody, rejectUnknown } from './kube-body-fields';
import { parsePersonaRolesRequest, personaRolesObject, RoleHoldings } from './kube-persona-roles';
import { KUBE_GROUP_VERSION, KUBE_PERSONA_ROLES, KUBE_SESSIONS } from './kube-routes';
import { KubeVerb } from './kube-subresources';

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
  /** The persona's identity, `provider:external_id` (created, with no role, when no persona has it). */
  readonly persona: string;
  readonly ttlMs: number;
}

const FIELDS = new Set(['persona', 'ttl', 'apiVersion', 'kind']);
const DURATION = /^(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?$/u;

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
 * The body of POST `sessions`: `{"persona": "bot:support-desk", "ttl": "720h"}`. Pure.
 * Minting never changes a persona's roles, so a body with `role` or `roles` is refused
 * with the operation that sets them.
 *
 * @throws AppError `invalid_argument` naming every unknown field, or the field that is wrong.
 */
export function parseSessionRequest(body: unknown): SessionRequest {
  const fields = objectBody(body, '{"persona": "bot:desk", "ttl": "720h"}');
  for (const field of ['role', 'roles']) {
    if (fields[field] === undefined) continue;
    throw invalid(
      `a session does not set roles ("${field}" was sent): minting never changes a persona's roles. ` +
        `Set them with the roles operation first (POST ${KUBE_PERSONA_ROLES.name}, ` +
        '{"persona": "...", "roles": [...]}; kubectl polychrome personas set-roles), then mint without it',
      field,
    );
  }
  rejectUnknown(fields, FIELDS, 'a session takes persona and ttl');
  const persona = identityField(fields['persona']);
  const ttlMs =
    fields['ttl'] === undefined ? DEFAULT_SESSION_TTL_MS : parseSessionTtl(fields['ttl']);
  return { persona, ttlMs };
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
  private readonly holdings: RoleHoldings;

  constructor(
    private readonly records: SessionRecords,
    private readonly admit: AdmitCluster,
    private readonly timeoutMs = 10_000,
  ) {
    this.holdings = new RoleHoldings(admit);
  }

  /**
   * A new session for the persona `request.persona` (created with no role when none links
   * it), after a SubjectAccessReview for `create sessions` and one per role the persona
   * holds (a session grants no more than its minter holds, kube-persona-roles.ts). The
   * persona's roles are not touched; the minter is recorded with the session.
   *
   * @throws AppError `permission_denied` (RBAC, or a role the minter does not hold),
   *   `invalid_argument`, or the records' error.
   */
  async mint(user: KubeUser, body: unknown, signal: AbortSignal): Promise<object> {
    await this.admit(
      user,
      { resource: KUBE_SESSIONS.name, verb: KubeVerb.Create, name: '' },
      signal,
    );
    const request = parseSessionRequest(body);
    const options = { timeoutMs: this.timeoutMs };
    const persona =
      (await this.records.findPersonaByIdentity(request.persona, options)) ??
      (await this.records.createPersona(
        { displayName: request.persona, roles: [], identities: [request.persona] },
        options,
      ));
    await this.holdings.require(
      user,
      persona.roles,
      `mint a session for persona ${persona.id}`,
      signal,
    );
    const { session, token } = await this.records.createSession(
      persona.id,
      { ttlMs: request.ttlMs, mintedBy: kubernetesIdentity(user) },
      options,
    );
    return sessionObject(session, persona, token);
  }

  /**
   * Sets the roles of the persona `persona` (created when none links it): the roles
   * operation, after a SubjectAccessReview for `create personaroles` and one per role it
   * grants or takes away. The records keep who set them and when.
   *
   * @throws AppError `permission_denied`, `invalid_argument`, `failed_precondition`
   *   (admin for a ServiceAccount's persona), or the records' error.
   */
  async setRoles(user: KubeUser, body: unknown, signal: AbortSignal): Promise<object> {
    await this.admit(
      user,
      { resource: KUBE_PERSONA_ROLES.name, verb: KubeVerb.Create, name: '' },
      signal,
    );
    const request = parsePersonaRolesRequest(body);
    const options = { timeoutMs: this.timeoutMs };
    const found = await this.records.findPersonaByIdentity(request.persona, options);
    const touched = new Set([...request.roles, ...(found?.roles ?? [])]);
    await this.holdings.require(user, [...touched], `set the roles of ${request.persona}`, signal);
    const setBy = kubernetesIdentity(user);
    const changed =
      found === undefined
        ? await this.records.createPersona(
            {
              displayName: request.persona,
              roles: request.roles,
              identities: [request.persona],
              rolesSetBy: setBy,
            },
            options,
          )
        : await this.records.setRoles(found.id, request.roles, {
            ...options,
            expectedVersion: found.version,
            setBy,
          });
    return personaRolesObject(changed);
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
