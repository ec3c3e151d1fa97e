/**
 * One error type for the whole system. A code from a closed set says what kind of failure
 * it is; the message is written for the person who must act (what failed, on which object,
 * what to do); `details` carries structured fields (ids, the current head, ...). Stacks,
 * hosts and secrets never go in the message: they reach the log through `cause`.
 */
export const ErrorCode = {
  InvalidArgument: 'invalid_argument',
  NotFound: 'not_found',
  AlreadyExists: 'already_exists',
  Conflict: 'conflict',
  FailedPrecondition: 'failed_precondition',
  /**
   * A writer's fencing token is lower than one the state plane already accepted for the
   * partition: a newer lease holder has written, so this writer lost the lease and must
   * stop (not retry at the new head, as after a `conflict`).
   */
  Fenced: 'fenced',
  Unauthenticated: 'unauthenticated',
  PermissionDenied: 'permission_denied',
  ResourceExhausted: 'resource_exhausted',
  Unavailable: 'unavailable',
  DeadlineExceeded: 'deadline_exceeded',
  Cancelled: 'cancelled',
  DataLoss: 'data_loss',
  Internal: 'internal',
} as const;
export type ErrorCode = (typeof ErrorCode)[keyof typeof ErrorCode];

/** gRPC status numbers (grpc-js `Status`), listed here so common/ imports no I/O module. */
export const GrpcStatus = {
  OK: 0,
  CANCELLED: 1,
  UNKNOWN: 2,
  INVALID_ARGUMENT: 3,
  DEADLINE_EXCEEDED: 4,
  NOT_FOUND: 5,
  ALREADY_EXISTS: 6,
  PERMISSION_DENIED: 7,
  RESOURCE_EXHAUSTED: 8,
  FAILED_PRECONDITION: 9,
  ABORTED: 10,
  OUT_OF_RANGE: 11,
  UNIMPLEMENTED: 12,
  INTERNAL: 13,
  UNAVAILABLE: 14,
  DATA_LOSS: 15,
  UNAUTHENTICATED: 16,
} as const;
export type GrpcStatus = (typeof GrpcStatus)[keyof typeof GrpcStatus];

/** One row of {@link errorStatus}: how a code crosses each wire, and whether to retry it. */
export interface ErrorStatusRow {
  readonly grpc: GrpcStatus;
  readonly http: number;
  /**
   * Whether a client may send the same request again, after a wait that grows with each
   * try, and expect it may succeed: the failure was in the way or the server (not in the
   * request, the caller's rights or the object's state), so time alone can change it. A
   * retry is as safe as the request is idempotent (an idempotency key, a read, a turn
   * re-dispatched from the journal); every retry loop here is bounded.
   */
  readonly retryable: boolean;
}

/**
 * The one table from code to wire status. The gRPC servers, the HTTP API and SSE all use
 * it; `errors.test.ts` pins every row. Two codes share a gRPC status only where the
 * Polychrome error code in the metadata tells them apart (`fenced` and
 * `failed_precondition`); a bare status maps back to the first row that has it.
 *
 * `retryable` is what {@link isRetryable} answers, and the only place that rule is
 * written. Not retryable: a request that is wrong, refused, or whose precondition fails
 * (a retry gets the same answer until someone acts); `conflict` (read the current state
 * first, then send what still applies); `fenced` (stop writing); `cancelled` (the caller
 * stopped it: a retry would overrule them); `data_loss` (a damaged journal does not heal
 * by waiting).
 */
export const errorStatus: Readonly<Record<ErrorCode, ErrorStatusRow>> = {
  invalid_argument: { grpc: GrpcStatus.INVALID_ARGUMENT, http: 400, retryable: false },
  not_found: { grpc: GrpcStatus.NOT_FOUND, http: 404, retryable: false },
  already_exists: { grpc: GrpcStatus.ALREADY_EXISTS, http: 409, retryable: false },
  conflict: { grpc: GrpcStatus.ABORTED, http: 409, retryable: false },
  failed_precondition: { grpc: GrpcStatus.FAILED_PRECONDITION, http: 412, retryable: false },
  // FAILED_PRECONDITION: gRPC's code for "do not retry until the state is fixed", here
  // until the writer holds the lease again. The metadata code tells it from the row above,
  // which a bare status maps back to.
  fenced: { grpc: GrpcStatus.FAILED_PRECONDITION, http: 409, retryable: false },
  unauthenticated: { grpc: GrpcStatus.UNAUTHENTICATED, http: 401, retryable: false },
  permission_denied: { grpc: GrpcStatus.PERMISSION_DENIED, http: 403, retryable: false },
  // A limit or an overloaded model refused the request before it did anything: the same
  // request succeeds once the limit frees (429 says when, in Retry-After). The 413 for a
  // body too large is a protocol answer outside this table (docs/api.md): a caller that
  // can tell it apart (the CLI) does not retry it.
  resource_exhausted: { grpc: GrpcStatus.RESOURCE_EXHAUSTED, http: 429, retryable: true },
  unavailable: { grpc: GrpcStatus.UNAVAILABLE, http: 503, retryable: true },
  deadline_exceeded: { grpc: GrpcStatus.DEADLINE_EXCEEDED, http: 504, retryable: true },
  cancelled: { grpc: GrpcStatus.CANCELLED, http: 499, retryable: false },
  data_loss: { grpc: GrpcStatus.DATA_LOSS, http: 500, retryable: false },
  // A fault the server did not expect. Often one that passes: a peer killed mid-call
  // reaches grpc-js as INTERNAL, a harness's crash is `internal`. A retry is as safe as
  // after `unavailable` (the outcome is as unknown), and a turn the harness keeps failing
  // must use up its attempts and settle, not stay an orphan (operator/turns/plan-settle.ts).
  internal: { grpc: GrpcStatus.INTERNAL, http: 500, retryable: true },
};

/** Structured, JSON-safe facts about an error (ids, heads, field names). */
export type ErrorDetails = Readonly<Record<string, string | number | boolean | null>>;

/**
 * The base error. Subclass only when callers need more fields than `details`.
 *
 * @example
 * throw new AppError('conflict', 'conv-1: head moved from 4 to 6; read the journal and retry', {
 *   details: { partition: 'conv-1', expectedHead: 4, head: 6 },
 * });
 */
export class AppError extends Error {
  override readonly name: string = 'AppError';
  readonly code: ErrorCode;
  readonly details: ErrorDetails;

  constructor(
    code: ErrorCode,
    message: string,
    options: { details?: ErrorDetails; cause?: unknown } = {},
  ) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.code = code;
    this.details = options.details ?? {};
  }

  /** The body that crosses the wire: code, message and details, never a stack or cause. */
  toJSON(): { code: ErrorCode; message: string; details: ErrorDetails } {
    return { code: this.code, message: this.message, details: this.details };
  }
}

/** True for an AppError, whichever realm or subclass it comes from. */
export function isAppError(value: unknown): value is AppError {
  return value instanceof AppError;
}

const codes = new Set<string>(Object.values(ErrorCode));

/** True when `value` names one of the closed set of error codes. */
export function isErrorCode(value: unknown): value is ErrorCode {
  return typeof value === 'string' && codes.has(value);
}

/** The code for a gRPC status received from a peer (UNKNOWN and the rest map to internal). */
export function errorCodeFromGrpc(status: number): ErrorCode {
  for (const [code, row] of Object.entries(errorStatus)) {
    if (row.grpc === status && isErrorCode(code)) return code;
  }
  return ErrorCode.Internal;
}

/**
 * Whether `error` is worth the same request again, after a wait: the `retryable` column of
 * {@link errorStatus} for its code. Anything that is not an AppError is an unexpected fault
 * and counts as `internal`, as the servers answer it (a dropped connection reaches a reader
 * as a plain Error). Callers never restate this rule; a caller that knows more about one
 * answer (the CLI: a 413 body too large) narrows it, never widens it.
 */
export function isRetryable(error: unknown): boolean {
  return errorStatus[isAppError(error) ? error.code : ErrorCode.Internal].retryable;
}
