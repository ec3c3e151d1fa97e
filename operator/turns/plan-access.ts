/**
 * Who may do what on a conversation (docs/turns.md "One message", 1; "Approvals and
 * questions"). Pure.
 */
import { AppError } from '../../common/errors';
import { Role as CallerRole } from '../../common/persona-roles';
import type { ApprovalRequest } from '../../proto/gen/polychrome/events/v1/events';
import { Visibility } from '../api/v1alpha1/conversation-values';
import { type Conversation } from '../api/v1alpha1/conversation-types';
import type { TurnView } from './journal-view-types';
import { refuse, type Refusal } from './plan-common';
import type { Caller } from './turn-service';

export function isAdmin(caller: Caller): boolean {
  return caller.roles.includes(CallerRole.Admin);
}

/** The RBAC verb a Kubernetes door grant must carry to answer (`create`) or cancel (`delete`). */
export const KubeGrantVerb = { Create: 'create', Delete: 'delete' } as const;

/**
 * Whether `caller` came through the Kubernetes door with a grant for exactly `verb` on
 * `subresource` of `conversationId` (kube-apiserver and the door's SubjectAccessReview
 * allowed that request and nothing wider). Such a grant stands in for the admin role for
 * that one operation only: `create conversations/approvals` answers that conversation's
 * approvals, and no other grant (messages, questions, another conversation) does.
 */
export function kubeGrantAllows(
  caller: Caller,
  conversationId: string,
  subresource: 'approvals' | 'questions' | 'memory',
  verb: (typeof KubeGrantVerb)[keyof typeof KubeGrantVerb],
): boolean {
  const grant = caller.kubernetes;
  return (
    grant !== undefined &&
    conversationId !== '' &&
    grant.conversationId === conversationId &&
    grant.subresource === subresource &&
    grant.verb === verb
  );
}

/**
 * The conversation, when `caller` may use it ({@link authorizeUse}).
 *
 * @throws AppError the refusal's: `not_found` or `permission_denied`.
 */
export function usableConversation(
  caller: Caller,
  conversationId: string,
  conversation: Conversation | undefined,
): Conversation {
  const refusal = authorizeUse(caller, conversationId, conversation);
  if (refusal !== undefined) throw refusal.error;
  if (conversation === undefined) throw new Error('unreachable: authorizeUse checked it');
  return conversation;
}

/**
 * Whether `caller` may use the conversation at all (read it, post, answer its questions):
 * admins always; a Kubernetes caller for the one conversation RBAC allowed; otherwise the
 * caller must hold the owner's identity or, for a shared conversation, a participant's.
 */
export function authorizeUse(
  caller: Caller,
  conversationId: string,
  conversation: Conversation | undefined,
): Refusal | undefined {
  if (conversation === undefined) {
    return refuse(
      new AppError('not_found', `conversation ${conversationId} does not exist`, {
        details: { conversationId },
      }),
    );
  }
  if (isAdmin(caller)) return undefined;
  // The Kubernetes door: RBAC (kube-apiserver, then a SubjectAccessReview) allowed this
  // request on this one conversation; personas do not apply.
  if (caller.kubernetes !== undefined) {
    if (caller.kubernetes.conversationId === conversationId) return undefined;
    return refuse(
      new AppError(
        'permission_denied',
        `${caller.identity} was allowed ${caller.kubernetes.subresource} on another conversation, not ${conversationId}`,
        { details: { conversationId } },
      ),
    );
  }
  const mine = (identity: string | undefined): boolean =>
    identity !== undefined && caller.identities.includes(identity);
  const spec = conversation.spec;
  if (mine(spec.owner)) return undefined;
  if (spec.visibility === Visibility.Shared && (spec.participants ?? []).some(mine)) {
    return undefined;
  }
  return refuse(
    new AppError(
      'permission_denied',
      `${caller.identity} may not use conversation ${conversationId}: it belongs to ${spec.owner ?? 'an admin'}${spec.visibility === Visibility.Shared ? ' and its participants' : ''}`,
      { details: { conversationId } },
    ),
  );
}

/**
 * Whether `caller` may clear the conversation's memory: whoever may post a message
 * ({@link authorizeUse}); on the Kubernetes door only with `delete` on
 * `conversations/memory` of this conversation (a `polychrome-conversation-reader` reads
 * memory as it reads the transcript, and may not clear it).
 */
export function authorizeMemoryClear(
  caller: Caller,
  conversationId: string,
  conversation: Conversation | undefined,
): Refusal | undefined {
  const refusal = authorizeUse(caller, conversationId, conversation);
  if (refusal !== undefined || caller.kubernetes === undefined) return refusal;
  if (kubeGrantAllows(caller, conversationId, 'memory', KubeGrantVerb.Delete)) return undefined;
  return refuse(
    new AppError(
      'permission_denied',
      `${caller.identity} may not clear the memory of conversation ${conversationId}: that needs delete on conversations/memory of this conversation (polychrome-conversation-user, edit or admin)`,
      { details: { conversationId } },
    ),
  );
}

/**
 * Whether `caller` may answer the approval `request` of `turn`. The required approver is
 * the request's, else the turn directive's (the plan checks the harness copied the
 * directive's, so the two agree). A named approver must hold that identity and still be an
 * admin (a directive can only name an admin, and roles may have changed since); with none
 * named, any admin. Nobody else, the owner included: an approval is a second pair of eyes.
 */
export function authorizeApproval(
  caller: Caller,
  turn: TurnView,
  request: ApprovalRequest,
  conversationId: string,
): Refusal | undefined {
  const required = request.requiredApprover || (turn.directive?.requiredApprover ?? '');
  if (required !== '' && !caller.identities.includes(required)) {
    return refuse(
      new AppError(
        'permission_denied',
        `approval ${request.requestId} must be answered by ${required}; ${caller.identity} is not that identity`,
        { details: { requestId: request.requestId, requiredApprover: required } },
      ),
    );
  }
  const admin =
    caller.kubernetes === undefined
      ? isAdmin(caller)
      : kubeGrantAllows(caller, conversationId, 'approvals', KubeGrantVerb.Create);
  if (!admin) {
    return refuse(
      new AppError(
        'permission_denied',
        `approval ${request.requestId} must be answered by an admin${required === '' ? '' : ` (${required})`}; ${caller.identity} does not have ${caller.kubernetes === undefined ? 'the admin role' : 'create on conversations/approvals of this conversation (polychrome-conversation-admin)'}`,
        { details: { requestId: request.requestId } },
      ),
    );
  }
  return undefined;
}

/**
 * Whether `caller` is the one whose message started `turn` (its `message_received`
 * attribution): they hold its identity, or are its persona. Later dispatches of the turn
 * are attributed to whoever answered, so only the message counts.
 */
export function isRequester(caller: Caller, turn: TurnView): boolean {
  const { caller: identity, persona } = turn.attribution;
  return (
    (identity !== '' && caller.identities.includes(identity)) ||
    (persona !== '' && caller.personaId === persona)
  );
}

/**
 * The refusal of an approval by the person whose message started the turn: by default an
 * approval is a second pair of eyes, whatever roles the requester holds.
 */
export function selfApprovalError(
  caller: Caller,
  turn: TurnView,
  request: ApprovalRequest,
): AppError {
  return new AppError(
    'permission_denied',
    `${caller.identity} may not approve ${request.requestId} (${request.toolName}): their own message started turn ${turn.turnId}, and an approval needs a second person; ask another admin to approve it (you may deny it or, as an admin, cancel it), or, on a single-person install, run the control plane with POLYCHROME_ALLOW_SELF_APPROVAL=true`,
    {
      details: {
        requestId: request.requestId,
        turnId: turn.turnId,
        requester: turn.attribution.caller,
      },
    },
  );
}

/**
 * Whether `caller` may answer a question: whoever may use the conversation
 * ({@link authorizeUse}, checked before the claim); on the Kubernetes door only with
 * `create conversations/questions` of this conversation (polychrome-conversation-user).
 */
export function authorizeQuestionAnswer(
  caller: Caller,
  requestId: string,
  conversationId: string,
): Refusal | undefined {
  if (caller.kubernetes === undefined) return undefined;
  if (kubeGrantAllows(caller, conversationId, 'questions', KubeGrantVerb.Create)) return undefined;
  return refuse(
    new AppError(
      'permission_denied',
      `${caller.identity} may not answer question ${requestId}: that needs create on conversations/questions of this conversation`,
      { details: { requestId } },
    ),
  );
}

/**
 * Whether `caller` may cancel a pending request: admins only (on the Kubernetes door,
 * `delete` on `conversations/approvals` or `conversations/questions` of this conversation) (the owner, members and
 * edges may not; an owner who could cancel an approval could skip its second pair of eyes
 * by cancelling and asking again, and a cancel ends the turn for everyone in it).
 */
export function authorizeCancel(
  caller: Caller,
  type: 'approval' | 'question',
  requestId: string,
  conversationId: string,
): Refusal | undefined {
  const subresource = type === 'approval' ? 'approvals' : 'questions';
  if (
    caller.kubernetes === undefined
      ? isAdmin(caller)
      : kubeGrantAllows(caller, conversationId, subresource, KubeGrantVerb.Delete)
  ) {
    return undefined;
  }
  return refuse(
    new AppError(
      'permission_denied',
      `${caller.identity} may not cancel ${type} ${requestId}: only an admin may cancel a pending ${type}; answer it instead${type === 'approval' ? ' (an admin must)' : ''}`,
      { details: { requestId } },
    ),
  );
}
