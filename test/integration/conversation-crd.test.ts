import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { ApiException, type KubeConfig } from '@kubernetes/client-node';
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import {
  invalidConversationCases,
  invalidConversationUpdateCases,
  validFullConversationSpec,
  validMinimalConversationSpec,
} from '../../operator/api/v1alpha1/conversation-cases';
import { ConversationResource } from '../../operator/api/v1alpha1/conversation-types';
import { defaultBinDir, repoRoot } from '../../hack/lib/paths';
import {
  apiErrorMessage,
  createConversationObject,
  conversations,
  field,
  freshNamespace,
  kubeConfig,
  sharedCluster,
} from './support/kube';

const { group, version, plural } = ConversationResource;

describe('Conversation CRD on a real API server', () => {
  let kc: KubeConfig;
  let ns: { name: string; dispose: () => Promise<void> };
  let seq = 0;
  const nextName = (): string => `c${++seq}`;

  beforeAll(async () => {
    kc = await kubeConfig();
    ns = await freshNamespace(kc, 'crd');
  });
  afterAll(async () => {
    await ns.dispose();
  });

  const create = (name: string, spec: unknown): Promise<unknown> =>
    createConversationObject(kc, ns.name, name, spec);
  const get = (name: string): Promise<unknown> =>
    conversations(kc).api.getNamespacedCustomObject({
      group,
      version,
      plural,
      namespace: ns.name,
      name,
    });

  it('accepts the samples and prints NAME PHASE READY AGENT MODEL AGE', async () => {
    const kubeconfig = (await sharedCluster()).kubeconfigPath;
    const kubectl = (args: readonly string[]): string =>
      execFileSync(
        join(defaultBinDir, 'kubectl'),
        [`--kubeconfig=${kubeconfig}`, '-n', ns.name, ...args],
        {
          encoding: 'utf8',
        },
      );
    const applied = kubectl(['apply', '-k', join(repoRoot, 'config', 'samples')]);
    expect(applied).toMatch(/conversation.polychrome.dev\/hello created/);
    // Two Conversations, agent-triage.yaml's ModelConfig, two Agents and Conversation, and
    // agent-panel.yaml's four Agents and Conversation.
    expect(applied.trim().split('\n')).toHaveLength(11);

    const status = {
      phase: 'Ready',
      observedGeneration: 1,
      conditions: [
        {
          type: 'Ready',
          status: 'True',
          observedGeneration: 1,
          lastTransitionTime: '2026-11-30T12:00:00Z',
          reason: 'SandboxReady',
          message: 'the harness pod is running',
        },
      ],
    };
    await conversations(kc).api.patchNamespacedCustomObjectStatus({
      group,
      version,
      plural,
      namespace: ns.name,
      name: 'hello',
      body: [{ op: 'add', path: '/status', value: status }],
    });
    // The Agent conversation after triage handed a turn to billing (docs/turns.md, "Agents").
    await conversations(kc).api.patchNamespacedCustomObjectStatus({
      group,
      version,
      plural,
      namespace: ns.name,
      name: 'support-chat',
      body: [{ op: 'add', path: '/status', value: { ...status, agent: 'billing' } }],
    });

    const [header, ...rows] = kubectl(['get', 'conv']).trim().split('\n');
    expect(header?.split(/\s+/)).toEqual(['NAME', 'PHASE', 'READY', 'AGENT', 'MODEL', 'AGE']);
    const row = (name: string) => rows.find((r) => r.startsWith(`${name} `))?.split(/\s+/);
    // An inline agent has no AGENT: kubectl leaves the cell empty.
    expect(row('hello')?.slice(0, 4)).toEqual(['hello', 'Ready', 'True', 'claude-sonnet-5-5']);
    expect(row('support-chat')?.slice(0, 5)).toEqual([
      'support-chat',
      'Ready',
      'True',
      'billing',
      'claude-sonnet-5-5',
    ]);
    expect(rows).toHaveLength(4);
    // The short name and the category resolve too; the category also holds Agents and ModelConfigs.
    expect(kubectl(['get', 'polychrome', '-o', 'name']).trim().split('\n').sort()).toEqual(
      [
        ...rows.map((r) => `conversation.polychrome.dev/${r.split(/\s+/)[0] ?? ''}`),
        ...['billing', 'triage', 'panel-lead', 'researcher', 'skeptic', 'editor'].map(
          (name) => `agent.polychrome.dev/${name}`,
        ),
        'modelconfig.polychrome.dev/claude',
      ].sort(),
    );
  });

  it('applies the schema defaults to a minimal object', async () => {
    const name = nextName();
    await create(name, validMinimalConversationSpec);
    const obj = await get(name);
    expect(field(obj, 'spec', 'agent', 'model')).toBe('claude-sonnet-5-5');
    expect(field(obj, 'spec', 'agent', 'maxSteps')).toBe(8);
    expect(field(obj, 'spec', 'visibility')).toBe('private');
    expect(field(obj, 'spec', 'retention')).toBe('24h');
    expect(field(obj, 'spec', 'sandbox', 'backend')).toBe('agent-sandbox');
  });

  it('accepts the full spec unchanged', async () => {
    const name = nextName();
    await create(name, validFullConversationSpec);
    expect(field(await get(name), 'spec')).toMatchObject(validFullConversationSpec);
  });

  it.each(invalidConversationCases.map((c) => [c.name, c] as const))(
    'rejects %s with a field-specific message',
    async (_name, c) => {
      const name = nextName();
      const err = await create(name, c.spec).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(ApiException);
      expect(err).toMatchObject({ code: 422 });
      expect(apiErrorMessage(err)).toMatch(c.expectMessage);
      // Nothing was stored.
      await expect(get(name)).rejects.toMatchObject({ code: 404 });
    },
  );

  it.each(invalidConversationUpdateCases.map((c) => [c.name, c] as const))(
    'rejects the update %s and keeps the stored object',
    async (_name, c) => {
      const name = nextName();
      await create(name, c.oldSpec);
      const before = await get(name);
      const err = await conversations(kc)
        .api.patchNamespacedCustomObject({
          group,
          version,
          plural,
          namespace: ns.name,
          name,
          body: [{ op: 'replace', path: '/spec', value: c.spec }],
        })
        .then(
          () => undefined,
          (e: unknown) => e,
        );
      expect(err).toMatchObject({ code: 422 });
      expect(apiErrorMessage(err)).toMatch(c.expectMessage);
      expect(field(await get(name), 'spec')).toEqual(field(before, 'spec'));
    },
  );

  it('writes status only through the status subresource', async () => {
    const name = nextName();
    await create(name, validMinimalConversationSpec);
    const api = conversations(kc).api;
    const target = { group, version, plural, namespace: ns.name, name };

    // Through the main resource, status is dropped and the generation stays.
    const replaced: unknown = await api.replaceNamespacedCustomObject({
      ...target,
      body: { ...((await get(name)) as object), status: { phase: 'Ready' } },
    });
    expect(field(replaced, 'status')).toBeUndefined();
    expect(field(replaced, 'metadata', 'generation')).toBe(1);

    // Through /status, status sticks and a smuggled spec change is dropped.
    await api.patchNamespacedCustomObjectStatus({
      ...target,
      body: [
        { op: 'add', path: '/status', value: { phase: 'Pending', observedGeneration: 1 } },
        { op: 'replace', path: '/spec/agent/maxSteps', value: 3 },
      ],
    });
    const after = await get(name);
    expect(field(after, 'status', 'phase')).toBe('Pending');
    expect(field(after, 'spec', 'agent', 'maxSteps')).toBe(8);
    expect(field(after, 'metadata', 'generation')).toBe(1);

    // A spec change moves the generation; status keeps what the controller last observed.
    await api.patchNamespacedCustomObject({
      ...target,
      body: [{ op: 'replace', path: '/spec/agent/maxSteps', value: 4 }],
    });
    const changed = await get(name);
    expect(field(changed, 'metadata', 'generation')).toBe(2);
    expect(field(changed, 'status', 'observedGeneration')).toBe(1);
  });
});
