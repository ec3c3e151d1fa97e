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
    for (const code of Object.values(ErrorCode)) {
      expect(errorCodeFromGrpc(errorStatus[code].grpc)).toBe(code);
    }
    expect(errorCodeFromGrpc(GrpcStatus.UNKNOWN)).toBe('internal');
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
