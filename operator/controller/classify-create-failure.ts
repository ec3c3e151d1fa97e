/**
 * Classifies a failed create of a sandbox child (today: the harness pod) into the few
 * causes a person can act on, so `report` can say what to do instead of repeating the API
 * server's text under `SandboxPending`. Pure: it reads the Status fields the adapter
 * extracted (kube-client.ts `apiFailureOf`), never the client library's error class.
 */

/** The parts of a failed API call's `metav1.Status` the reconciler decides on. */
export interface ApiFailure {
  /** HTTP status (`Status.code`), when the call reached the API server. */
  readonly code?: number;
  /** `Status.reason` (`Forbidden`, `NotFound`, ...), when the body carried one. */
  readonly reason?: string;
  /** `Status.message`, else the error's own message. */
  readonly message: string;
}

/** Kinds of create failure the reconciler reports on their own. */
export const CreateFailureKind = {
  /** Admission rejected the pod: the RuntimeClass its spec names does not exist. */
  RuntimeClassMissing: 'runtime-class-missing',
  /** Anything else: reported as is and retried with backoff. */
  Other: 'other',
} as const;
export type CreateFailureKind = (typeof CreateFailureKind)[keyof typeof CreateFailureKind];

/** The outcome of {@link classifyCreateFailure}. */
export type CreateFailure =
  | { readonly kind: 'runtime-class-missing'; readonly runtimeClassName: string }
  | { readonly kind: 'other' };

/**
 * The RuntimeClass admission plugin's rejection (kubernetes
 * plugin/pkg/admission/runtimeclass): `admission.NewForbidden` wraps
 * `pod rejected: RuntimeClass "<name>" not found`, so the Status is code 403, reason
 * Forbidden, message `pods "<pod>" is forbidden: pod rejected: RuntimeClass "<name>" not found`.
 * The Status has no structured field naming the RuntimeClass; the name comes from here.
 */
const RUNTIME_CLASS_NOT_FOUND = /\bpod rejected: RuntimeClass "([^"]+)" not found\b/u;

/**
 * Classifies a failed pod create. A RuntimeClass rejection needs all of: HTTP 403,
 * reason `Forbidden`, the admission plugin's message, and (when the pod spec names one)
 * that message naming the same RuntimeClass; a 403 from RBAC or a webhook stays `other`.
 *
 * @param failure - the Status of the failed create.
 * @param runtimeClassName - `spec.runtimeClassName` of the pod that was rejected, if any.
 */
export function classifyCreateFailure(
  failure: ApiFailure,
  runtimeClassName?: string,
): CreateFailure {
  if (failure.code !== 403 || failure.reason !== 'Forbidden') return { kind: 'other' };
  const named = RUNTIME_CLASS_NOT_FOUND.exec(failure.message)?.[1];
  if (named === undefined) return { kind: 'other' };
  if (runtimeClassName !== undefined && runtimeClassName !== named) return { kind: 'other' };
  return { kind: 'runtime-class-missing', runtimeClassName: named };
}
