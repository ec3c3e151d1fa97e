import type { ErrorDetails } from './errors';
import { StateCallError } from './state-call-errors';

/**
 * A persona change refused because the persona moved on (`conflict`, gRPC ABORTED).
 * `version` is its current version: read it again and retry.
 */
export class RecordConflictError extends StateCallError {
  override readonly name: string = 'RecordConflictError';
  readonly version: number;

  constructor(
    message: string,
    options: {
      method: string;
      grpcStatus: number;
      version: number;
      details?: ErrorDetails;
      cause?: unknown;
    },
  ) {
    super('conflict', message, { ...options, fromServer: true });
    this.version = options.version;
  }
}

/**
 * `error` as a {@link RecordConflictError} when it is a server conflict naming the current
 * version; unchanged otherwise.
 */
export function recordsErrorOf(error: unknown): unknown {
  if (
    error instanceof StateCallError &&
    error.fromServer &&
    error.code === 'conflict' &&
    typeof error.details.version === 'number'
  ) {
    return new RecordConflictError(error.message, {
      method: error.method,
      grpcStatus: error.grpcStatus,
      version: error.details.version,
      details: error.details,
      cause: error,
    });
  }
  return error;
}
