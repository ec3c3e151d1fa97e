import { describe, expect, it } from '@jest/globals';
import {
  AppError,
  ErrorCode,
  errorCodeFromGrpc,
  errorStatus,
  GrpcStatus,
  isRetryable,
} from './errors';

describe('errorStatus', () => {
  // Pinned row by row: changing a mapping changes what clients see, so it must be deliberate.
  // The retry column is what every retry loop asks (isRetryable): the control plane's
  // journal follows and turn attempts, the harness's failed turns, the CLI's reconnects.
  it.each([
    ['invalid_argument', 3, 400, false],
    ['not_found', 5, 404, false],
    ['already_exists', 6, 409, false],
    ['conflict', 10, 409, false],
    ['failed_precondition', 9, 412, false],
    ['fenced', 9, 409, false],
    ['unauthenticated', 16, 401, false],
    ['permission_denied', 7, 403, false],
    ['resource_exhausted', 8, 429, true],
    ['unavailable', 14, 503, true],
    ['deadline_exceeded', 4, 504, true],
    ['cancelled', 1, 499, false],
    ['data_loss', 15, 500, false],
    ['internal', 13, 500, true],
  ] as const)('%s maps to gRPC %d and HTTP %d; retryable: %s', (code, grpc, http, retryable) => {
    expect(errorStatus[code]).toEqual({ grpc, http, retryable });
    expect(isRetryable(new AppError(code, 'x'))).toBe(retryable);
  });

  it('has a row for every code and no other', () => {
    expect(Object.keys(errorStatus).sort()).toEqual(Object.values(ErrorCode).sort());
  });

  it('maps every gRPC status back to the code that produced it', () => {
    // `fenced` shares FAILED_PRECONDITION; only the metadata code carries it.
    for (const code of Object.values(ErrorCode).filter((c) => c !== 'fenced')) {
      expect(errorCodeFromGrpc(errorStatus[code].grpc)).toBe(code);
    }
    expect(errorCodeFromGrpc(GrpcStatus.UNKNOWN)).toBe('internal');
  });

  it('maps a bare FAILED_PRECONDITION to failed_precondition, never to fenced', () => {
    // A harness that is busy answers FAILED_PRECONDITION; reading it as `fenced` would
    // make the coordinator treat a busy harness as a lost lease.
    expect(errorCodeFromGrpc(GrpcStatus.FAILED_PRECONDITION)).toBe('failed_precondition');
  });

  it('shares a gRPC status between two codes only for fenced and failed_precondition', () => {
    const byStatus = new Map<number, string[]>();
    for (const code of Object.values(ErrorCode)) {
      const status = errorStatus[code].grpc;
      byStatus.set(status, [...(byStatus.get(status) ?? []), code]);
    }
    const shared = [...byStatus.values()].filter((codes) => codes.length > 1);
    expect(shared).toEqual([['failed_precondition', 'fenced']]);
  });
});

describe('isRetryable', () => {
  it('reads a subclass by its code', () => {
    class LimitError extends AppError {}
    expect(isRetryable(new LimitError('resource_exhausted', 'slow down'))).toBe(true);
    expect(isRetryable(new LimitError('permission_denied', 'no'))).toBe(false);
  });

  it('counts anything that is not an AppError as internal: an unexpected fault', () => {
    // What a reader sees when a connection drops mid-body: fetch's TypeError, not ours.
    expect(isRetryable(new TypeError('terminated'))).toBe(errorStatus.internal.retryable);
    expect(isRetryable('a string')).toBe(errorStatus.internal.retryable);
    expect(isRetryable(undefined)).toBe(errorStatus.internal.retryable);
  });
});

describe('AppError', () => {
  it('serializes code, message and details but never the cause', () => {
    const err = new AppError('conflict', 'head moved', {
      details: { head: 6 },
      cause: new Error('secret host db-0.internal'),
    });
    expect(JSON.stringify(err)).toBe(
      '{"code":"conflict","message":"head moved","details":{"head":6}}',
    );
    expect(err.cause).toBeInstanceOf(Error);
  });
});
