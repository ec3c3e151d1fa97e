import { describe, expect, it } from '@jest/globals';
import {
  invalidAgentResourceCases,
  validAgentRefConversationSpec,
  validFullAgentSpec,
  validFullModelConfigSpec,
  validGatewayModelConfigSpec,
} from './agent-cases';
import { agentCrd, agentSchema, modelConfigCrd, modelConfigSchema } from './agent-crds';
import { conversationSchema } from './conversation-crd';
import type { JsonSchema } from './schema-builder';
import { checkAgainstSchema } from './schema-check';

const schemas: Record<'Agent' | 'ModelConfig' | 'Conversation', JsonSchema> = {
  Agent: agentSchema,
  ModelConfig: modelConfigSchema,
  Conversation: conversationSchema,
};

function check(kind: keyof typeof schemas, spec: unknown): string[] {
  const object = { apiVersion: 'polychrome.dev/v1alpha1', kind, metadata: { name: 'x' }, spec };
  return checkAgainstSchema(schemas[kind], object, '').map((e) => e.replace(/^\./, ''));
}

function walk(node: JsonSchema, path: string, visit: (n: JsonSchema, p: string) => void): void {
  visit(node, path);
  for (const [name, child] of Object.entries(node.properties ?? {})) {
    walk(child, `${path}.${name}`, visit);
  }
  if (node.items !== undefined) walk(node.items, `${path}[]`, visit);
}

function celMessages(node: JsonSchema): string[] {
  return [
    ...(node['x-kubernetes-validations'] ?? []).map((r) => r.message),
    ...Object.values(node.properties ?? {}).flatMap(celMessages),
    ...(node.items !== undefined ? celMessages(node.items) : []),
  ];
}

describe.each([
  ['Agent', agentCrd, agentSchema, 'agents', ['MODEL', 'READY', 'AGE']],
  [
    'ModelConfig',
    modelConfigCrd,
    modelConfigSchema,
    'modelconfigs',
    ['PROVIDER', 'MODEL', 'READY', 'AGE'],
  ],
] as const)('%s CRD', (kind, crd, schema, plural, columns) => {
  it('is namespaced in polychrome.dev/v1alpha1, category polychrome, with a status subresource', () => {
    expect(crd.metadata.name).toBe(`${plural}.polychrome.dev`);
    expect(crd.spec.scope).toBe('Namespaced');
    expect(crd.spec.names).toMatchObject({ kind, plural, categories: ['polychrome'] });
    expect(crd.spec.versions[0]).toMatchObject({
      name: 'v1alpha1',
      served: true,
      storage: true,
      subresources: { status: {} },
    });
  });

  it(`prints NAME, ${columns.join(', ')}`, () => {
    const printed = crd.spec.versions[0].additionalPrinterColumns.map((c) => c.name.toUpperCase());
    expect(printed).toEqual(columns);
  });

  it('is structural and bounds every string and list', () => {
    const problems: string[] = [];
    walk(schema, '', (node, path) => {
      if (node.type === undefined) problems.push(`${path}: untyped`);
      if (path === '.apiVersion' || path === '.kind') return;
      if (node.type === 'string' && node.maxLength === undefined && node.enum === undefined) {
        problems.push(`${path}: unbounded string`);
      }
      if (node.type === 'array' && node.maxItems === undefined)
        problems.push(`${path}: unbounded list`);
    });
    expect(problems).toEqual([]);
  });

  it('has observedGeneration and Ready conditions keyed by type in its status', () => {
    const status = schema.properties?.['status'];
    expect(Object.keys(status?.properties ?? {}).sort()).toEqual([
      'conditions',
      'observedGeneration',
    ]);
    expect(status?.properties?.['conditions']).toMatchObject({
      'x-kubernetes-list-type': 'map',
      'x-kubernetes-list-map-keys': ['type'],
    });
  });
});

describe('Agent and ModelConfig cases', () => {
  it('accepts the valid objects', () => {
    expect(check('ModelConfig', validFullModelConfigSpec)).toEqual([]);
    expect(check('ModelConfig', validGatewayModelConfigSpec)).toEqual([]);
    expect(check('Agent', validFullAgentSpec)).toEqual([]);
    expect(check('Conversation', validAgentRefConversationSpec)).toEqual([]);
  });

  it('reuses the Conversation tools schema for an Agent, not a copy that could drift', () => {
    expect(agentSchema.properties?.['spec']?.properties?.['tools']).toBe(
      conversationSchema.properties?.['spec']?.properties?.['tools'],
    );
  });

  const openapi = invalidAgentResourceCases.filter((c) => c.rejectedBy === 'openapi');
  it.each(openapi.map((c) => [c.name, c] as const))('refuses %s locally too', (_n, c) => {
    expect(check(c.kind, c.spec).some((e) => c.expectMessage.test(e))).toBe(true);
  });

  // Only CEL can refuse these: the local OpenAPI checks pass them.
  const cel = invalidAgentResourceCases.filter((c) => c.rejectedBy === 'cel');
  it.each(cel.map((c) => [c.name, c] as const))('leaves %s to a CEL rule', (_n, c) => {
    expect(check(c.kind, c.spec)).toEqual([]);
  });

  it('checks every Agent and ModelConfig CEL rule with a case', () => {
    const escape = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
    const sources = cel.map((c) => c.expectMessage.source.replace(/\\\//g, '/'));
    const conversationRules = celMessages(conversationSchema);
    const rules = [...celMessages(agentSchema), ...celMessages(modelConfigSchema)].filter(
      (m) => !conversationRules.includes(m),
    );
    expect(rules.filter((m) => !sources.some((s) => s.includes(escape(m))))).toEqual([]);
  });
});
