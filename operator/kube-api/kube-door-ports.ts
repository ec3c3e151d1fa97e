/**
 * The Kubernetes door's ports over client-node: the front-proxy ConfigMap, the
 * SubjectAccessReview, and the informer cache for names. The control plane's
 * ServiceAccount needs `system:auth-delegator` (create subjectaccessreviews) and the Role
 * `extension-apiserver-authentication-reader` in kube-system (config/kube-api).
 */
import {
  AuthenticationV1Api,
  AuthorizationV1Api,
  CoreV1Api,
  type KubeConfig,
} from '@kubernetes/client-node';
import { AppError } from '../../common/errors';
import { apiErrorMessage } from '../controller/kube-api-errors';
import { makeKeepAliveApiClient } from '../controller/keep-alive-client';
import { AUTHENTICATION_CONFIG_MAP } from './front-proxy';
import type { AccessReviewRequest, KubeDoorPorts } from './kube-door';
import { KUBE_API_GROUP, KUBE_RESOURCE } from './kube-routes';
import type { ReviewToken } from './service-account-tokens';

export interface KubeDoorPortsOptions {
  readonly kubeConfig: KubeConfig;
  /** One Conversation of the informer cache by namespace and name. */
  readonly cachedByName: (
    namespace: string,
    name: string,
  ) => { readonly metadata?: { readonly uid?: string } } | undefined;
}

/** The door's ports for a control plane in a cluster. */
export function kubeDoorPorts(options: KubeDoorPortsOptions): KubeDoorPorts {
  const core = makeKeepAliveApiClient(options.kubeConfig, CoreV1Api);
  const authorization = makeKeepAliveApiClient(options.kubeConfig, AuthorizationV1Api);
  return {
    async readAuthenticationConfig() {
      try {
        const map = await core.readNamespacedConfigMap(AUTHENTICATION_CONFIG_MAP);
        return map.data;
      } catch (err: unknown) {
        throw new AppError(
          'unavailable',
          `could not read ${AUTHENTICATION_CONFIG_MAP.namespace}/${AUTHENTICATION_CONFIG_MAP.name}: ${apiErrorMessage(err)}; the control plane needs the Role extension-apiserver-authentication-reader in kube-system (config/kube-api)`,
          { cause: err },
        );
      }
    },
    async review(request: AccessReviewRequest) {
      let status: { allowed?: boolean; reason?: string } | undefined;
      try {
        const extra: Record<string, string[]> = {};
        for (const [key, values] of Object.entries(request.user.extra)) extra[key] = [...values];
        const review = await authorization.createSubjectAccessReview({
          body: {
            apiVersion: 'authorization.k8s.io/v1',
            kind: 'SubjectAccessReview',
            spec: {
              user: request.user.username,
              groups: [...request.user.groups],
              extra,
              resourceAttributes: {
                group: KUBE_API_GROUP,
                resource: request.resource ?? KUBE_RESOURCE,
                verb: request.verb,
                ...(request.subresource === '' ? {} : { subresource: request.subresource }),
                ...(request.namespace === '' ? {} : { namespace: request.namespace }),
                ...(request.name === '' ? {} : { name: request.name }),
              },
            },
          },
        });
        status = review.status;
      } catch (err: unknown) {
        throw new AppError(
          'unavailable',
          `could not ask kube-apiserver whether ${request.user.username} may ${request.verb} ${request.resource ?? KUBE_RESOURCE}${request.subresource === '' ? '' : `/${request.subresource}`}: ${apiErrorMessage(err)}; the control plane needs the ClusterRole system:auth-delegator (config/kube-api)`,
          { cause: err },
        );
      }
      return { allowed: status?.allowed === true, reason: status?.reason ?? '' };
    },
    conversationUid(namespace, name) {
      return options.cachedByName(namespace, name)?.metadata?.uid;
    },
  };
}

/**
 * TokenReviews over client-node, for ServiceAccount tokens on the public API
 * (service-account-tokens.ts; system:auth-delegator allows them).
 */
export function tokenReviewer(kubeConfig: KubeConfig): ReviewToken {
  const authentication = makeKeepAliveApiClient(kubeConfig, AuthenticationV1Api);
  return async (token, audiences) => {
    try {
      const review = await authentication.createTokenReview({
        body: {
          apiVersion: 'authentication.k8s.io/v1',
          kind: 'TokenReview',
          spec: { token, audiences: [...audiences] },
        },
      });
      const status = review.status;
      return {
        authenticated: status?.authenticated === true,
        username: status?.user?.username ?? '',
        audiences: status?.audiences ?? [],
        error: status?.error ?? '',
      };
    } catch (err: unknown) {
      throw new AppError(
        'unavailable',
        `could not ask kube-apiserver to review a ServiceAccount token: ${apiErrorMessage(err)}; the control plane needs the ClusterRole system:auth-delegator (config/kube-api)`,
        { cause: err },
      );
    }
  };
}
