import { describe, expect, it } from '@jest/globals';
import {
  fieldError,
  invalidConversationCases,
  invalidConversationUpdateCases,
  validFullConversationSpec,
  validMinimalConversationSpec,
} from './conversation-cases';
import { conversationSchema } from './conversation-crd';
import type { JsonSchema } from './schema-builder';
import { checkAgainstSchema } from './schema-check';

/** Checks the object the integration tests send: envelope plus spec (absent when undefined). */
function check(spec: unknown): string[] {
  const object: Record<string, unknown> = {
    apiVersion: 'polychrome.dev/v1alpha1',
    kind: 'Conversation',
    metadata: { name: 'c' },
  };
  if (spec !== undefined) object['spec'] = spec;
  // Paths start at the root's children, as the API server prints them (`spec.agent...`).
  return checkAgainstSchema(conversationSchema, object, '').map((e) => e.replace(/^\./, ''));
}

function celMessages(node: JsonSchema): string[] {
  return [
    ...(node['x-kubernetes-validations'] ?? []).map((r) => r.message),
    ...Object.values(node.properties ?? {}).flatMap(celMessages),
    ...(node.items !== undefined ? celMessages(node.items) : []),
  ];
}

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

/** A pattern's source as `new RegExp` was given it (`.source` escapes every `/`). */
function sourceOf(pattern: RegExp): string {
  return pattern.source.replace(/\\\//g, '/');
}

describe('conversation cases', () => {
  it('accepts the valid minimal and full specs', () => {
    expect(check(validMinimalConversationSpec)).toEqual([]);
    expect(check(validFullConversationSpec)).toEqual([]);
  });

  it('accepts retention never, and 0 (delete as soon as closed)', () => {
    expect(check({ ...validMinimalConversationSpec, retention: 'never' })).toEqual([]);
    expect(check({ ...validMinimalConversationSpec, retention: '0' })).toEqual([]);
  });

  it('has at least 8 distinct invalid cases with unique names', () => {
    const names = invalidConversationCases.map((c) => c.name);
    expect(new Set(names).size).toBe(names.length);
    expect(names.length).toBeGreaterThanOrEqual(8);
  });

  const openapi = invalidConversationCases.filter((c) => c.rejectedBy === 'openapi');
  it.each(openapi.map((c) => [c.name, c] as const))(
    'rejects %s with the expected field message',
    (_name, c) => {
      const errors = check(c.spec);
      expect(errors.some((e) => c.expectMessage.test(e))).toBe(true);
    },
  );

  // CEL rules run only in a real API server. Here: the object passes every OpenAPI check,
  // so nothing but the CEL rule can reject it, and the expected message embeds a rule's
  // message verbatim, so a reworded rule fails this test.
  const cel = [...invalidConversationCases, ...invalidConversationUpdateCases].filter(
    (c) => c.rejectedBy === 'cel',
  );
  const messages = celMessages(conversationSchema);
  it.each(cel.map((c) => [c.name, c] as const))(
    'leaves %s to a CEL rule whose message it expects',
    (_name, c) => {
      expect(check(c.spec)).toEqual([]);
      expect(messages.some((m) => sourceOf(c.expectMessage).includes(escapeRegExp(m)))).toBe(true);
    },
  );

  it('checks every CEL rule with at least one case', () => {
    const sources = cel.map((c) => sourceOf(c.expectMessage));
    const unchecked = messages.filter((m) => !sources.some((s) => s.includes(escapeRegExp(m))));
    expect(unchecked).toEqual([]);
  });

  it('keeps update cases valid on their own', () => {
    for (const c of invalidConversationUpdateCases) {
      expect(check(c.oldSpec)).toEqual([]);
    }
  });

  it('builds field-error patterns that need the path and the reason on one line', () => {
    const pattern = fieldError('spec.agent.maxSteps', 'should be greater than or equal to 1');
    expect(
      pattern.test(
        'spec.agent.maxSteps: Invalid value: 0: spec.agent.maxSteps in body should be greater than or equal to 1',
      ),
    ).toBe(true);
    expect(pattern.test('spec.agent.model: should be greater than or equal to 1')).toBe(false);
    expect(pattern.test('spec.agentXmaxSteps: should be greater than or equal to 1')).toBe(false);
    expect(pattern.test('spec.agent.maxSteps: x\nshould be greater than or equal to 1')).toBe(
      false,
    );
  });
});
