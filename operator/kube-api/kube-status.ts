/**
 * The Kubernetes door's errors as Kubernetes clients read them: a `Status` object
 * (kubectl prints its `reason` and `message`), from the public API's error answer.
 */
import { KUBE_API_GROUP, KUBE_RESOURCE } from './kube-routes';

/** The `reason` of a Kubernetes Status for an HTTP status (what kubectl prints first). */
const STATUS_REASONS: Readonly<Record<number, string>> = {
  400: 'BadRequest',
  401: 'Unauthorized',
  403: 'Forbidden',
  404: 'NotFound',
  405: 'MethodNotAllowed',
  409: 'Conflict',
  410: 'Gone',
  412: 'Conflict',
  413: 'RequestEntityTooLarge',
  415: 'UnsupportedMediaType',
  429: 'TooManyRequests',
  500: 'InternalError',
  503: 'ServiceUnavailable',
  504: 'Timeout',
};

/**
 * An error as the `metav1.Status` Kubernetes clients expect from an API server: kubectl
 * prints its message (`Error from server (Forbidden): ...`). The Polychrome error code and
 * details ride in `details.causes`, so scripts can still tell codes apart.
 */
export function kubeStatusBody(
  httpStatus: number,
  error: { code: string; message: string; details?: Readonly<Record<string, unknown>> },
): object {
  return {
    kind: 'Status',
    apiVersion: 'v1',
    metadata: {},
    status: 'Failure',
    message: error.message,
    reason: STATUS_REASONS[httpStatus] ?? (httpStatus >= 500 ? 'InternalError' : 'BadRequest'),
    details: {
      group: KUBE_API_GROUP,
      kind: KUBE_RESOURCE,
      causes: [{ reason: error.code, message: error.message }],
      ...(error.details === undefined ? {} : { polychrome: error.details }),
    },
    code: httpStatus,
  };
}
