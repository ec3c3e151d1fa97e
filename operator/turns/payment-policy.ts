/**
 * The shell of linking a wallet to a conversation (plan-payment-policy.ts): claim the
 * conversation as a turn does (fenced by its lease), read the journal, and commit the
 * plan's `payment_policy`. Reading the policy in force is the transcript's read, for an
 * admin only.
 */
import { AppError } from '../../common/errors';
import {
  authorizePaymentPolicy,
  paymentPolicyView,
  planPaymentPolicy,
} from './plan-payment-policy';
import type { ResolveParts } from './resolve-turn';
import type {
  Caller,
  PaymentPolicyAnswer,
  PaymentPolicyView,
  SetPaymentPolicy,
} from './turn-service';

/**
 * Links `request.wallet` (empty: unlinks) to the conversation with `request.limits`.
 *
 * @throws AppError `not_found`, `permission_denied` (refused before the claim),
 *   `invalid_argument` (the field at fault), `conflict` (nothing would change),
 *   `unavailable` when another replica holds the conversation (details.forwardTo).
 */
export async function setPaymentPolicy(
  parts: ResolveParts,
  caller: Caller,
  request: SetPaymentPolicy,
  signal: AbortSignal,
): Promise<PaymentPolicyAnswer> {
  const uid = request.conversationId;
  const conversation = parts.conversations.byUid(uid);
  // Refused before the claim: someone who may not link never takes the lease.
  const denied = authorizePaymentPolicy(caller, uid, conversation, request.actor, false);
  if (denied !== undefined) throw denied.error;
  if (conversation === undefined) throw new AppError('internal', 'unreachable: authorized');
  return parts.claims.run(conversation, signal, async (lease) => {
    const view = await parts.runner.startView(conversation, lease, signal);
    const fresh = parts.runner.fresh(conversation);
    const nowMs = parts.nowMs();
    const plan = planPaymentPolicy({ view, conversation: fresh, caller, request, nowMs });
    if (plan.kind === 'refuse') throw plan.error;
    const { outcome } = await parts.runner.commit(uid, lease, plan.events);
    const linked =
      plan.wallet === ''
        ? `no wallet is linked to conversation ${uid}: its payments are off`
        : `wallet ${plan.wallet} is linked to conversation ${uid} with the limits given`;
    return {
      conversationId: uid,
      wallet: plan.wallet,
      ...(plan.limitsJson === '' ? {} : { limits: JSON.parse(plan.limitsJson) as unknown }),
      setBy: request.actor,
      setAtMs: nowMs,
      position: view.head,
      head: outcome.head,
      message: `${linked}; recorded at position ${String(view.head)}`,
    };
  });
}

/**
 * The payment policy in force on the conversation.
 *
 * @throws AppError `not_found`, `permission_denied` (not an admin acting as their own
 *   identity).
 */
export async function readPaymentPolicy(
  parts: ResolveParts,
  caller: Caller,
  conversationId: string,
  actor: string,
  signal: AbortSignal,
): Promise<PaymentPolicyView> {
  const conversation = parts.conversations.byUid(conversationId);
  const denied = authorizePaymentPolicy(caller, conversationId, conversation, actor, true);
  if (denied !== undefined) throw denied.error;
  return paymentPolicyView(conversationId, await parts.views.refresh(conversationId, signal));
}
