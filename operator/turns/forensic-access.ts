/**
 * Who may run the admin's forensic operations on a conversation (export for verify and
 * replay, repair, resolving a quarantined turn; docs/api.md "Status codes and who may do what", docs/replay.md). Pure.
 *
 * Every request names an actor: the identity the admin acts as, recorded with what it
 * changes. The actor must be one of the caller's own identities (a caller can never act as
 * someone else), and the caller must be an admin: on the public API a persona with the
 * admin role; on the Kubernetes door RBAC decided (kube-apiserver and a
 * SubjectAccessReview allowed exactly this subresource of exactly this Conversation), and
 * the actor must be the Kubernetes identity it authenticated.
 */
import { AppError } from '../../common/errors';
import { Role } from '../../common/persona-roles';
import type { Conversation } from '../api/v1alpha1/conversation-types';
import type { Caller } from './turn-service';

/** The forensic operations, as their messages name them. */
export const ForensicAction = {
  Export: 'export',
  Repair: 'repair',
  Erase: 'erase entries of',
  Resolve: 'resolve',
  AcceptRollback: 'accept a rollback of',
  SetPaymentPolicy: 'link or unlink a wallet of',
  ReadPaymentPolicy: 'read the payment policy of',
} as const;
export type ForensicAction = (typeof ForensicAction)[keyof typeof ForensicAction];

/**
 * Refuses `caller` the forensic `action` on the conversation as `actor`, or returns nothing
 * when it is allowed.
 *
 * @returns AppError `not_found` (no such conversation), `permission_denied` (not an admin;
 *   the actor is not one of the caller's identities; the Kubernetes door allowed another
 *   conversation).
 */
export function forensicRefusal(
  caller: Caller,
  conversationId: string,
  conversation: Conversation | undefined,
  action: ForensicAction,
  actor: string,
): AppError | undefined {
  if (conversation === undefined) {
    return new AppError('not_found', `conversation ${conversationId} does not exist`, {
      details: { conversationId },
    });
  }
  if (caller.kubernetes !== undefined) {
    if (caller.kubernetes.conversationId !== conversationId) {
      return new AppError(
        'permission_denied',
        `${caller.identity} was allowed ${caller.kubernetes.subresource} on another conversation, not ${conversationId}`,
        { details: { conversationId } },
      );
    }
  } else if (!caller.roles.includes(Role.Admin)) {
    return new AppError(
      'permission_denied',
      `${caller.identity} may not ${action} conversation ${conversationId}: only an admin may (the forensic commands are admin-only); ask an admin`,
      { details: { conversationId } },
    );
  }
  if (!caller.identities.includes(actor)) {
    return new AppError(
      'permission_denied',
      `actor ${actor} is not one of your identities (${caller.identities.join(', ')}); act as your own identity`,
      { details: { conversationId, field: 'actor' } },
    );
  }
  return undefined;
}
