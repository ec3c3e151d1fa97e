/**
 * Agent, ModelConfig and Conversation-with-agentRef objects for tests: valid ones, and
 * invalid ones each paired with the error the API server must return. The integration test
 * test/integration/agent-crd.test.ts applies every case to a real kube-apiserver with the
 * generated CRDs; the unit test checks which OpenAPI cases the local checker also refuses.
 */
import type { AgentResourceSpec } from './agent-resource';
import { fieldError } from './conversation-cases';
import type { ConversationSpec } from './conversation-spec';
import type { ModelConfigSpec } from './model-config-resource';

/** An object (name and spec) the API server must refuse, and how. */
export interface InvalidObjectCase {
  readonly name: string;
  readonly kind: 'Agent' | 'ModelConfig' | 'Conversation';
  /** metadata.name to create it under (an Agent's self-reference rules read it). */
  readonly objectName: string;
  readonly spec: unknown;
  readonly expectMessage: RegExp;
  readonly rejectedBy: 'openapi' | 'cel';
}

/** A ModelConfig with every field. */
export const validFullModelConfigSpec: ModelConfigSpec = {
  provider: 'anthropic',
  model: 'claude-sonnet-5-5',
  baseUrl: 'https://api.anthropic.com',
  secretKeyRef: { name: 'anthropic-key', key: 'api-key' },
  maxTokens: 8192,
};

/** An OpenAI-compatible gateway in the cluster, without a key. */
export const validGatewayModelConfigSpec: ModelConfigSpec = {
  provider: 'openai',
  model: 'llama-4-scout',
  baseUrl: 'http://litellm.models.svc:4000/v1',
};

/** An Agent with every field. */
export const validFullAgentSpec: AgentResourceSpec = {
  modelRef: { name: 'claude' },
  description: 'Answers first and hands billing questions to the billing agent.',
  systemPrompt: 'You are the triage agent.',
  tools: {
    builtin: ['calculator'],
    requireApproval: ['calculator'],
  },
  maxSteps: 12,
  handoffs: ['billing'],
  delegates: ['search'],
};

/** A Conversation whose entry agent is an Agent. */
export const validAgentRefConversationSpec: ConversationSpec = { agentRef: { name: 'triage' } };

const agent = (spec: unknown, objectName = 'refused') => ({
  kind: 'Agent' as const,
  objectName,
  spec,
});
const model = (spec: unknown) => ({ kind: 'ModelConfig' as const, objectName: 'm', spec });
const conversation = (spec: unknown) => ({
  kind: 'Conversation' as const,
  objectName: 'c',
  spec,
});
const modelRef = { name: 'claude' };
const bothMessage = 'set agentRef or agent, not both';
const baseUrlMessage = 'baseUrl must be an absolute URL with scheme https (or http) and a host';

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

/** Objects the API server must refuse, each with the message it must give. */
export const invalidAgentResourceCases: readonly InvalidObjectCase[] = [
  {
    name: 'Agent without modelRef',
    ...agent({ systemPrompt: 'x' }),
    expectMessage: fieldError('spec.modelRef', 'Required value'),
    rejectedBy: 'openapi',
  },
  {
    name: 'Agent handing off to itself',
    ...agent({ modelRef, handoffs: ['billing', 'refused'] }),
    expectMessage: fieldError('spec.handoffs', 'spec.handoffs must not name the Agent itself'),
    rejectedBy: 'cel',
  },
  {
    name: 'Agent MCP server whose url has no host',
    ...agent({
      modelRef,
      tools: { mcpServers: [{ name: 'lookup', transport: 'http', url: 'http:///mcp' }] },
    }),
    expectMessage: fieldError(
      'spec.tools.mcpServers[0].url',
      'url must be an absolute URL with scheme https (or http) and a host, such as https://mcp.example.com/mcp',
    ),
    rejectedBy: 'cel',
  },
  {
    name: 'Agent MCP server whose url is not http(s)',
    ...agent({
      modelRef,
      tools: { mcpServers: [{ name: 'lookup', transport: 'http', url: 'file:///etc/passwd' }] },
    }),
    expectMessage: fieldError('spec.tools.mcpServers[0].url', 'should match'),
    rejectedBy: 'openapi',
  },
  {
    name: 'Agent delegating to itself',
    ...agent({ modelRef, delegates: ['refused'] }),
    expectMessage: fieldError('spec.delegates', 'spec.delegates must not name the Agent itself'),
    rejectedBy: 'cel',
  },
  {
    name: 'Agent named with a dot',
    ...agent({ modelRef }, 'refu.sed'),
    expectMessage: new RegExp(
      escapeRegExp(
        'an Agent name must be a DNS label (at most 63 lower-case letters, digits and -), since other Agents name it in handoffs and delegates',
      ),
    ),
    rejectedBy: 'cel',
  },
  {
    name: 'Agent with a handoff listed twice',
    ...agent({ modelRef, handoffs: ['billing', 'billing'] }),
    expectMessage: fieldError('spec.handoffs[1]', 'Duplicate value'),
    rejectedBy: 'openapi',
  },
  {
    name: 'Agent with 17 delegates',
    ...agent({ modelRef, delegates: Array.from({ length: 17 }, (_, i) => `d${i}`) }),
    expectMessage: fieldError('spec.delegates', 'must have at most 16 items'),
    rejectedBy: 'openapi',
  },
  {
    name: 'Agent with maxSteps over the limit',
    ...agent({ modelRef, maxSteps: 65 }),
    expectMessage: fieldError('spec.maxSteps', 'should be less than or equal to 64'),
    rejectedBy: 'openapi',
  },
  {
    name: 'Agent approving a tool it does not have',
    ...agent({ modelRef, tools: { requireApproval: ['calculator'] } }),
    expectMessage: fieldError('spec.tools.requireApproval', 'every requireApproval entry'),
    rejectedBy: 'cel',
  },
  {
    name: 'ModelConfig with an unknown provider',
    ...model({ provider: 'gemini', model: 'x' }),
    expectMessage: fieldError('spec.provider', 'Unsupported value: "gemini"'),
    rejectedBy: 'openapi',
  },
  {
    name: 'ModelConfig without a model',
    ...model({ provider: 'openai' }),
    expectMessage: fieldError('spec.model', 'Required value'),
    rejectedBy: 'openapi',
  },
  {
    name: 'ModelConfig with an ftp baseUrl',
    ...model({ provider: 'openai', model: 'x', baseUrl: 'ftp://models.example.com' }),
    expectMessage: fieldError('spec.baseUrl', baseUrlMessage),
    rejectedBy: 'cel',
  },
  {
    name: 'ModelConfig with a relative baseUrl',
    ...model({ provider: 'openai', model: 'x', baseUrl: '/v1' }),
    expectMessage: fieldError('spec.baseUrl', baseUrlMessage),
    rejectedBy: 'cel',
  },
  {
    name: 'ModelConfig with a secretKeyRef without a key',
    ...model({ provider: 'anthropic', model: 'x', secretKeyRef: { name: 's' } }),
    expectMessage: fieldError('spec.secretKeyRef.key', 'Required value'),
    rejectedBy: 'openapi',
  },
  {
    name: 'ModelConfig with a bad Secret key',
    ...model({ provider: 'anthropic', model: 'x', secretKeyRef: { name: 's', key: 'a/b' } }),
    expectMessage: fieldError('spec.secretKeyRef.key', 'should match'),
    rejectedBy: 'openapi',
  },
  {
    name: 'ModelConfig with maxTokens 0',
    ...model({ provider: 'anthropic', model: 'x', maxTokens: 0 }),
    expectMessage: fieldError('spec.maxTokens', 'should be greater than or equal to 1'),
    rejectedBy: 'openapi',
  },
  {
    name: 'Conversation with agentRef and agent.systemPrompt',
    ...conversation({ agentRef: { name: 'triage' }, agent: { systemPrompt: 'x' } }),
    expectMessage: fieldError('spec.agentRef', bothMessage),
    rejectedBy: 'cel',
  },
  {
    name: 'Conversation with agentRef and a model other than the default',
    ...conversation({ agentRef: { name: 'triage' }, agent: { model: 'gpt-5' } }),
    expectMessage: fieldError('spec.agentRef', bothMessage),
    rejectedBy: 'cel',
  },
  {
    name: 'Conversation with agentRef and maxSteps other than the default',
    ...conversation({ agentRef: { name: 'triage' }, agent: { maxSteps: 3 } }),
    expectMessage: fieldError('spec.agentRef', bothMessage),
    rejectedBy: 'cel',
  },
  {
    name: 'Conversation with an agentRef without a name',
    ...conversation({ agentRef: {} }),
    expectMessage: fieldError('spec.agentRef.name', 'Required value'),
    rejectedBy: 'openapi',
  },
];
