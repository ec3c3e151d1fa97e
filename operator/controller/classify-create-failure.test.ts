import { describe, expect, it } from '@jest/globals';
import type { ApiFailure, CreateFailure } from './classify-create-failure';
import { classifyCreateFailure } from './classify-create-failure';

// The Status body kube-apiserver returns when the RuntimeClass admission plugin rejects a
// pod (checked against the real API server in test/integration/conversation-controller.test.ts).
const rejected: ApiFailure = {
  code: 403,
  reason: 'Forbidden',
  message: 'pods "c1" is forbidden: pod rejected: RuntimeClass "gvisor" not found',
};

describe('classifyCreateFailure', () => {
  it.each<[string, ApiFailure, string | undefined, CreateFailure]>([
    [
      'the RuntimeClass admission rejection',
      rejected,
      'gvisor',
      { kind: 'runtime-class-missing', runtimeClassName: 'gvisor' },
    ],
    [
      'the rejection, pod spec without runtimeClassName (trust the Status)',
      rejected,
      undefined,
      { kind: 'runtime-class-missing', runtimeClassName: 'gvisor' },
    ],
    [
      'a name with dots and dashes',
      {
        ...rejected,
        message: 'pods "c1" is forbidden: pod rejected: RuntimeClass "kata-qemu.v2" not found',
      },
      'kata-qemu.v2',
      { kind: 'runtime-class-missing', runtimeClassName: 'kata-qemu.v2' },
    ],
    ['the message names another RuntimeClass than the pod', rejected, 'kata', { kind: 'other' }],
    ['the same text with another code', { ...rejected, code: 422 }, 'gvisor', { kind: 'other' }],
    [
      'no code (never reached the server)',
      { message: rejected.message },
      'gvisor',
      { kind: 'other' },
    ],
    [
      '403 with another reason',
      { ...rejected, reason: 'Unauthorized' },
      'gvisor',
      { kind: 'other' },
    ],
    [
      'an RBAC 403',
      {
        code: 403,
        reason: 'Forbidden',
        message:
          'pods is forbidden: User "system:serviceaccount:x:y" cannot create resource "pods" in API group "" in the namespace "team"',
      },
      'gvisor',
      { kind: 'other' },
    ],
    [
      'a webhook 403 quoting a RuntimeClass otherwise',
      {
        code: 403,
        reason: 'Forbidden',
        message: 'admission webhook "policy" denied the request: RuntimeClass "gvisor" not allowed',
      },
      'gvisor',
      { kind: 'other' },
    ],
    [
      'a conflict',
      { code: 409, reason: 'AlreadyExists', message: 'pods "c1" already exists' },
      'gvisor',
      { kind: 'other' },
    ],
  ])('%s', (_name, failure, runtimeClassName, expected) => {
    expect(classifyCreateFailure(failure, runtimeClassName)).toEqual(expected);
  });
});
