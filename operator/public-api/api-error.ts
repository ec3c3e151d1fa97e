import {
  AppError,
  errorStatus,
  isAppError,
  isErrorCode,
  type ErrorCode,
  type ErrorDetails,
} from '../../common/errors';
import { StateCallError } from '../../common/state-call-errors';

/**
 * An error the API itself raises about the HTTP exchange. Most carry only a code, whose
 * status comes from the one table (`errorStatus`); a few protocol answers have no row of
 * their own there (405 wrong method, 413 body too large, 415 not JSON) and set `httpStatus`
 * with the nearest code. `headers` go on the answer (`Allow`, `WWW-Authenticate`).
 */
export class ApiError extends AppError {
  override readonly name: string = 'ApiError';
  readonly httpStatus: number;
  readonly headers: Readonly<Record<string, string>>;

  constructor(
    code: ErrorCode,
    message: string,
    options: {
      details?: ErrorDetails;
      httpStatus?: number;
      headers?: Readonly<Record<string, string>>;
      cause?: unknown;
    } = {},
  ) {
    super(code, message, { details: options.details, cause: options.cause });
    this.httpStatus = options.httpStatus ?? errorStatus[code].http;
    this.headers = options.headers ?? {};
  }
}

/** The JSON body of every error answer. `details` is absent when there are none. */
export interface ErrorBody {
  readonly error: {
    readonly code: ErrorCode;
    readonly message: string;
    readonly details?: ErrorDetails;
  };
}

/** How an error is answered and logged. */
export interface ErrorAnswer {
  readonly status: number;
  readonly body: ErrorBody;
  readonly headers: Readonly<Record<string, string>>;
  /**
   * True when the failure is ours (5xx other than `unavailable` and `deadline_exceeded`,
   * which a retry may cure): log it at error with its cause. Client mistakes and expected
   * refusals are only counted in the request log.
   */
  readonly isServerFault: boolean;
}

/** Codes whose original message may name hosts or internals: answered with a fixed text. */
const OPAQUE_CODES: ReadonlySet<ErrorCode> = new Set(['internal', 'data_loss']);

const CHALLENGE = 'Bearer realm="polychrome"';

function bodyOf(code: ErrorCode, message: string, details: ErrorDetails): ErrorBody {
  return Object.keys(details).length === 0
    ? { error: { code, message } }
    : { error: { code, message, details } };
}

/**
 * The answer for anything a handler threw. AppErrors keep their code, message and details
 * (they are written for users), except that:
 *   - `internal` and `data_loss`, and state-plane transport failures (their messages name
 *     the state plane's address), get a fixed message that points at the request id;
 *   - `unauthenticated` gets the `WWW-Authenticate: Bearer` challenge;
 *   - `unavailable` gets `Retry-After: 1`.
 * Anything that is not an AppError is `internal`.
 *
 * @param requestId quoted in opaque messages so an operator can find the log line.
 */
export function errorAnswer(error: unknown, requestId: string): ErrorAnswer {
  if (!isAppError(error)) {
    return {
      status: 500,
      body: bodyOf('internal', opaqueMessage('internal', requestId), {}),
      headers: {},
      isServerFault: true,
    };
  }
  const code = error.code;
  const status = error instanceof ApiError ? error.httpStatus : errorStatus[code].http;
  const transport = error instanceof StateCallError && !error.fromServer;
  const opaque = OPAQUE_CODES.has(code) || transport;
  const message = opaque ? opaqueMessage(code, requestId) : error.message;
  const details = opaque ? {} : error.details;
  const headers: Record<string, string> = error instanceof ApiError ? { ...error.headers } : {};
  if (code === 'unauthenticated') headers['www-authenticate'] ??= CHALLENGE;
  if (code === 'unavailable') headers['retry-after'] ??= '1';
  return {
    status,
    body: bodyOf(code, message, details),
    headers,
    isServerFault: status >= 500 && code !== 'unavailable' && code !== 'deadline_exceeded',
  };
}

function opaqueMessage(code: ErrorCode, requestId: string): string {
  switch (code) {
    case 'unavailable':
      return (
        'a backend of the control plane cannot be reached right now; retry shortly ' +
        `(with the same idempotency key for a message); request id ${requestId}`
      );
    case 'deadline_exceeded':
      return `a backend of the control plane did not answer in time; retry shortly; request id ${requestId}`;
    default:
      return (
        'the control plane failed to handle this request; retry, and if it persists report ' +
        `request id ${requestId} to the operator (the control plane log has the cause)`
      );
  }
}

/** The refusal of an export or a repair by a control plane started without forensics. */
export function noForensics(): ApiError {
  return new ApiError(
    'unavailable',
    'this control plane serves no export or repair (it was started without a forensics service)',
  );
}

/** The `WWW-Authenticate` value for a request without usable credentials. */
export function bearerChallenge(error?: 'invalid_request' | 'invalid_token'): string {
  return error === undefined ? CHALLENGE : `${CHALLENGE}, error="${error}"`;
}

/**
 * An answer in the {@link ErrorBody} shape (another replica's, relayed) as an error here,
 * with its status, code, message and details (plus `details`), so a listener that answers in another shape (the
 * Kubernetes door's Status) can answer it. A body that is not that shape gives `internal`
 * with `fallback` as the message.
 */
export function errorOfAnswer(
  status: number,
  text: string,
  fallback: string,
  details: ErrorDetails,
): ApiError {
  let code: ErrorCode = 'internal';
  let message = fallback;
  let sent: ErrorDetails = {};
  try {
    const parsed: unknown = JSON.parse(text);
    const error: unknown =
      typeof parsed === 'object' && parsed !== null ? Reflect.get(parsed, 'error') : undefined;
    const c: unknown =
      typeof error === 'object' && error !== null ? Reflect.get(error, 'code') : undefined;
    const m: unknown =
      typeof error === 'object' && error !== null ? Reflect.get(error, 'message') : undefined;
    const d: unknown =
      typeof error === 'object' && error !== null ? Reflect.get(error, 'details') : undefined;
    if (isErrorCode(c)) code = c;
    if (typeof m === 'string') message = m;
    if (typeof d === 'object' && d !== null && !Array.isArray(d)) sent = primitives(d);
  } catch {
    // Not JSON: the status and the fallback say what is known.
  }
  return new ApiError(code, message, { details: { ...sent, ...details }, httpStatus: status });
}

/** The entries of `value` whose values a detail may hold (text, numbers, booleans, null). */
function primitives(value: object): ErrorDetails {
  return Object.fromEntries(
    Object.entries(value).filter(
      ([, v]) =>
        v === null || typeof v === 'string' || typeof v === 'number' || typeof v === 'boolean',
    ),
  );
}
