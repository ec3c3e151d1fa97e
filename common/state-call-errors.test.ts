import { Metadata, status } from '@grpc/grpc-js';
import { describe, expect, it } from '@jest/globals';

import { AppError, ErrorCode, errorStatus } from './errors';
import {
  ERROR_CODE_METADATA,
  ERROR_DETAILS_METADATA,
  grpcStatusOf,
  HEAD_METADATA,
} from './grpc-errors';
import {
  JournalConflictError,
  JournalFencedError,
  StateCallError,
  stateErrorFromGrpc,
} from './state-call-errors';

/** What grpc-js hands a client callback for a status the server sent. */
function received(sent: { code: number; details: string; metadata: Metadata }): Error {
  return Object.assign(new Error(`${String(sent.code)} ${sent.details}`), sent);
}

describe('stateErrorFromGrpc', () => {
  it.each(Object.values(ErrorCode))('rebuilds %s from a server status', (code) => {
    const original = new AppError(code, `failed: ${code}`, {
      details: { partition: 'conv-a', n: 3, ok: false },
    });
    const rebuilt = stateErrorFromGrpc(received(grpcStatusOf(original)), 'Head', 'localhost:7443');
    expect(rebuilt).toBeInstanceOf(StateCallError);
    expect(rebuilt).toMatchObject({
      code,
      message: `failed: ${code}`,
      details: { partition: 'conv-a', n: 3, ok: false },
      method: 'Head',
      fromServer: true,
      grpcStatus: errorStatus[code].grpc,
    });
  });

  it('rebuilds a conflict with a head as JournalConflictError', () => {
    const sent = grpcStatusOf(
      new AppError('conflict', 'conv-a: the head moved', {
        details: { partition: 'conv-a', expectedHead: 4, head: 8 },
      }),
    );
    expect(sent.metadata.get(HEAD_METADATA)).toEqual(['8']);
    const rebuilt = stateErrorFromGrpc(received(sent), 'Append', 'localhost:7443');
    expect(rebuilt).toBeInstanceOf(JournalConflictError);
    expect(rebuilt).toMatchObject({ code: 'conflict', head: 8 });
  });

  it('rebuilds fenced as JournalFencedError with both tokens, apart from failed_precondition', () => {
    const sent = grpcStatusOf(
      new AppError('fenced', 'conv-a: this writer lost the lease', {
        details: { partition: 'conv-a', fencingToken: 2, highestFencingToken: 5 },
      }),
    );
    expect(sent.code).toBe(status.FAILED_PRECONDITION);
    const rebuilt = stateErrorFromGrpc(received(sent), 'Append', 'localhost:7443');
    expect(rebuilt).toBeInstanceOf(JournalFencedError);
    expect(rebuilt).toMatchObject({ code: 'fenced', fencingToken: 2, highestFencingToken: 5 });
    // The same status with the other code is an ordinary failed precondition.
    const other = stateErrorFromGrpc(
      received(grpcStatusOf(new AppError('failed_precondition', 'key not held'))),
      'Append',
      'localhost:7443',
    );
    expect(other).not.toBeInstanceOf(JournalFencedError);
    expect(other.code).toBe('failed_precondition');
  });

  it('classifies a status from the transport by its number and says what to check', () => {
    const rebuilt = stateErrorFromGrpc(
      received({
        code: status.UNAVAILABLE,
        details: 'No connection established',
        metadata: new Metadata(),
      }),
      'Verify',
      'state:7443',
    );
    expect(rebuilt).toMatchObject({ code: 'unavailable', fromServer: false });
    expect(rebuilt.message).toBe(
      'state plane at state:7443: Verify failed: No connection established; check the address, that the ' +
        'state plane is running, and that this client certificate is signed by the Polychrome CA and trusts the server certificate',
    );
  });

  it('ignores an unknown code and unparsable details in metadata', () => {
    const metadata = new Metadata();
    metadata.set(ERROR_CODE_METADATA, 'weird');
    metadata.set(ERROR_DETAILS_METADATA, '{not json');
    const rebuilt = stateErrorFromGrpc(
      received({ code: status.DATA_LOSS, details: 'gone', metadata }),
      'Read',
      'x:1',
    );
    expect(rebuilt).toMatchObject({ code: 'data_loss', fromServer: false, details: {} });
  });

  it('wraps anything that is not a gRPC status as internal', () => {
    const rebuilt = stateErrorFromGrpc(new TypeError('boom'), 'Head', 'x:1');
    expect(rebuilt).toMatchObject({ code: 'internal', name: 'StateCallError' });
  });
});
