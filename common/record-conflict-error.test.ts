import { describe, expect, it } from '@jest/globals';

import { AppError } from './errors';
import { RecordConflictError, recordsErrorOf } from './record-conflict-error';
import { grpcErrorOf } from './grpc-errors';
import { StateCallError, stateErrorFromGrpc } from './state-call-errors';

/** What grpc-js hands a client callback for a status the server sent. */
function received(error: AppError): Error {
  return grpcErrorOf(error);
}

describe('recordsErrorOf', () => {
  it('rebuilds a persona version conflict as RecordConflictError with the current version', () => {
    const wire = received(
      new AppError('conflict', 'persona p1 is at version 3, not 2', {
        details: { record: 'persona', personaId: 'p1', expectedVersion: 2, version: 3 },
      }),
    );
    const rebuilt = recordsErrorOf(stateErrorFromGrpc(wire, 'SetRoles', 'localhost:7443'));
    expect(rebuilt).toBeInstanceOf(RecordConflictError);
    expect(rebuilt).toMatchObject({
      code: 'conflict',
      version: 3,
      method: 'SetRoles',
      grpcStatus: 10,
      fromServer: true,
      message: 'persona p1 is at version 3, not 2',
    });
  });

  it.each([
    ['a conflict without a version', new AppError('conflict', 'moved', { details: {} })],
    ['another code', new AppError('already_exists', 'taken', { details: { version: 3 } })],
  ])('leaves %s as it is', (_label, error) => {
    const rebuilt = stateErrorFromGrpc(received(error), 'LinkIdentity', 'localhost:7443');
    expect(recordsErrorOf(rebuilt)).toBe(rebuilt);
    expect(rebuilt).toBeInstanceOf(StateCallError);
    expect(rebuilt).not.toBeInstanceOf(RecordConflictError);
  });
});
