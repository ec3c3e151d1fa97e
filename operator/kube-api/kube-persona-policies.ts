/**
 * Who asks for a persona's payment policy on the Kubernetes door (docs/kube-api.md,
 * "Persona payment policies"). The door runs the public API's own operations
 * (`setPersonaPaymentPolicy`, `getPersonaPaymentPolicy`), whose rule decides
 * (operator/turns/plan-persona-payment-policy.ts); this file only says who is calling.
 *
 * RBAC on the cluster-scoped `personapaymentpolicies`, named after the persona, is on this
 * door what the admin role is on the public API, for that one persona and that one verb:
 * kube-apiserver checks it before proxying, and the door asks again with a
 * SubjectAccessReview for exactly that verb and name. The caller it hands the operation
 * then holds the admin role for this request only, acts only as its Kubernetes identity
 * (`kubernetes:<username>`), and owns the persona that links that identity in the records,
 * so the rule refuses a user their own persona as it refuses an admin theirs: no one widens
 * what they may spend. Deny by default: when the records cannot say which persona links
 * the identity, nothing is decided and the request fails.
 */
import { Role } from '../../common/persona-roles';
import type { RecordsClient } from '../../common/records-client';
import type { PersonaRecord } from '../../common/records-types';
import type { Caller } from '../turns/turn-service';
import { kubernetesIdentity, type KubeUser } from './front-proxy';
import { KUBE_PERSONA_PAYMENT_POLICIES } from './kube-routes';
import type { AdmitCluster } from './kube-sessions';
import type { KubeVerb } from './kube-subresources';

/** The records call the door needs: which persona links the caller's identity. */
export type PersonaLookup = Pick<RecordsClient, 'findPersonaByIdentity'>;

/**
 * The caller of a persona policy operation that RBAC allowed `user`: the admin role for
 * this one request, the Kubernetes identity as its only identity, and `own` (the persona
 * that links that identity, if any) as its persona. No session: the door has none. Pure.
 */
export function personaPolicyCaller(user: KubeUser, own: PersonaRecord | undefined): Caller {
  const identity = kubernetesIdentity(user);
  return {
    identity,
    identities: [identity],
    personaId: own?.id ?? '',
    roles: [Role.Admin],
    sessionId: '',
  };
}

/** The door's side of `personapaymentpolicies`; see the file comment. */
export class KubePersonaPolicies {
  constructor(
    private readonly records: PersonaLookup,
    private readonly admit: AdmitCluster,
    private readonly timeoutMs = 10_000,
  ) {}

  /**
   * The caller for `verb` on the policy of `personaId`, after the SubjectAccessReview for
   * exactly that verb and name.
   *
   * @throws AppError `permission_denied` (RBAC, naming the ClusterRole to ask for); the
   *   review's or the records' error (`unavailable`): nothing is decided without them.
   */
  async caller(
    user: KubeUser,
    target: { readonly personaId: string; readonly verb: KubeVerb },
    signal: AbortSignal,
  ): Promise<Caller> {
    const { personaId, verb } = target;
    await this.admit(
      user,
      { resource: KUBE_PERSONA_PAYMENT_POLICIES.name, verb, name: personaId },
      signal,
    );
    const own = await this.records.findPersonaByIdentity(kubernetesIdentity(user), {
      timeoutMs: this.timeoutMs,
      signal,
    });
    return personaPolicyCaller(user, own);
  }
}
