import type { KubeConnection } from './kube-connection';
import {
  ConversationOperation,
  joinUrl,
  PersonaOperation,
  type ConversationTarget,
  type PersonaTarget,
  type Transport,
} from './transport';

/*
 * The Kubernetes door as a {@link Transport}: a conversation by its Conversation name in
 * the connection's namespace, each operation a subresource of
 * `/apis/api.polychrome.dev/v1alpha1/namespaces/NS/conversations/NAME` (docs/kube-api.md),
 * the kubeconfig's credentials applied by the connection; a persona's payment policy is
 * the cluster-scoped `personapaymentpolicies/ID`. kube-apiserver checks RBAC first.
 */

/** The door's aggregated API group and version (operator/kube-api/kube-routes.ts). */
export const KUBE_DOOR_GROUP_VERSION = 'api.polychrome.dev/v1alpha1';
/** The Conversation CRD's group and version (operator/api/v1alpha1). */
export const CONVERSATION_GROUP_VERSION = 'polychrome.dev/v1alpha1';

/** The door's subresource for each operation: the stream is `log` (long-running for kube-apiserver). */
export const KUBE_SUBRESOURCE_OF: Readonly<Record<ConversationOperation, string>> = {
  [ConversationOperation.Messages]: 'messages',
  [ConversationOperation.Transcript]: 'transcript',
  [ConversationOperation.Memory]: 'memory',
  [ConversationOperation.Stream]: 'log',
  [ConversationOperation.Approvals]: 'approvals',
  [ConversationOperation.Questions]: 'questions',
  [ConversationOperation.Export]: 'export',
  [ConversationOperation.Repair]: 'repair',
  [ConversationOperation.Erase]: 'erase',
  [ConversationOperation.Resolve]: 'resolve',
  [ConversationOperation.AcceptRollback]: 'accept-rollback',
  [ConversationOperation.PaymentPolicy]: 'payment-policy',
};

/** `/apis/api.polychrome.dev/v1alpha1/namespaces/NS/conversations/NAME/...` on `connection`. */
export function kubeConversationUrl(
  connection: Pick<KubeConnection, 'server' | 'namespace'>,
  target: ConversationTarget,
): string {
  return joinUrl(
    `${connection.server}/apis/${KUBE_DOOR_GROUP_VERSION}`,
    [
      'namespaces',
      connection.namespace,
      'conversations',
      target.conversation,
      KUBE_SUBRESOURCE_OF[target.operation],
      // `resolve` names its turn in the body: a subresource path has no room for it.
      ...(target.operation === ConversationOperation.Resolve ? [] : (target.rest ?? [])),
    ],
    target.query,
  );
}

/** The door's cluster-scoped resource for each persona operation (operator/kube-api/kube-routes.ts). */
export const KUBE_PERSONA_RESOURCE_OF: Readonly<Record<PersonaOperation, string>> = {
  [PersonaOperation.PaymentPolicy]: 'personapaymentpolicies',
};

/** `/apis/api.polychrome.dev/v1alpha1/personapaymentpolicies/ID` on `connection` (cluster-scoped). */
export function kubePersonaUrl(
  connection: Pick<KubeConnection, 'server'>,
  target: PersonaTarget,
): string {
  return joinUrl(
    `${connection.server}/apis/${KUBE_DOOR_GROUP_VERSION}`,
    [KUBE_PERSONA_RESOURCE_OF[target.operation], target.persona],
    target.query,
  );
}

/** The Kubernetes door through `connection`: conversations by name, RBAC decides. */
export function kubeTransport(connection: KubeConnection): Transport {
  return {
    description: `the Kubernetes API at ${connection.server} (context ${connection.contextName}, namespace ${connection.namespace})`,
    unreachableHint:
      'is the cluster up, and are --kubeconfig, --context and -n right? (kubectl get --raw /apis/api.polychrome.dev/v1alpha1 tells whether the door is served)',
    cancelsWithDelete: true,
    putsAsPost: true,
    url: (target) =>
      'persona' in target
        ? kubePersonaUrl(connection, target)
        : kubeConversationUrl(connection, target),
    fetch: (url, init) => connection.fetch(url, init),
  };
}

/** The ClusterRole that grants `verb` on `resource` (docs/kube-api.md, "Who may do what"). */
function roleFor(verb: string, resource: string): string | undefined {
  const sub = resource.replace(/^conversations\//u, '');
  if (resource === 'sessions') {
    return 'a ClusterRoleBinding to polychrome-session-admin';
  }
  if (resource === 'personaroles') {
    return 'a ClusterRoleBinding to polychrome-persona-admin';
  }
  if (resource === 'personapaymentpolicies') {
    return 'a ClusterRoleBinding to polychrome-persona-payment-admin';
  }
  if (verb === 'get' && (sub === 'transcript' || sub === 'log' || sub === 'memory')) {
    return 'a RoleBinding to polychrome-conversation-reader (or edit) in the namespace; view shows no conversation content';
  }
  if (
    (verb === 'create' && (sub === 'messages' || sub === 'questions')) ||
    (verb === 'delete' && sub === 'memory')
  ) {
    return 'a RoleBinding to polychrome-conversation-user (or edit) in the namespace';
  }
  if (resource.startsWith('conversations/')) {
    return 'a RoleBinding to polychrome-conversation-admin (or admin) in the namespace';
  }
  return undefined;
}

/**
 * What to ask for after kube-apiserver's Forbidden message (`User "alice" cannot create
 * resource "conversations/approvals" in API group "api.polychrome.dev" ...`), or undefined
 * when the message names no such grant.
 */
export function forbiddenHint(message: string): string | undefined {
  const match = /cannot (\w+) resource "([^"]+)" in API group "api\.polychrome\.dev"/u.exec(
    message,
  );
  if (match === null) return undefined;
  const role = roleFor(match[1] ?? '', match[2] ?? '');
  return role === undefined
    ? undefined
    : `ask your cluster admin for ${role} (docs/kubectl.md, "RBAC")`;
}
