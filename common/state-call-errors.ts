import { AppError, type ErrorCode, type ErrorDetails } from './errors';
import { isServiceError, receivedErrorOf } from './grpc-errors';

/*
 * The state plane's errors as its clients see them. Errors cross the wire as
 * common/grpc-errors.ts says (one contract for every gRPC server and client); here they are
 * rebuilt as the state plane's error classes. `fenced` shares FAILED_PRECONDITION with
 * `failed_precondition`; the metadata code tells them apart, and the client rebuilds it as
 * {@link JournalFencedError}.
 */

/**
 * An error the state plane reported, or a failure to reach it, rebuilt on the client
 * side. Kept apart from local errors: `method` names the call, `grpcStatus` the raw status,
 * and `fromServer` tells whether the state plane itself answered (its status carried a
 * Polychrome error code) or the call failed on the way (no connection, refused TLS
 * handshake, deadline).
 */
export class StateCallError extends AppError {
  override readonly name: string = 'StateCallError';
  readonly method: string;
  readonly grpcStatus: number;
  readonly fromServer: boolean;

  constructor(
    code: ErrorCode,
    message: string,
    options: {
      method: string;
      grpcStatus: number;
      fromServer: boolean;
      details?: ErrorDetails;
      cause?: unknown;
    },
  ) {
    super(code, message, { details: options.details, cause: options.cause });
    this.method = options.method;
    this.grpcStatus = options.grpcStatus;
    this.fromServer = options.fromServer;
  }
}

/**
 * The head moved under a compare-and-swap append (`conflict`). Callers need the current
 * head to read what they missed and retry, so it is a field, not only text.
 */
export class JournalConflictError extends StateCallError {
  override readonly name: string = 'JournalConflictError';
  /** The partition's head when the append was refused. */
  readonly head: number;

  constructor(
    message: string,
    options: {
      method: string;
      grpcStatus: number;
      head: number;
      details?: ErrorDetails;
      cause?: unknown;
    },
  ) {
    super('conflict', message, { ...options, fromServer: true });
    this.head = options.head;
  }
}

/**
 * The state plane refused an append whose fencing token is lower than the highest it has
 * accepted for the partition (`fenced`): a newer holder of the conversation's lease has
 * written, so this writer lost the lease. Unlike a {@link JournalConflictError}, reading
 * the journal and retrying at the new head is wrong: stop writing for the conversation
 * until its lease is held again. Nothing of the append was written.
 */
export class JournalFencedError extends StateCallError {
  override readonly name: string = 'JournalFencedError';
  /** The token the refused append carried, as the server reported it. */
  readonly fencingToken: number | undefined;
  /** The highest token the partition has accepted, as the server reported it. */
  readonly highestFencingToken: number | undefined;

  constructor(
    message: string,
    options: {
      method: string;
      grpcStatus: number;
      details?: ErrorDetails;
      cause?: unknown;
    },
  ) {
    super('fenced', message, { ...options, fromServer: true });
    const token = (field: string): number | undefined => {
      const value = options.details?.[field];
      return typeof value === 'number' && Number.isSafeInteger(value) ? value : undefined;
    };
    this.fencingToken = token('fencingToken');
    this.highestFencingToken = token('highestFencingToken');
  }
}

/**
 * Rebuilds the AppError a state-plane call failed with: a {@link JournalConflictError} for
 * a conflict with a head, a {@link JournalFencedError} for `fenced`, else a
 * {@link StateCallError} with the code the state plane sent (or, when the status came from
 * grpc-js itself, the status's code): common/grpc-errors.ts `receivedErrorOf`. Anything
 * that is not a gRPC status becomes `internal`.
 *
 * @param target names the server in messages about transport failures (its address).
 */
export function stateErrorFromGrpc(error: unknown, method: string, target: string): AppError {
  if (error instanceof StateCallError) return error;
  if (!isServiceError(error)) {
    return new StateCallError(
      'internal',
      `state plane at ${target}: ${method} failed unexpectedly; see the cause`,
      { method, grpcStatus: 2, fromServer: false, cause: error },
    );
  }
  const received = receivedErrorOf(error);
  const { code, details, grpcStatus } = received;
  if (received.fromServer) {
    if (code === 'conflict' && received.head !== undefined) {
      return new JournalConflictError(received.message, {
        method,
        grpcStatus,
        head: received.head,
        details,
        cause: error,
      });
    }
    if (code === 'fenced') {
      return new JournalFencedError(received.message, {
        method,
        grpcStatus,
        details,
        cause: error,
      });
    }
    return new StateCallError(code, received.message, {
      method,
      grpcStatus,
      fromServer: true,
      details,
      cause: error,
    });
  }
  const hint =
    code === 'unavailable'
      ? '; check the address, that the state plane is running, and that this client ' +
        'certificate is signed by the Polychrome CA and trusts the server certificate'
      : '';
  return new StateCallError(
    code,
    `state plane at ${target}: ${method} failed: ${received.message || 'no details'}${hint}`,
    { method, grpcStatus, fromServer: false, cause: error },
  );
}
