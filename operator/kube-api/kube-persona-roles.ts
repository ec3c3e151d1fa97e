/**
 * The roles operation on the Kubernetes door (docs/kube-api.md, "Persona roles"): POST
 * `personaroles` sets a persona's roles, its only path on the door. Minting a session never
 * does (kube-sessions.ts). Both check that the caller holds every role involved: RBAC
 * verb `bind` on `personaroles` named after the role, the way Kubernetes RBAC guards
 * `bind` on ClusterRoles. A caller never hands out, or takes away, more than they hold.
 */
import { isAppError, AppError } from '../../common/errors';
import { Role } from '../../common/persona-roles';
import type { PersonaRecord } from '../../common/records-types';
import type { KubeUser } from './front-proxy';
import { identityField, invalid, objectBody, rejectUnknown } from './kube-body-fields';
import { KUBE_GROUP_VERSION, KUBE_PERSONA_ROLES } from './kube-routes';
import { KubeVerb } from './kube-subresources';

/** What POST `personaroles` asks for. */
export interface PersonaRolesRequest {
  /** The persona's identity, `provider:external_id` (created when no persona has it). */
  readonly persona: string;
  /** The persona's roles after the call: exactly these, sorted (empty: none). */
  readonly roles: readonly Role[];
}

const FIELDS = new Set(['persona', 'roles', 'apiVersion', 'kind']);
const ROLES: readonly string[] = Object.values(Role);

/**
 * The body of POST `personaroles`: `{"persona": "bot:support-desk", "roles": ["edge"]}`.
 * Pure.
 *
 * @throws AppError `invalid_argument` naming every unknown field, or the field that is wrong.
 */
export function parsePersonaRolesRequest(body: unknown): PersonaRolesRequest {
  const fields = objectBody(body, '{"persona": "bot:desk", "roles": ["edge"]}');
  rejectUnknown(fields, FIELDS, 'the roles operation takes persona and roles');
  const persona = identityField(fields['persona']);
  const given = fields['roles'];
  if (!Array.isArray(given)) {
    throw invalid(
      `roles must be a list of ${ROLES.join(', ')} (empty for none), got ${JSON.stringify(given)}`,
      'roles',
    );
  }
  const roles: Role[] = [];
  for (const role of given as unknown[]) {
    if (typeof role !== 'string' || !ROLES.includes(role)) {
      throw invalid(
        `role must be one of ${ROLES.join(', ')}, got ${JSON.stringify(role)}`,
        'roles',
      );
    }
    if (!roles.includes(role as Role)) roles.push(role as Role);
  }
  return { persona, roles: roles.sort() };
}

/** The answer to POST `personaroles`: the persona with its roles and who set them. */
export function personaRolesObject(persona: PersonaRecord): object {
  return {
    kind: KUBE_PERSONA_ROLES.kind,
    apiVersion: KUBE_GROUP_VERSION,
    metadata: { name: persona.id },
    persona: { id: persona.id, identity: persona.identities[0] ?? '', roles: [...persona.roles] },
    ...(persona.rolesSetBy === undefined ? {} : { setBy: persona.rolesSetBy }),
    ...(persona.rolesSetAtMs === undefined
      ? {}
      : { setAt: new Date(persona.rolesSetAtMs).toISOString() }),
  };
}

/** The door's cluster-scoped SubjectAccessReview (kube-door.ts admitCluster). */
type Admit = (
  user: KubeUser,
  target: { resource: string; verb: string; name: string },
  signal: AbortSignal,
) => Promise<void>;

/** Which persona roles a Kubernetes user holds: RBAC `bind` on `personaroles/<role>`. */
export class RoleHoldings {
  constructor(private readonly admit: Admit) {}

  /**
   * Returns when `user` holds every one of `roles`, one SubjectAccessReview each.
   *
   * @throws AppError `permission_denied` naming the first role the user does not hold and
   *   `what` they tried; the review's own errors otherwise.
   */
  async require(
    user: KubeUser,
    roles: readonly string[],
    what: string,
    signal: AbortSignal,
  ): Promise<void> {
    for (const role of [...roles].sort()) {
      try {
        await this.admit(
          user,
          { resource: KUBE_PERSONA_ROLES.name, verb: KubeVerb.Bind, name: role },
          signal,
        );
      } catch (error) {
        if (!isAppError(error) || error.code !== 'permission_denied') throw error;
        throw new AppError(
          'permission_denied',
          `User "${user.username}" may not ${what}: that involves the role "${role}", which the ` +
            `user does not hold (RBAC verb ${KubeVerb.Bind} on ${KUBE_PERSONA_ROLES.name} named ` +
            `"${role}"), and nobody gives more than they hold; ask someone who holds it, or for ` +
            'a ClusterRoleBinding to polychrome-persona-admin (docs/kube-api.md, "Persona roles")',
          { details: { resource: KUBE_PERSONA_ROLES.name, verb: KubeVerb.Bind, name: role } },
        );
      }
    }
  }
}
