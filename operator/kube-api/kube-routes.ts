/**
 * The Kubernetes door's paths: the aggregated API group `api.polychrome.dev/v1alpha1`
 * that kube-apiserver proxies to the control plane (docs/kube-api.md). Discovery documents
 * and per-Conversation subresources,
 *
 *   /apis/api.polychrome.dev/v1alpha1/namespaces/{namespace}/conversations/{name}/{subresource}
 *
 * and a persona's payment policy,
 *
 *   /apis/api.polychrome.dev/v1alpha1/personapaymentpolicies/{personaId}
 *
 * each mapped onto an operation of the public API's route table (routes.ts), so both doors
 * run the same handlers and differ only in how the caller is authenticated and authorized.
 * Pure.
 */
import { Operation } from '../public-api/routes';
import { KUBE_SUBRESOURCES, KubeVerb, type KubeSubresource } from './kube-subresources';

export const KUBE_API_GROUP = 'api.polychrome.dev';
export const KUBE_API_VERSION = 'v1alpha1';
export const KUBE_GROUP_VERSION = `${KUBE_API_GROUP}/${KUBE_API_VERSION}`;
/** The resource the subresources hang off: the Conversation CRD's plural. */
export const KUBE_RESOURCE = 'conversations';

/**
 * The cluster-scoped `sessions` resource (docs/kube-api.md, "Sessions"): POST mints a
 * public-API session token for a persona, DELETE `sessions/{id}` revokes one. Cluster-scoped
 * because a persona's roles reach every namespace: only a ClusterRoleBinding grants it.
 */
export const KUBE_SESSIONS = {
  name: 'sessions',
  kind: 'Session',
  verbs: [KubeVerb.Create, KubeVerb.Delete],
} as const;

/**
 * The cluster-scoped `personaroles` resource (docs/kube-api.md, "Persona roles"): POST
 * sets a persona's roles. RBAC verb `bind` on it, named after a role, is what holding that
 * role means on this door (kube-persona-roles.ts); `bind` is checked, never served.
 */
export const KUBE_PERSONA_ROLES = {
  name: 'personaroles',
  kind: 'PersonaRoles',
  verbs: [KubeVerb.Create],
} as const;

/**
 * The cluster-scoped `personapaymentpolicies` resource (docs/kube-api.md, "Persona payment
 * policies"), named by persona id: POST `personapaymentpolicies/{personaId}` sets the
 * persona's payment policy, GET reads it with its history. Each runs the public API's
 * operation (routes.ts), so RBAC, and the name in it, decides who reaches that rule.
 */
export const KUBE_PERSONA_PAYMENT_POLICIES = {
  name: 'personapaymentpolicies',
  kind: 'PersonaPaymentPolicy',
  verbs: [KubeVerb.Create, KubeVerb.Get],
} as const;

/** The methods `personapaymentpolicies/{personaId}` takes: its RBAC verb and operation. */
export const PERSONA_POLICY_METHODS = {
  POST: { verb: KubeVerb.Create, operation: Operation.SetPersonaPaymentPolicy },
  GET: { verb: KubeVerb.Get, operation: Operation.GetPersonaPaymentPolicy },
} as const;

/**
 * The forensics UI's files (docs/ui.md): `GET namespaces/{namespace}/ui/{file}`.
 * kube-apiserver reads that path as resource `ui`, name `{file}`, verb `get`, so RBAC
 * grants it like any namespaced resource (the viewer ClusterRole does). Not in discovery:
 * it is no API object.
 */
export const KUBE_UI = { resource: 'ui', verb: KubeVerb.Get } as const;

/** `GET /apis`: the group list kube-apiserver's discovery merges. */
export function apiGroupList(): object {
  return { kind: 'APIGroupList', apiVersion: 'v1', groups: [apiGroup()] };
}

/** `GET /apis/api.polychrome.dev`. */
export function apiGroup(): object {
  const version = { groupVersion: KUBE_GROUP_VERSION, version: KUBE_API_VERSION };
  return {
    kind: 'APIGroup',
    apiVersion: 'v1',
    name: KUBE_API_GROUP,
    versions: [version],
    preferredVersion: version,
  };
}

/**
 * `GET /apis/api.polychrome.dev/v1alpha1`, the document the aggregator's availability check
 * fetches: one entry per subresource, each with its verbs.
 */
export function apiResourceList(): object {
  const verbs = new Map<string, Set<KubeVerb>>();
  for (const sub of KUBE_SUBRESOURCES) {
    const set = verbs.get(sub.name) ?? new Set<KubeVerb>();
    set.add(sub.verb);
    verbs.set(sub.name, set);
  }
  return {
    kind: 'APIResourceList',
    apiVersion: 'v1',
    groupVersion: KUBE_GROUP_VERSION,
    resources: [
      ...KUBE_SUBRESOURCES.filter(
        (sub, i) => KUBE_SUBRESOURCES.findIndex((s) => s.name === sub.name) === i,
      ).map((sub) => ({
        name: `${KUBE_RESOURCE}/${sub.name}`,
        singularName: '',
        namespaced: true,
        kind: sub.kind,
        verbs: [...(verbs.get(sub.name) ?? [])],
      })),
      ...[KUBE_SESSIONS, KUBE_PERSONA_ROLES, KUBE_PERSONA_PAYMENT_POLICIES].map((resource) => ({
        name: resource.name,
        singularName: '',
        namespaced: false,
        kind: resource.kind,
        verbs: [...resource.verbs],
      })),
    ],
  };
}

/** The `route` label of a subresource: the path template, with no namespace or name in it. */
export function kubeSubresourceTemplate(subresource: string, perRequest = false): string {
  return `/apis/${KUBE_GROUP_VERSION}/namespaces/{namespace}/${KUBE_RESOURCE}/{name}/${subresource}${perRequest ? '/{requestId}' : ''}`;
}

/**
 * POST `sessions` mints; DELETE `sessions/{id}` revokes the session `id`; POST
 * `personaroles` sets a persona's roles.
 */
export type SessionsAction =
  | { readonly kind: 'create' }
  | { readonly kind: 'revoke'; readonly id: string }
  | { readonly kind: 'set-roles' };

/** What a path on the Kubernetes door is. */
export type KubeRouteMatch =
  | { readonly kind: 'discovery'; readonly body: object }
  | {
      readonly kind: 'subresource';
      readonly namespace: string;
      readonly name: string;
      readonly subresource: KubeSubresource;
      /**
       * The item below the subresource: the pending request of `approvals/{requestId}`,
       * `questions/{requestId}`, the key of `memory/{key}`.
       */
      readonly requestId?: string;
    }
  | {
      /** The cluster-scoped records resources: `sessions` and `personaroles`. */
      readonly kind: 'sessions';
      readonly action: SessionsAction;
    }
  | {
      /** A persona's payment policy: `personapaymentpolicies/{personaId}`. */
      readonly kind: 'persona_policy';
      readonly personaId: string;
      readonly method: keyof typeof PERSONA_POLICY_METHODS;
    }
  | { readonly kind: 'ui'; readonly namespace: string; readonly file: string }
  | { readonly kind: 'method_not_allowed'; readonly allow: readonly string[] }
  | { readonly kind: 'not_found' };

const UI_PATH = new RegExp(
  `^/apis/${KUBE_API_GROUP.replace(/\./gu, '\\.')}/${KUBE_API_VERSION}/namespaces/([^/]+)/${KUBE_UI.resource}/([^/]+)$`,
  'u',
);

/** The route label of the UI's files (no namespace or file name in it). */
export function kubeUiTemplate(): string {
  return `/apis/${KUBE_GROUP_VERSION}/namespaces/{namespace}/${KUBE_UI.resource}/{file}`;
}

const SESSIONS_PATH = new RegExp(
  `^/apis/${KUBE_API_GROUP.replace(/\./gu, '\\.')}/${KUBE_API_VERSION}/${KUBE_SESSIONS.name}(?:/([^/]+))?$`,
  'u',
);

/** The route label of the sessions and personaroles resources (no session id in it). */
export function kubeSessionsTemplate(action: SessionsAction): string {
  if (action.kind === 'set-roles') return `/apis/${KUBE_GROUP_VERSION}/${KUBE_PERSONA_ROLES.name}`;
  return `/apis/${KUBE_GROUP_VERSION}/${KUBE_SESSIONS.name}${action.kind === 'revoke' ? '/{id}' : ''}`;
}

const PERSONA_ROLES_PATH = `/apis/${KUBE_GROUP_VERSION}/${KUBE_PERSONA_ROLES.name}`;

const PERSONA_POLICY_PATH = new RegExp(
  `^/apis/${KUBE_API_GROUP.replace(/\./gu, '\\.')}/${KUBE_API_VERSION}/${KUBE_PERSONA_PAYMENT_POLICIES.name}/([^/]+)$`,
  'u',
);

/** The route label of a persona's payment policy (no persona id in it). */
export function kubePersonaPolicyTemplate(): string {
  return `/apis/${KUBE_GROUP_VERSION}/${KUBE_PERSONA_PAYMENT_POLICIES.name}/{personaId}`;
}

const SUBRESOURCE_PATH = new RegExp(
  `^/apis/${KUBE_API_GROUP.replace(/\./gu, '\\.')}/${KUBE_API_VERSION}/namespaces/([^/]+)/${KUBE_RESOURCE}/([^/]+)/([^/]+)(?:/([^/]+))?$`,
  'u',
);

function decodeSegment(segment: string): string | undefined {
  try {
    return decodeURIComponent(segment);
  } catch {
    return undefined;
  }
}

/** Matches a request on the Kubernetes door. */
export function matchKubeRoute(method: string, path: string): KubeRouteMatch {
  const trimmed = path.length > 1 && path.endsWith('/') ? path.slice(0, -1) : path;
  return (
    matchDiscovery(method, trimmed) ??
    matchSessions(method, trimmed) ??
    matchPersonaPolicy(method, trimmed) ??
    matchUi(method, trimmed) ??
    matchSubresource(method, trimmed)
  );
}

function matchDiscovery(method: string, path: string): KubeRouteMatch | undefined {
  const discovery: Record<string, () => object> = {
    '/apis': apiGroupList,
    [`/apis/${KUBE_API_GROUP}`]: apiGroup,
    [`/apis/${KUBE_GROUP_VERSION}`]: apiResourceList,
  };
  const document = discovery[path];
  if (document === undefined) return undefined;
  return method === 'GET'
    ? { kind: 'discovery', body: document() }
    : { kind: 'method_not_allowed', allow: ['GET'] };
}

/** The `sessions` resource and persona roles. */
function matchSessions(method: string, path: string): KubeRouteMatch | undefined {
  if (path === PERSONA_ROLES_PATH) {
    return method === 'POST'
      ? { kind: 'sessions', action: { kind: 'set-roles' } }
      : { kind: 'method_not_allowed', allow: ['POST'] };
  }
  const session = SESSIONS_PATH.exec(path);
  if (session === null) return undefined;
  if (session[1] === undefined) {
    return method === 'POST'
      ? { kind: 'sessions', action: { kind: 'create' } }
      : { kind: 'method_not_allowed', allow: ['POST'] };
  }
  const id = decodeSegment(session[1]);
  if (id === undefined) return { kind: 'not_found' };
  return method === 'DELETE'
    ? { kind: 'sessions', action: { kind: 'revoke', id } }
    : { kind: 'method_not_allowed', allow: ['DELETE'] };
}

/** A persona's payment policy: POST sets it, GET reads it. */
function matchPersonaPolicy(method: string, path: string): KubeRouteMatch | undefined {
  const policy = PERSONA_POLICY_PATH.exec(path);
  if (policy === null) return undefined;
  const personaId = decodeSegment(policy[1] ?? '');
  if (personaId === undefined) return { kind: 'not_found' };
  return method === 'POST' || method === 'GET'
    ? { kind: 'persona_policy', personaId, method }
    : { kind: 'method_not_allowed', allow: Object.keys(PERSONA_POLICY_METHODS) };
}

function matchUi(method: string, path: string): KubeRouteMatch | undefined {
  const ui = UI_PATH.exec(path);
  if (ui === null) return undefined;
  const namespace = decodeSegment(ui[1] ?? '');
  const file = decodeSegment(ui[2] ?? '');
  if (namespace === undefined || file === undefined) return { kind: 'not_found' };
  return method === 'GET'
    ? { kind: 'ui', namespace, file }
    : { kind: 'method_not_allowed', allow: ['GET'] };
}

/** A Conversation's subresource, per request (`approvals/{id}`) or not. */
function matchSubresource(method: string, path: string): KubeRouteMatch {
  const parts = SUBRESOURCE_PATH.exec(path);
  if (parts === null) return { kind: 'not_found' };
  const namespace = decodeSegment(parts[1] ?? '');
  const name = decodeSegment(parts[2] ?? '');
  const subName = parts[3] ?? '';
  const requestId = parts[4] === undefined ? undefined : decodeSegment(parts[4]);
  const candidates = KUBE_SUBRESOURCES.filter(
    (sub) => sub.name === subName && (sub.perRequest === true) === (parts[4] !== undefined),
  );
  if (
    namespace === undefined ||
    name === undefined ||
    (parts[4] !== undefined && requestId === undefined) ||
    candidates.length === 0
  ) {
    return { kind: 'not_found' };
  }
  const subresource = candidates.find((sub) => sub.method === method);
  if (subresource === undefined) {
    return { kind: 'method_not_allowed', allow: candidates.map((sub) => sub.method) };
  }
  return {
    kind: 'subresource',
    namespace,
    name,
    subresource,
    ...(requestId === undefined ? {} : { requestId }),
  };
}
