import { describe, expect, it } from '@jest/globals';
import { ConditionStatus, ConversationPhase } from './conditions';
import { conversationCrd, conversationSchema } from './conversation-crd';
import { IDENTITY_PATTERN } from '../../../common/identity';
import type { ConversationSpec } from './conversation-spec';
import type { ConversationStatus } from './conversation-status';
import { DEFAULT_MAX_STEPS, DEFAULT_MODEL, DEFAULT_RETENTION } from './conversation-values';
import { DURATION_PATTERN, RETENTION_PATTERN } from './field-patterns';
import type { CelRule, JsonSchema } from './schema-builder';

type Equal<A, B> =
  (<T>() => T extends A ? 1 : 2) extends <T>() => T extends B ? 1 : 2 ? true : false;
type Expect<T extends true> = T;

// The public contract: these names appear in the TS types (inferred) and, checked below at
// run time, in the schema. Renaming a field must fail here.
const specFields = [
  'agentRef',
  'agent',
  'tools',
  'idleTimeout',
  'retention',
  'journalRetention',
  'visibility',
  'owner',
  'participants',
  'sandbox',
] as const;
const statusFields = [
  'phase',
  'conditions',
  'observedGeneration',
  'lastTurnTime',
  'closedTime',
  'currentTurn',
  'agent',
  'turns',
  'sandbox',
  'journal',
] as const;
export type SpecFieldsMatch = Expect<Equal<keyof ConversationSpec, (typeof specFields)[number]>>;
export type StatusFieldsMatch = Expect<
  Equal<keyof ConversationStatus, (typeof statusFields)[number]>
>;

/** The node at a dotted path of property names; `[]` steps into array items. */
function nodeAt(path: string): JsonSchema {
  let node: JsonSchema | undefined = conversationSchema;
  for (const step of path.split('.')) {
    node = step === '[]' ? node?.items : node?.properties?.[step];
  }
  if (node === undefined) throw new Error(`no schema node at ${path}`);
  return node;
}

function rulesAt(path: string): readonly CelRule[] {
  return nodeAt(path)['x-kubernetes-validations'] ?? [];
}

/** Every schema node with its path, depth first. */
function walk(node: JsonSchema, path: string, visit: (n: JsonSchema, p: string) => void): void {
  visit(node, path);
  for (const [name, child] of Object.entries(node.properties ?? {})) {
    walk(child, `${path}.${name}`, visit);
  }
  if (node.items !== undefined) walk(node.items, `${path}[]`, visit);
}

describe('Conversation CRD', () => {
  it('has the names, scope and version of docs/design.md', () => {
    expect(conversationCrd.metadata.name).toBe('conversations.polychrome.dev');
    expect(conversationCrd.spec.group).toBe('polychrome.dev');
    expect(conversationCrd.spec.scope).toBe('Namespaced');
    expect(conversationCrd.spec.names).toEqual({
      kind: 'Conversation',
      listKind: 'ConversationList',
      plural: 'conversations',
      singular: 'conversation',
      shortNames: ['conv'],
      categories: ['polychrome'],
    });
    expect(conversationCrd.spec.versions.map((v) => [v.name, v.served, v.storage])).toEqual([
      ['v1alpha1', true, true],
    ]);
    expect(conversationCrd.spec.versions[0]?.subresources).toEqual({ status: {} });
  });

  it('prints NAME, PHASE, READY, AGENT, MODEL, AGE', () => {
    const columns = conversationCrd.spec.versions[0]?.additionalPrinterColumns ?? [];
    // NAME is implicit; kubectl upper-cases the rest.
    expect(columns.map((c) => [c.name.toUpperCase(), c.type, c.jsonPath])).toEqual([
      ['PHASE', 'string', '.status.phase'],
      ['READY', 'string', '.status.conditions[?(@.type=="Ready")].status'],
      ['AGENT', 'string', '.status.agent'],
      ['MODEL', 'string', '.spec.agent.model'],
      ['AGE', 'date', '.metadata.creationTimestamp'],
    ]);
  });

  it('is structural: every node is typed and nothing keeps unknown fields', () => {
    const untyped: string[] = [];
    walk(conversationSchema, '', (node, path) => {
      const intOrString =
        node['x-kubernetes-int-or-string'] === true &&
        JSON.stringify(node.anyOf) === JSON.stringify([{ type: 'integer' }, { type: 'string' }]);
      if (node.type === undefined && !intOrString) untyped.push(path);
      expect(node).not.toHaveProperty('x-kubernetes-preserve-unknown-fields');
      expect(node).not.toHaveProperty('additionalProperties');
    });
    expect(untyped).toEqual([]);
  });

  it('bounds every string and list (CEL cost estimation needs it)', () => {
    const unbounded: string[] = [];
    walk(conversationSchema, '', (node, path) => {
      if (path.startsWith('.apiVersion') || path.startsWith('.kind')) return;
      if (node.type === 'string' && node.maxLength === undefined && node.enum === undefined) {
        unbounded.push(path);
      }
      if (node.type === 'array' && node.maxItems === undefined) unbounded.push(path);
    });
    expect(unbounded).toEqual([]);
  });

  it('declares exactly the spec and status fields of the TypeScript types', () => {
    expect(Object.keys(nodeAt('spec').properties ?? {}).sort()).toEqual([...specFields].sort());
    expect(Object.keys(nodeAt('status').properties ?? {}).sort()).toEqual([...statusFields].sort());
    expect(conversationSchema.required).toEqual(['spec']);
  });

  it('defaults model, maxSteps, retention, visibility and backend', () => {
    expect(nodeAt('spec.agent').default).toEqual({});
    expect(nodeAt('spec.agent.model').default).toBe(DEFAULT_MODEL);
    expect(nodeAt('spec.agent.maxSteps').default).toBe(DEFAULT_MAX_STEPS);
    expect(nodeAt('spec.retention').default).toBe(DEFAULT_RETENTION);
    expect(nodeAt('spec.visibility').default).toBe('private');
    expect(nodeAt('spec.sandbox').default).toEqual({});
    expect(nodeAt('spec.sandbox.backend').default).toBe('agent-sandbox');
    expect(nodeAt('spec.idleTimeout')).not.toHaveProperty('default');
  });

  it('carries each OpenAPI validation', () => {
    expect(nodeAt('spec.agent.maxSteps')).toMatchObject({
      type: 'integer',
      minimum: 1,
      maximum: 64,
    });
    expect(nodeAt('spec.agent.model')).toMatchObject({ minLength: 1 });
    expect(nodeAt('spec.agent.systemPrompt')).toMatchObject({ maxLength: 32768 });
    expect(nodeAt('spec.idleTimeout').pattern).toBe(DURATION_PATTERN);
    expect(nodeAt('spec.retention').pattern).toBe(RETENTION_PATTERN);
    expect(nodeAt('spec.visibility').enum).toEqual(['private', 'shared']);
    expect(nodeAt('spec.owner').pattern).toBe(IDENTITY_PATTERN);
    expect(nodeAt('spec.participants.[]').pattern).toBe(IDENTITY_PATTERN);
    expect(nodeAt('spec.participants')).toMatchObject({
      maxItems: 64,
      'x-kubernetes-list-type': 'set',
    });
    expect(nodeAt('spec.tools.mcpServers')).toMatchObject({
      'x-kubernetes-list-type': 'map',
      'x-kubernetes-list-map-keys': ['name'],
    });
    expect(nodeAt('spec.tools.mcpServers.[]').required).toEqual(['name', 'transport']);
    expect(nodeAt('spec.tools.mcpServers.[].transport').enum).toEqual(['stdio', 'http']);
    expect(nodeAt('spec.sandbox.backend').enum).toEqual(['agent-sandbox', 'pod']);
    expect(nodeAt('status.phase').enum).toEqual(Object.values(ConversationPhase));
  });

  it('carries each CEL rule with a message', () => {
    const messages = (path: string) => rulesAt(path).map((r) => r.message);
    expect(messages('spec.tools.mcpServers.[]')).toEqual([
      'set either command (transport stdio) or url (transport http), not both',
      'one of command (transport stdio) or url (transport http) is required',
      'transport stdio takes command and args; transport http takes url',
      'args is only used with transport stdio',
    ]);
    expect(messages('spec.tools')).toEqual([
      'every requireApproval entry must name a tool in builtin, or <server>/<tool> or <server>/* of a server in mcpServers',
    ]);
    expect(messages('spec.agent')).toEqual([
      'handoffTargets must not include the agent itself (agent.name)',
    ]);
    expect(messages('spec.sandbox')).toEqual(['warmPool is only used by backend agent-sandbox']);
    expect(rulesAt('spec.sandbox.backend')).toEqual([
      { rule: 'self == oldSelf', message: 'sandbox.backend is immutable' },
    ]);
    // Field paths of rules must name real children, or the API server rejects the CRD.
    walk(conversationSchema, '', (node) => {
      for (const rule of node['x-kubernetes-validations'] ?? []) {
        expect(rule.message).not.toBe('');
        if (rule.fieldPath !== undefined) {
          expect(Object.keys(node.properties ?? {})).toContain(rule.fieldPath.slice(1));
        }
      }
    });
  });

  it('shapes conditions like metav1.Condition, keyed by type', () => {
    expect(nodeAt('status.conditions')).toMatchObject({
      'x-kubernetes-list-type': 'map',
      'x-kubernetes-list-map-keys': ['type'],
    });
    const condition = nodeAt('status.conditions.[]');
    expect(condition.required).toEqual([
      'type',
      'status',
      'lastTransitionTime',
      'reason',
      'message',
    ]);
    expect(Object.keys(condition.properties ?? {}).sort()).toEqual(
      ['lastTransitionTime', 'message', 'observedGeneration', 'reason', 'status', 'type'].sort(),
    );
    expect(nodeAt('status.conditions.[].status').enum).toEqual(Object.values(ConditionStatus));
    expect(nodeAt('status.conditions.[].lastTransitionTime').format).toBe('date-time');
    expect(nodeAt('status.lastTurnTime').format).toBe('date-time');
    expect(nodeAt('status.journal.lastSignedRoot').pattern).toBe('^[0-9a-f]{64}$');
  });
});
