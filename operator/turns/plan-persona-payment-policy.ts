/**
 * An admin sets or reads a persona's payment policy (docs/payments.md, "A persona's wallet
 * and limits"). Pure.
 *
 * The policy is a wallet of the control plane's SecretStore (optional) and spend limits:
 * the wallet pays the persona's turns in conversations that link none, and the limits hold
 * every payment of its turns, whoever's wallet pays (effective-payment.ts). The state plane
 * records each change with who, when and why (state/records/persona-payments.ts).
 *
 * Who may: an admin of the public API acting as one of their own identities, as for a
 * conversation's link; and never for their own persona: a caller never widens their own
 * rights. Members, edges, a Kubernetes caller let in for a conversation, and an admin
 * naming an identity that is not theirs are refused, and nothing is recorded. The
 * Kubernetes door's `personapaymentpolicies` resource hands this rule a caller whose RBAC
 * grant on that persona stands in for the admin role, for that request only, and whose
 * own persona is the one linking its Kubernetes identity
 * (operator/kube-api/kube-persona-policies.ts).
 */
import { AppError } from '../../common/errors';
import { Role } from '../../common/persona-roles';
import type { PersonaPaymentPolicyRecord } from '../../common/persona-payment-calls';
import { refuse, type Refusal } from './plan-common';
import { policyChange } from './plan-payment-policy';
import type { Caller, SetPaymentPolicy } from './turn-service';

/** A persona policy as asked for: the conversation link's body, for a persona. */
export interface SetPersonaPaymentPolicy extends Omit<SetPaymentPolicy, 'conversationId'> {
  readonly personaId: string;
}

/** The persona's policy in force, as the API shows it (`PersonaPaymentPolicy` in openapi). */
export interface PersonaPaymentPolicyView {
  readonly personaId: string;
  /** The wallet; '' for none. */
  readonly wallet: string;
  /** The spend limits; absent when the persona has none. */
  readonly limits?: unknown;
  /** Who set it, when (Unix ms), why and its change number; absent when never set. */
  readonly setBy?: string;
  readonly setAtMs?: number;
  readonly reason?: string;
  readonly sequence: number;
  /** Every change, oldest first. */
  readonly history: readonly PersonaPaymentPolicyChange[];
}

/** One recorded change of a persona's policy. */
export interface PersonaPaymentPolicyChange {
  readonly wallet: string;
  readonly limits?: unknown;
  readonly setBy: string;
  readonly setAtMs: number;
  readonly reason: string;
  readonly sequence: number;
}

/** What the records are asked to append, or why not. */
export type PersonaPolicyPlan =
  | Refusal
  | {
      readonly kind: 'set';
      readonly wallet: string;
      readonly limitsJson: string;
      readonly reason: string;
    };

/**
 * Who may set (`read` false) or read persona `personaId`'s payment policy, acting as
 * `actor`; undefined when `caller` may.
 */
export function authorizePersonaPolicy(
  caller: Caller,
  personaId: string,
  actor: string,
  read: boolean,
): Refusal | undefined {
  const what = read ? 'read the payment policy of' : 'set the payment policy of';
  const denied = (message: string, field?: string): Refusal =>
    refuse(
      new AppError('permission_denied', message, {
        details: { personaId, ...(field === undefined ? {} : { field }) },
      }),
    );
  if (caller.kubernetes !== undefined || !caller.roles.includes(Role.Admin)) {
    return denied(
      `${caller.identity} may not ${what} persona ${personaId}: only an admin of the public API may; ask an admin`,
    );
  }
  if (!caller.identities.includes(actor)) {
    return denied(
      `actor ${actor} is not one of your identities (${caller.identities.join(', ')}); act as your own identity`,
      'actor',
    );
  }
  if (!read && caller.personaId === personaId) {
    return denied(
      `${caller.identity} may not set the payment policy of their own persona ${personaId}: no one widens what they may spend; ask another admin`,
    );
  }
  return undefined;
}

/**
 * The change to record, or why not (nothing is recorded then), in order: who may (403); a
 * reason (400); the wallet and limits (400 naming the field, the conversation link's
 * rule); a change (409: the same wallet and limits as the policy in force, or clearing a
 * persona that has none).
 */
export function planPersonaPaymentPolicy(
  caller: Caller,
  request: SetPersonaPaymentPolicy,
  current: PersonaPaymentPolicyRecord | undefined,
): PersonaPolicyPlan {
  const { personaId } = request;
  const denied = authorizePersonaPolicy(caller, personaId, request.actor, false);
  if (denied !== undefined) return denied;
  return policyChange(request, current, {
    limitsAlone: true,
    recordedIn: "the persona's records",
    unchanged: ({ wallet, limitsJson }) =>
      new AppError(
        'conflict',
        wallet === '' && limitsJson === ''
          ? `persona ${personaId} has no payment policy: there is nothing to clear`
          : `persona ${personaId} already has this wallet and these limits (change ${String(current?.sequence ?? 0)}): nothing would change`,
        { details: { personaId, sequence: current?.sequence ?? 0 } },
      ),
  });
}

/** The policy in force and its history, as the API shows them. */
export function personaPolicyView(
  personaId: string,
  history: readonly PersonaPaymentPolicyRecord[],
): PersonaPaymentPolicyView {
  const changes = history.map(changeOf);
  const current = changes.at(-1);
  if (current === undefined) return { personaId, wallet: '', sequence: 0, history: [] };
  return { personaId, ...current, history: changes };
}

function changeOf(record: PersonaPaymentPolicyRecord): PersonaPaymentPolicyChange {
  const { wallet, limitsJson, setBy, setAtMs, reason, sequence } = record;
  return {
    wallet,
    ...(limitsJson === '' ? {} : { limits: JSON.parse(limitsJson) as unknown }),
    ...{ setBy, setAtMs, reason, sequence },
  };
}
