/**
 * The Kubernetes door's gate (docs/kube-api.md): who is calling (the front proxy's
 * certificate and headers, front-proxy.ts), may they (a SubjectAccessReview for exactly
 * the verb, subresource, namespace and name, as defense in depth behind kube-apiserver's
 * own RBAC check), and which Conversation the name means now (its uid, since names can be
 * reused). The answer is a {@link Caller} whose grant names that one conversation and that
 * one subresource; the turn code lets it do that and nothing else.
 */
import { AppError } from '../../common/errors';
import type { Logger } from 'pino';
import type { Caller } from '../turns/turn-service';
import {
  authenticateFrontProxy,
  kubernetesIdentity,
  parseRequestHeaderConfig,
  type DistinctHeaders,
  type KubeUser,
  type PeerCertificate,
  type RequestHeaderConfig,
} from './front-proxy';
import {
  KUBE_API_GROUP,
  KUBE_PERSONA_PAYMENT_POLICIES,
  KUBE_PERSONA_ROLES,
  KUBE_RESOURCE,
  KUBE_SESSIONS,
} from './kube-routes';
import type { KubeSubresource } from './kube-subresources';

/** The ClusterRole that grants each cluster-scoped resource (config/kube-api). */
const CLUSTER_ROLE_OF: Readonly<Record<string, string>> = {
  [KUBE_SESSIONS.name]: 'polychrome-session-admin',
  [KUBE_PERSONA_ROLES.name]: 'polychrome-persona-admin',
  [KUBE_PERSONA_PAYMENT_POLICIES.name]: 'polychrome-persona-payment-admin',
};

/** The resource attributes of one SubjectAccessReview. */
export interface AccessReviewRequest {
  readonly user: KubeUser;
  /** '' for a cluster-scoped resource. */
  readonly namespace: string;
  /** '' when the request names no object (a create). */
  readonly name: string;
  readonly verb: string;
  /** '' for the resource itself. */
  readonly subresource: string;
  /** @default conversations */
  readonly resource?: string;
}

/** What the door needs from Kubernetes; kube-door-ports.ts adapts client-node. */
export interface KubeDoorPorts {
  /** The data of kube-system/extension-apiserver-authentication; undefined when absent. */
  readAuthenticationConfig(
    signal: AbortSignal,
  ): Promise<Readonly<Record<string, string>> | undefined>;
  /** Asks kube-apiserver's authorizer (authorization.k8s.io/v1 SubjectAccessReview). */
  review(
    request: AccessReviewRequest,
    signal: AbortSignal,
  ): Promise<{ allowed: boolean; reason: string }>;
  /** The uid of the Conversation `namespace/name` (the informer cache), if it exists. */
  conversationUid(namespace: string, name: string): string | undefined;
}

export interface KubeDoorOptions {
  readonly ports: KubeDoorPorts;
  readonly logger: Logger;
  /** How often the front-proxy settings are read again (CA rotation). @default 60000 */
  readonly refreshMs?: number;
}

/** A request the door let in: who, as a Caller for the turn code. */
export interface KubeAdmission {
  readonly user: KubeUser;
  readonly caller: Caller;
}

export class KubeDoor {
  private config: RequestHeaderConfig | undefined;
  private timer: NodeJS.Timeout | undefined;
  private readonly listeners = new Set<(config: RequestHeaderConfig) => void>();

  constructor(private readonly options: KubeDoorOptions) {}

  /**
   * Reads the front-proxy settings; then again every `refreshMs`, calling `onChange` when
   * the CA changed.
   *
   * @throws AppError `failed_precondition` when kube-apiserver publishes none (the
   *   aggregation layer is not configured): the door cannot tell the proxy from anyone.
   */
  async start(signal: AbortSignal): Promise<RequestHeaderConfig> {
    const config = parseRequestHeaderConfig(
      await this.options.ports.readAuthenticationConfig(signal),
    );
    this.config = config;
    this.timer = setInterval(() => void this.refresh(), this.options.refreshMs ?? 60_000);
    this.timer.unref();
    return config;
  }

  /** Calls `listener` with every new front-proxy setting (for the TLS context). */
  onConfigChange(listener: (config: RequestHeaderConfig) => void): void {
    this.listeners.add(listener);
  }

  stop(): void {
    if (this.timer !== undefined) clearInterval(this.timer);
    this.timer = undefined;
  }

  private async refresh(): Promise<void> {
    try {
      const next = parseRequestHeaderConfig(
        await this.options.ports.readAuthenticationConfig(AbortSignal.timeout(10_000)),
      );
      const changed = JSON.stringify(next) !== JSON.stringify(this.config);
      this.config = next;
      if (changed) for (const listener of this.listeners) listener(next);
    } catch (err: unknown) {
      // Keep the settings we have: a transient read failure must not lock everyone out.
      this.options.logger.warn({ err }, 'kube door: could not re-read the front-proxy settings');
    }
  }

  private current(): RequestHeaderConfig {
    if (this.config === undefined) {
      throw new AppError('unavailable', 'the Kubernetes door is starting; retry');
    }
    return this.config;
  }

  /**
   * The user of a proxied request.
   *
   * @throws AppError `unauthenticated` (front-proxy.ts).
   */
  authenticate(peer: PeerCertificate, headers: DistinctHeaders): KubeUser {
    return authenticateFrontProxy(this.current(), peer, headers);
  }

  /**
   * Lets `user` run `verb` on the cluster-scoped `resource` (named `name`, or none), or
   * refuses: the same SubjectAccessReview kube-apiserver asked before it proxied.
   *
   * @throws AppError `permission_denied` when the review denies it.
   */
  async admitCluster(
    user: KubeUser,
    target: { resource: string; verb: string; name: string },
    signal: AbortSignal,
  ): Promise<void> {
    const { resource, verb, name } = target;
    const review = await this.options.ports.review(
      { user, namespace: '', name, verb, subresource: '', resource },
      signal,
    );
    if (!review.allowed) {
      throw new AppError(
        'permission_denied',
        `User "${user.username}" cannot ${verb} resource "${resource}" in API group "${KUBE_API_GROUP}" at the cluster scope${review.reason === '' ? '' : `: ${review.reason}`}; ask for a ClusterRoleBinding to ${CLUSTER_ROLE_OF[resource] ?? 'polychrome-session-admin'} (docs/kube-api.md)`,
        { details: { resource, verb, ...(name === '' ? {} : { name }) } },
      );
    }
  }

  /**
   * Lets `user` run `verb` on the namespaced `resource` named `name` of this group (the
   * UI's files, resource `ui`), or refuses: the SubjectAccessReview kube-apiserver asked.
   *
   * @throws AppError `permission_denied` when the review denies it.
   */
  async admitNamespaced(
    user: KubeUser,
    target: { namespace: string; resource: string; verb: string; name: string },
    signal: AbortSignal,
  ): Promise<void> {
    const { namespace, resource, verb, name } = target;
    const review = await this.options.ports.review(
      { user, namespace, name, verb, subresource: '', resource },
      signal,
    );
    if (!review.allowed) {
      throw new AppError(
        'permission_denied',
        `User "${user.username}" cannot ${verb} resource "${resource}" in API group "${KUBE_API_GROUP}" in the namespace "${namespace}"${review.reason === '' ? '' : `: ${review.reason}`}; ask for a RoleBinding to view (or polychrome-conversation-viewer) (docs/ui.md)`,
        { details: { namespace, resource, verb, name } },
      );
    }
  }

  /**
   * Lets `user` run `subresource` on `namespace/name`, or refuses.
   *
   * @throws AppError `permission_denied` when the SubjectAccessReview denies it (the
   *   message names the verb and resource, as kube-apiserver's Forbidden does);
   *   `not_found` when no such Conversation exists.
   */
  async admit(
    user: KubeUser,
    target: { namespace: string; name: string; subresource: KubeSubresource },
    signal: AbortSignal,
  ): Promise<KubeAdmission> {
    const { namespace, name, subresource } = target;
    const review = await this.options.ports.review(
      { user, namespace, name, verb: subresource.verb, subresource: subresource.name },
      signal,
    );
    if (!review.allowed) {
      throw new AppError(
        'permission_denied',
        `User "${user.username}" cannot ${subresource.verb} resource "${KUBE_RESOURCE}/${subresource.name}" in API group "${KUBE_API_GROUP}" in the namespace "${namespace}"${review.reason === '' ? '' : `: ${review.reason}`}; ask for a RoleBinding in the namespace to polychrome-conversation-reader (read), edit (talk) or admin (approve, export); view shows no conversation's content (docs/kube-api.md, "Who may read, post and approve")`,
        { details: { namespace, name, verb: subresource.verb, subresource: subresource.name } },
      );
    }
    const conversationId = this.options.ports.conversationUid(namespace, name);
    if (conversationId === undefined) {
      throw new AppError(
        'not_found',
        `conversations.polychrome.dev "${name}" not found in namespace "${namespace}"`,
        { details: { namespace, name } },
      );
    }
    const identity = kubernetesIdentity(user);
    return {
      user,
      caller: {
        identity,
        identities: [identity],
        personaId: '',
        roles: [],
        sessionId: '',
        kubernetes: {
          conversationId,
          subresource: subresource.name,
          verb: subresource.verb,
          groups: user.groups,
        },
      },
    };
  }
}
