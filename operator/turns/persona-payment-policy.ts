/**
 * The shell of an admin's persona payment policy (plan-persona-payment-policy.ts decides):
 * refuse who may not before the records are touched, read the policy in force, and have the
 * state plane append the change under the sequence read, so two admins racing cannot both
 * change the same policy.
 */
import {
  authorizePersonaPolicy,
  personaPolicyView,
  planPersonaPaymentPolicy,
  type PersonaPaymentPolicyView,
  type SetPersonaPaymentPolicy,
} from './plan-persona-payment-policy';
import type { PersonaPaymentStore } from './persona-payment-facts';
import type { Caller } from './turn-service';

/** What setting a persona's policy recorded (`PersonaPaymentPolicySet` in openapi). */
export interface PersonaPaymentPolicyAnswer extends PersonaPaymentPolicyView {
  readonly message: string;
}

/** An admin's persona payment policies, over the state plane's records. */
export class PersonaPaymentPolicies {
  constructor(private readonly store: PersonaPaymentStore) {}

  /**
   * Records `request` as the persona's payment policy.
   *
   * @throws AppError `permission_denied` (nothing read or recorded), `invalid_argument`
   *   naming the field, `not_found` (no such persona), `conflict` (nothing would change,
   *   or another admin changed it meanwhile), `unavailable`.
   */
  async set(
    caller: Caller,
    request: SetPersonaPaymentPolicy,
    signal: AbortSignal,
  ): Promise<PersonaPaymentPolicyAnswer> {
    const { personaId } = request;
    const denied = authorizePersonaPolicy(caller, personaId, request.actor, false);
    if (denied !== undefined) throw denied.error;
    const { current } = await this.store.getPersonaPaymentPolicy(personaId, { signal });
    const plan = planPersonaPaymentPolicy(caller, request, current);
    if (plan.kind === 'refuse') throw plan.error;
    const { history } = await this.store.setPersonaPaymentPolicy(
      {
        ...{ personaId, wallet: plan.wallet, limitsJson: plan.limitsJson },
        ...{ setBy: request.actor, session: caller.sessionId, reason: plan.reason },
        expectedSequence: current?.sequence ?? 0,
      },
      { signal },
    );
    const view = personaPolicyView(personaId, history);
    const what =
      plan.wallet === ''
        ? plan.limitsJson === ''
          ? 'has no payment policy'
          : 'links no wallet; its limits hold every payment of its turns'
        : `pays with wallet ${plan.wallet} where a conversation links none, within its limits`;
    return { ...view, message: `persona ${personaId} ${what} (change ${String(view.sequence)})` };
  }

  /**
   * The persona's policy in force and its history.
   *
   * @throws AppError `permission_denied`, `not_found`, `unavailable`.
   */
  async read(
    caller: Caller,
    personaId: string,
    actor: string,
    signal: AbortSignal,
  ): Promise<PersonaPaymentPolicyView> {
    const denied = authorizePersonaPolicy(caller, personaId, actor, true);
    if (denied !== undefined) throw denied.error;
    const { history } = await this.store.getPersonaPaymentPolicy(personaId, { signal });
    return personaPolicyView(personaId, history);
  }
}
