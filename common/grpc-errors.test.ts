import { Metadata, status } from '@grpc/grpc-js';
import { describe, expect, it } from '@jest/globals';

import { AppError, ErrorCode, errorStatus } from './errors';
import {
  ERROR_CODE_METADATA,
  ERROR_DETAILS_METADATA,
  grpcErrorOf,
  grpcStatusName,
  grpcStatusOf,
  HEAD_METADATA,
  isServiceError,
  receivedErrorOf,
} from './grpc-errors';

/** What grpc-js hands a client for a status: an Error with code, details and metadata. */
function received(sent: { code: number; details: string; metadata: Metadata }) {
  return Object.assign(new Error(`${String(sent.code)} ${sent.details}`), sent);
}

/** A status the peer sent with `code` in its metadata (and whatever status it chose). */
function declared(grpc: number, code: string, details?: string) {
  const metadata = new Metadata();
  metadata.set(ERROR_CODE_METADATA, code);
  if (details !== undefined) metadata.set(ERROR_DETAILS_METADATA, details);
  return received({ code: grpc, details: 'from the peer', metadata });
}

describe('grpcStatusOf', () => {
  it.each(Object.values(ErrorCode))(
    'sends %s as its errorStatus row with the code in metadata',
    (code) => {
      const sent = grpcStatusOf(
        new AppError(code, `it failed: ${code}`, { details: { partition: 'conv-a' } }),
      );
      expect(sent.code).toBe(errorStatus[code].grpc);
      expect(sent.details).toBe(`it failed: ${code}`);
      expect(sent.metadata.get(ERROR_CODE_METADATA)).toEqual([code]);
      expect(sent.metadata.get(ERROR_DETAILS_METADATA)).toEqual(['{"partition":"conv-a"}']);
      expect(sent.metadata.get(HEAD_METADATA)).toEqual([]);
    },
  );

  it('never sends the cause or a stack', () => {
    const sent = grpcStatusOf(
      new AppError('internal', 'the store failed; see its log', {
        cause: new Error('disk at /secret/path'),
      }),
    );
    expect(sent.details).toBe('the store failed; see its log');
    expect(JSON.stringify(sent.metadata.getMap())).not.toContain('/secret/path');
  });

  it('drops details too large for a header, keeping the code', () => {
    const sent = grpcStatusOf(
      new AppError('invalid_argument', 'bad', { details: { blob: 'x'.repeat(5000) } }),
    );
    expect(sent.metadata.get(ERROR_DETAILS_METADATA)).toEqual([]);
    expect(sent.metadata.get(ERROR_CODE_METADATA)).toEqual(['invalid_argument']);
  });

  it('sends a head the details carry, as a decimal', () => {
    const sent = grpcStatusOf(new AppError('conflict', 'moved', { details: { head: 8 } }));
    expect(sent.metadata.get(HEAD_METADATA)).toEqual(['8']);
  });

  it('gives grpc-js an Error carrying the same status', () => {
    const error = grpcErrorOf(new AppError('fenced', 'lost the lease'));
    expect(error).toBeInstanceOf(Error);
    expect(error).toMatchObject({ code: status.FAILED_PRECONDITION, details: 'lost the lease' });
    expect(error.metadata.get(ERROR_CODE_METADATA)).toEqual(['fenced']);
  });
});

describe('receivedErrorOf', () => {
  it.each(Object.values(ErrorCode))('reads %s back with its message and details', (code) => {
    const sent = grpcStatusOf(
      new AppError(code, `failed: ${code}`, { details: { partition: 'conv-a', n: 3, ok: false } }),
    );
    expect(receivedErrorOf(received(sent))).toEqual({
      code,
      message: `failed: ${code}`,
      details: { partition: 'conv-a', n: 3, ok: false },
      grpcStatus: errorStatus[code].grpc,
      fromServer: true,
      head: undefined,
    });
  });

  it('reads fenced from the metadata, where the status alone says failed_precondition', () => {
    const sent = received(grpcStatusOf(new AppError('fenced', 'lost the lease')));
    expect(receivedErrorOf(sent).code).toBe('fenced');
    sent.metadata.remove(ERROR_CODE_METADATA);
    expect(receivedErrorOf(sent).code).toBe('failed_precondition');
  });

  it('reads the head the peer sent', () => {
    const sent = grpcStatusOf(new AppError('conflict', 'moved', { details: { head: 8 } }));
    expect(receivedErrorOf(received(sent)).head).toBe(8);
  });

  it('maps a status grpc-js made itself by its number: no details, not from the server', () => {
    const read = receivedErrorOf(
      received({ code: status.UNAVAILABLE, details: 'No connection', metadata: new Metadata() }),
    );
    expect(read).toEqual({
      code: 'unavailable',
      message: 'No connection',
      details: {},
      grpcStatus: status.UNAVAILABLE,
      fromServer: false,
      head: undefined,
    });
  });

  it('ignores an unknown code and keeps only scalar fields of the details', () => {
    expect(receivedErrorOf(declared(status.DATA_LOSS, 'weird', '{"a":1}'))).toMatchObject({
      code: 'data_loss',
      fromServer: false,
      details: {},
    });
    expect(
      receivedErrorOf(declared(status.NOT_FOUND, 'not_found', '{"a":1,"b":{"c":2},"d":[1]}')),
    ).toMatchObject({ code: 'not_found', fromServer: true, details: { a: 1 } });
    expect(receivedErrorOf(declared(status.NOT_FOUND, 'not_found', '{not json'))).toMatchObject({
      code: 'not_found',
      details: {},
    });
  });

  it('ignores a code its status disagrees with: the status decides', () => {
    // A peer cannot turn PERMISSION_DENIED into a retryable `unavailable` by metadata alone.
    const read = receivedErrorOf(declared(status.PERMISSION_DENIED, 'unavailable', '{"a":1}'));
    expect(read).toMatchObject({ code: 'permission_denied', fromServer: false, details: {} });
  });
});

describe('isServiceError', () => {
  it('knows a gRPC status from other errors', () => {
    expect(isServiceError(grpcErrorOf(new AppError('internal', 'x')))).toBe(true);
    expect(isServiceError(new AppError('internal', 'x'))).toBe(false);
    expect(isServiceError(Object.assign(new Error('x'), { code: 14 }))).toBe(false);
  });
});

describe('grpcStatusName', () => {
  it.each([
    [0, 'OK'],
    [9, 'FAILED_PRECONDITION'],
    [10, 'ABORTED'],
    [16, 'UNAUTHENTICATED'],
    [99, 'UNKNOWN'],
  ])('names %d %s', (code, name) => {
    expect(grpcStatusName(code)).toBe(name);
  });
});
