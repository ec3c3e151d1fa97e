import { describe, expect, it } from '@jest/globals';
import { AppError, ErrorCode, errorCodeFromGrpc, errorStatus, GrpcStatus } from './errors';

describe('errorStatus', () => {
  // Pinned row by row: changing a mapping changes what clients see, so it must be deliberate.
  it.each([
    ['invalid_argument', 3, 400],
    ['not_found', 5, 404],
    ['already_exists', 6, 409],
    ['conflict', 10, 409],
    ['failed_precondition', 9, 412],
    ['fenced', 9, 409],
    ['unauthenticated', 16, 401],
    ['permission_denied', 7, 403],
    ['resource_exhausted', 8, 429],
    ['unavailable', 14, 503],
    ['deadline_exceeded', 4, 504],
    ['cancelled', 1, 499],
    ['data_loss', 15, 500],
    ['internal', 13, 500],
  ] as const)('%s maps to gRPC %d and HTTP %d', (code, grpc, http) => {
    expect(errorStatus[code]).toEqual({ grpc, http });
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
