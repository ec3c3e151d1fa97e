import { describe, expect, it } from '@jest/globals';
import { validFullConversationSpec, validMinimalConversationSpec } from './conversation-cases';
import { isConversation } from './conversation-guard';

const envelope = {
  apiVersion: 'polychrome.dev/v1alpha1',
  kind: 'Conversation',
  metadata: { name: 'c', namespace: 'default', generation: 1 },
};

describe('isConversation', () => {
  it('accepts conversations with and without status', () => {
    expect(isConversation({ ...envelope, spec: validMinimalConversationSpec })).toBe(true);
    expect(
      isConversation({
        ...envelope,
        spec: validFullConversationSpec,
        status: {
          phase: 'Ready',
          observedGeneration: 1,
          conditions: [
            {
              type: 'Ready',
              status: 'True',
              observedGeneration: 1,
              lastTransitionTime: '2026-08-01T10:00:00Z',
              reason: 'SandboxReady',
              message: 'sandbox ready',
            },
          ],
          journal: { head: 3, lastSignedRoot: 'ab'.repeat(32), keyId: 'k1' },
        },
      }),
    ).toBe(true);
  });

  it('rejects other kinds, versions and malformed objects', () => {
    const spec = validMinimalConversationSpec;
    expect(isConversation({ ...envelope, kind: 'Pod', spec })).toBe(false);
    expect(isConversation({ ...envelope, apiVersion: 'polychrome.dev/v1', spec })).toBe(false);
    expect(isConversation({ ...envelope, metadata: 'x', spec })).toBe(false);
    expect(isConversation({ ...envelope })).toBe(false);
    expect(isConversation({ ...envelope, spec: { agent: { maxSteps: 0 } } })).toBe(false);
    expect(isConversation({ ...envelope, spec, status: { phase: 'Sleeping' } })).toBe(false);
    expect(isConversation(null)).toBe(false);
    expect(isConversation([envelope])).toBe(false);
  });
});
