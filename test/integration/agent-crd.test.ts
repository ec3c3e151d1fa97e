import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { ApiException, CustomObjectsApi, type KubeConfig } from '@kubernetes/client-node';
import {
  invalidAgentResourceCases,
  validAgentRefConversationSpec,
  validFullAgentSpec,
  validFullModelConfigSpec,
  validGatewayModelConfigSpec,
} from '../../operator/api/v1alpha1/agent-cases';
import { validMinimalConversationSpec } from '../../operator/api/v1alpha1/conversation-cases';
import { apiErrorMessage, field, freshNamespace, kubeConfig } from './support/kube';

// The Agent and ModelConfig CRDs, and the Conversation's agentRef rule, on a real API
// server: the CEL rules only it evaluates (the self-references read metadata.name at the
// schema root; agentRef vs the defaulted inline agent).
const plurals = { Agent: 'agents', ModelConfig: 'modelconfigs', Conversation: 'conversations' };
type Kind = keyof typeof plurals;

describe('Agent and ModelConfig CRDs on a real API server', () => {
  let kc: KubeConfig;
  let ns: { name: string; dispose: () => Promise<void> };
  let seq = 0;

  beforeAll(async () => {
    kc = await kubeConfig();
    ns = await freshNamespace(kc, 'agent-crd');
  });
  afterAll(async () => {
    await ns.dispose();
  });

  const api = (): CustomObjectsApi => kc.makeApiClient(CustomObjectsApi);
  const target = (kind: Kind, name: string) => ({
    group: 'polychrome.dev',
    version: 'v1alpha1',
    plural: plurals[kind],
    namespace: ns.name,
    name,
  });
  const create = (kind: Kind, name: string, spec: unknown): Promise<unknown> =>
    api().createNamespacedCustomObject({
      ...target(kind, name),
      body: { apiVersion: 'polychrome.dev/v1alpha1', kind, metadata: { name }, spec },
    });
  const get = (kind: Kind, name: string): Promise<unknown> =>
    api().getNamespacedCustomObject(target(kind, name));
  const refusal = async (write: Promise<unknown>): Promise<string> => {
    const err = await write.then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(ApiException);
    expect(err).toMatchObject({ code: 422 });
    return apiErrorMessage(err);
  };

  it('accepts the valid objects unchanged', async () => {
    await create('ModelConfig', 'claude', validFullModelConfigSpec);
    await create('ModelConfig', 'gateway', validGatewayModelConfigSpec);
    await create('Agent', 'triage', validFullAgentSpec);
    expect(field(await get('ModelConfig', 'claude'), 'spec')).toEqual(validFullModelConfigSpec);
    expect(field(await get('ModelConfig', 'gateway'), 'spec')).toEqual(validGatewayModelConfigSpec);
    expect(field(await get('Agent', 'triage'), 'spec')).toEqual(validFullAgentSpec);
  });

  it('defaults an Agent maxSteps as the inline agent does', async () => {
    await create('Agent', 'plain', { modelRef: { name: 'claude' } });
    expect(field(await get('Agent', 'plain'), 'spec', 'maxSteps')).toBe(8);
  });

  it.each(invalidAgentResourceCases.map((c) => [c.name, c] as const))(
    'refuses %s with a field-specific message',
    async (_name, c) => {
      const name = c.kind === 'Agent' ? c.objectName : `${c.objectName}${++seq}`;
      expect(await refusal(create(c.kind, name, c.spec))).toMatch(c.expectMessage);
      await expect(get(c.kind, name)).rejects.toMatchObject({ code: 404 });
    },
  );

  it('accepts a Conversation with agentRef only, keeping the defaulted inline agent', async () => {
    await create('Conversation', 'by-ref', validAgentRefConversationSpec);
    const spec = field(await get('Conversation', 'by-ref'), 'spec');
    expect(spec).toMatchObject({ agentRef: { name: 'triage' } });
    // spec.agent: {} is defaulted, with its defaulted members, and the rule lets it be.
    expect(field(spec, 'agent')).toEqual({ model: 'claude-sonnet-5-5', maxSteps: 8 });
  });

  it('accepts an inline Conversation as before, agentRef unset', async () => {
    await create('Conversation', 'inline', validMinimalConversationSpec);
    expect(field(await get('Conversation', 'inline'), 'spec', 'agentRef')).toBeUndefined();
  });

  it('refuses adding the inline agent to an agentRef Conversation, and agentRef to an inline one', async () => {
    await create('Conversation', 'ref-first', validAgentRefConversationSpec);
    await create('Conversation', 'inline-first', validMinimalConversationSpec);
    const patch = (name: string, body: object[]) =>
      api().patchNamespacedCustomObject({ ...target('Conversation', name), body });
    expect(
      await refusal(
        patch('ref-first', [{ op: 'add', path: '/spec/agent/systemPrompt', value: 'Be brief.' }]),
      ),
    ).toMatch(/spec.agentRef: [^\n]*set agentRef or agent, not both/);
    expect(
      await refusal(
        patch('inline-first', [{ op: 'add', path: '/spec/agentRef', value: { name: 'triage' } }]),
      ),
    ).toMatch(/spec.agentRef: [^\n]*set agentRef or agent, not both/);
    expect(field(await get('Conversation', 'ref-first'), 'spec', 'agent', 'systemPrompt')).toBe(
      undefined,
    );
    expect(field(await get('Conversation', 'inline-first'), 'spec', 'agentRef')).toBe(undefined);
  });

  it('writes status only through the status subresource', async () => {
    const before = await get('Agent', 'plain');
    const replaced: unknown = await api().replaceNamespacedCustomObject({
      ...target('Agent', 'plain'),
      body: { ...(before as object), status: { observedGeneration: 1 } },
    });
    expect(field(replaced, 'status')).toBeUndefined();
  });
});
