/**
 * An admin links a wallet to a conversation, or unlinks it (docs/payments.md, "Linking a
 * wallet"). Pure.
 *
 * The decision is one `payment_policy` event: the wallet's name in the control plane's
 * SecretStore (never its key), the spend limits as canonical JSON, who decided (the actor
 * and the identity authenticated, with the session), why and when. The newest one is the
 * policy in force. Only an admin acting as one of their own identities may set or read it
 * (the forensic rule, forensic-access.ts): the owner, participants and other tenants may
 * not, so no one who can write to a conversation can widen what it may spend.
 */
import { AppError, isAppError } from '../../common/errors';
import { EventKind } from '../../common/event-kinds';
import type { Conversation } from '../api/v1alpha1/conversation-types';
import { ForensicAction, forensicRefusal } from './forensic-access';
import type { JournalView, PaymentPolicyRef } from './journal-view-types';
import { planned, refuse, type PlannedEvent, type Refusal } from './plan-common';
import { parseSpendLimits } from './spend-limits-input';
import { isWalletName } from '../payments/secret-store';
import type { Caller, PaymentPolicyView, SetPaymentPolicy } from './turn-service';

/** The longest reason recorded, in characters. */
export const MAX_POLICY_REASON_LENGTH = 4096;

/** The Kubernetes door's subresource that grants setting (`create`) or reading (`get`) it. */
export const PAYMENT_POLICY_SUBRESOURCE = 'payment-policy';

export interface PaymentPolicyInput {
  readonly view: JournalView;
  readonly conversation: Conversation | undefined;
  readonly caller: Caller;
  readonly request: SetPaymentPolicy;
  readonly nowMs: number;
}

export type PaymentPolicyPlan =
  | Refusal
  | {
      readonly kind: 'set';
      readonly events: readonly PlannedEvent[];
      /** What the event records: the wallet (empty: unlinked) and canonical limits. */
      readonly wallet: string;
      readonly limitsJson: string;
    };

/**
 * Who may set (`read` false) or read the payment policy: an admin acting as one of their
 * own identities; on the Kubernetes door, RBAC on the `payment-policy` subresource of this
 * conversation, acting as the Kubernetes identity.
 */
export function authorizePaymentPolicy(
  caller: Caller,
  conversationId: string,
  conversation: Conversation | undefined,
  actor: string,
  read: boolean,
): Refusal | undefined {
  const action = read ? ForensicAction.ReadPaymentPolicy : ForensicAction.SetPaymentPolicy;
  const error = forensicRefusal(caller, conversationId, conversation, action, actor);
  if (error !== undefined) return refuse(error);
  // A grant of another subresource (the transcript, a rollback) is no grant of this one.
  const grant = caller.kubernetes;
  const verb = read ? 'get' : 'create';
  if (
    grant !== undefined &&
    (grant.subresource !== PAYMENT_POLICY_SUBRESOURCE || grant.verb !== verb)
  ) {
    return refuse(
      new AppError(
        'permission_denied',
        `${caller.identity} was allowed ${grant.verb} ${grant.subresource}, not ${verb} ${PAYMENT_POLICY_SUBRESOURCE}, on conversation ${conversationId}`,
        { details: { conversationId } },
      ),
    );
  }
  return undefined;
}

/**
 * The policy's batch, or why not (nothing is committed on refusal), in order: who may (404,
 * 403); a reason (400); the wallet's name and the limits (400 naming the field); and a
 * change (409: the same wallet and limits as the policy in force, or an unlink when no
 * wallet is linked).
 */
export function planPaymentPolicy(input: PaymentPolicyInput): PaymentPolicyPlan {
  const { caller, request } = input;
  const id = request.conversationId;
  const denied = authorizePaymentPolicy(caller, id, input.conversation, request.actor, false);
  if (denied !== undefined) return denied;
  const current = input.view.paymentPolicy;
  const policy = policyChange(request, current, {
    limitsAlone: false,
    recordedIn: 'the journal',
    unchanged: ({ wallet }) =>
      new AppError(
        'conflict',
        wallet === ''
          ? `conversation ${id} has no wallet linked: there is nothing to unlink`
          : `conversation ${id} already has wallet ${wallet} linked with these limits (position ${String(current?.position ?? 0)}): nothing would change`,
        { details: { conversationId: id, head: input.view.head } },
      ),
  });
  if (policy.kind === 'refuse') return policy;
  const { reason } = policy;
  return {
    kind: 'set',
    wallet: policy.wallet,
    limitsJson: policy.limitsJson,
    events: [
      planned(EventKind.PaymentPolicy, {
        wallet: policy.wallet,
        limitsJson: policy.limitsJson,
        actor: request.actor,
        caller: caller.identity,
        reason,
        setAtMs: input.nowMs,
        session: caller.sessionId,
      }),
    ],
  };
}

/** The policy in force, as the API shows it. */
export function paymentPolicyView(
  conversationId: string,
  view: Pick<JournalView, 'head' | 'paymentPolicy'>,
): PaymentPolicyView {
  const policy: PaymentPolicyRef | undefined = view.paymentPolicy;
  if (policy === undefined) return { conversationId, wallet: '', head: view.head };
  return {
    conversationId,
    wallet: policy.wallet,
    ...(policy.limitsJson === '' ? {} : { limits: JSON.parse(policy.limitsJson) as unknown }),
    setBy: policy.actor,
    setAtMs: policy.setAtMs,
    position: policy.position,
    head: view.head,
  };
}

/** A policy's wallet and canonical limits, as {@link policyOf} reads them. */
export interface PolicyTerms {
  readonly wallet: string;
  readonly limitsJson: string;
}

/**
 * The change a payment policy request makes, or why not: a reason (400), the wallet and
 * limits ({@link policyOf}, 400 naming the field), and a change from `current` (else the
 * `unchanged` error, a 409). One rule for a conversation's link and a persona's policy.
 */
export function policyChange(
  request: Pick<SetPaymentPolicy, 'wallet' | 'limits' | 'reason'>,
  current: PolicyTerms | undefined,
  options: {
    readonly limitsAlone: boolean;
    /** Where the change is recorded, for the reason's message. */
    readonly recordedIn: string;
    readonly unchanged: (asked: PolicyTerms) => AppError;
  },
): Refusal | (PolicyTerms & { readonly kind: 'set'; readonly reason: string }) {
  const reason = request.reason.trim();
  if (reason === '' || reason.length > MAX_POLICY_REASON_LENGTH) {
    return invalid(
      'reason',
      `reason is required, at most ${String(MAX_POLICY_REASON_LENGTH)} characters: say why the policy changes (it is recorded in ${options.recordedIn})`,
    );
  }
  const policy = policyOf(request, options.limitsAlone);
  if (policy.kind === 'refuse') return policy;
  if (
    (current?.wallet ?? '') === policy.wallet &&
    (current?.limitsJson ?? '') === policy.limitsJson
  ) {
    return refuse(options.unchanged(policy));
  }
  return { ...policy, reason };
}

/**
 * The wallet and canonical limits asked for, or the field at fault: the one check of a
 * payment policy's wallet and limits, for a conversation's link and a persona's policy.
 * `limitsAlone`: limits without a wallet are a policy (a persona's limits on what any
 * wallet pays for it); else a wallet "" is an unlink and takes no limits.
 */
export function policyOf(
  request: Pick<SetPaymentPolicy, 'wallet' | 'limits'>,
  limitsAlone = false,
): Refusal | { kind: 'set'; wallet: string; limitsJson: string } {
  const { wallet, limits } = request;
  const none = limits === undefined || limits === null;
  if (wallet === '' && (none || !limitsAlone)) {
    if (!none) {
      return invalid('limits', 'an unlink takes no limits: send wallet "" without limits');
    }
    return { kind: 'set', wallet, limitsJson: '' };
  }
  if (wallet !== '' && !isWalletName(wallet)) {
    return invalid(
      'wallet',
      `wallet ${JSON.stringify(wallet.slice(0, 60))} is not a wallet name: a lower-case DNS label of at most 46 characters (its key is the Secret polychrome-wallet-<name>), or "" to unlink`,
    );
  }
  if (none) {
    return invalid(
      'limits',
      `linking wallet ${wallet} takes limits: the spend limits its payments are held to`,
    );
  }
  try {
    return { kind: 'set', wallet, limitsJson: parseSpendLimits(limits).canonical };
  } catch (error) {
    if (isAppError(error)) return refuse(error);
    throw error;
  }
}

function invalid(field: string, message: string): Refusal {
  return refuse(new AppError('invalid_argument', message, { details: { field } }));
}
