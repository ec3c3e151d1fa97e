import { describe, expect, it } from '@jest/globals';
import { ApiException } from '@kubernetes/client-node';
import { apiErrorMessage, apiFailureOf } from './kube-api-errors';

const status = {
  kind: 'Status',
  apiVersion: 'v1',
  status: 'Failure',
  message: 'pods "c1" is forbidden: pod rejected: RuntimeClass "gvisor" not found',
  reason: 'Forbidden',
  details: { name: 'c1', kind: 'pods' },
  code: 403,
};

describe('apiFailureOf', () => {
  it('reads code, reason and message from a Status body sent as text', () => {
    const err = new ApiException(403, 'HTTP-Code: 403', JSON.stringify(status), {});
    expect(apiFailureOf(err)).toEqual({
      code: 403,
      reason: 'Forbidden',
      message: status.message,
    });
    expect(apiErrorMessage(err)).toBe(`403: ${status.message}`);
  });

  it('reads a Status body already parsed', () => {
    const err = new ApiException(403, 'HTTP-Code: 403', status, {});
    expect(apiFailureOf(err)).toEqual({ code: 403, reason: 'Forbidden', message: status.message });
  });

  it('falls back to the HTTP status when the body is not a Status', () => {
    const err = new ApiException(503, 'HTTP-Code: 503', 'upstream connect error', {});
    expect(apiFailureOf(err)).toEqual({ code: 503, message: 'HTTP 503' });
  });

  it('keeps only the message of an error that never reached the server', () => {
    expect(apiFailureOf(new Error('connect ECONNREFUSED'))).toEqual({
      message: 'connect ECONNREFUSED',
    });
  });
});
