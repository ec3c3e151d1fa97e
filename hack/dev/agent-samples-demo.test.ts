/**
 * `make dev SAMPLE=panel` and `SAMPLE=triage` without an API key (hack/lib/dev-samples.ts):
 * the samples' own Agents, the ModelConfig `make dev` writes, and a turn through the real
 * turn path (test/support/real-turns.ts: the coordinator, the real harness server and turn
 * machine) whose model calls the control plane's relay makes through the real Anthropic SDK
 * to the demo endpoint: the local Messages API server answering from the samples' agent
 * scripts, the responder `make dev` runs (hack/demo-model.ts). The full dev stack runs the
 * same pieces as processes.
 */
import { afterEach, describe, expect, it } from '@jest/globals';
import type { KubernetesObject } from '@kubernetes/client-node';
import { join } from 'node:path';
import { agentScriptsFromFile } from '../../harness/model/agent-scripts';
import { agentSchema, modelConfigSchema } from '../../operator/api/v1alpha1/agent-crds';
import type { Agent } from '../../operator/api/v1alpha1/agent-resource';
import { conversationSchema } from '../../operator/api/v1alpha1/conversation-crd';
import { checkAgainstSchema } from '../../operator/api/v1alpha1/schema-check';
import { startAgentTurns } from '../../test/support/agent-turns';
import { demoResponder } from '../lib/demo-model';
import {
  DEMO_MODEL_PORT,
  demoAgents,
  devModel,
  DEV_SAMPLES,
  sampleObjects,
  type DevSample,
} from '../lib/dev-samples';
import { repoRoot } from '../lib/paths';

let closers: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const close of closers.reverse()) await close();
  closers = [];
});

const schemas: Readonly<Record<string, Parameters<typeof checkAgainstSchema>[0]>> = {
  Agent: agentSchema,
  ModelConfig: modelConfigSchema,
  Conversation: conversationSchema,
};

/** The sample's Conversation's entry Agent. */
function entryOf(objects: readonly KubernetesObject[], conversation: string): string {
  const chat = objects.find((o) => o.kind === 'Conversation' && o.metadata?.name === conversation);
  const spec: unknown = chat === undefined ? undefined : Reflect.get(chat, 'spec');
  const ref: unknown =
    typeof spec === 'object' && spec !== null ? Reflect.get(spec, 'agentRef') : undefined;
  const name: unknown =
    typeof ref === 'object' && ref !== null ? Reflect.get(ref, 'name') : undefined;
  if (typeof name !== 'string') throw new Error(`no Conversation ${conversation} with an agentRef`);
  return name;
}

/** One turn of the sample on the demo endpoint, through the relay. */
async function demoTurn(sample: DevSample) {
  const objects = sampleObjects(sample);
  const scripts = await agentScriptsFromFile(join(repoRoot, sample.script));
  // Agents by the schema (the test below checks each against it).
  const agents = objects.filter((o) => o.kind === 'Agent') as unknown as Agent[];
  // The ModelConfig make dev writes, its endpoint on this test's port; as the sample's
  // Conversation: its entry Agent, and no tools (nor approvals) of its own.
  const { api, post, events, close } = await startAgentTurns({
    agents: new Map(agents.map((a) => [a.metadata.name ?? '', a])),
    entry: entryOf(objects, sample.conversation),
    respond: demoResponder(scripts, demoAgents(objects)),
    model: devModel({}).spec,
    spec: { tools: {} },
  });
  closers.push(close);
  const answer = await post(sample.question, 'first');
  return { answer, events, api };
}

describe('the Agent samples make dev starts', () => {
  it('writes a ModelConfig the schema takes: the demo endpoint without a key, the key only by reference', () => {
    const demo = devModel({});
    expect(demo).toMatchObject({ demo: true });
    expect(demo.spec.baseUrl).toBe(`http://127.0.0.1:${String(DEMO_MODEL_PORT)}`);
    const keyed = devModel({ ANTHROPIC_API_KEY: 'sk-ant-dev-only' });
    expect(JSON.stringify(keyed.spec)).not.toContain('sk-ant-dev-only');
    expect(keyed.description).not.toContain('sk-ant-dev-only');
    for (const { spec } of [demo, keyed, devModel({ OPENAI_API_KEY: 'sk-o' })]) {
      const obj = {
        apiVersion: 'polychrome.dev/v1alpha1',
        kind: 'ModelConfig',
        metadata: { name: 'claude' },
        spec,
      };
      expect(checkAgainstSchema(modelConfigSchema, obj, '')).toEqual([]);
    }
  });

  it.each(Object.values(DEV_SAMPLES))(
    '$name: its objects pass the schema, and every Agent has a script',
    async (sample) => {
      const objects = sampleObjects(sample);
      expect(objects.some((o) => o.kind === 'ModelConfig')).toBe(false);
      for (const obj of objects) {
        const schema = schemas[obj.kind ?? ''];
        if (schema === undefined)
          throw new Error(`${sample.file}: unexpected kind ${String(obj.kind)}`);
        expect(checkAgainstSchema(schema, obj, '')).toEqual([]);
      }
      const scripts = await agentScriptsFromFile(join(repoRoot, sample.script));
      expect([...scripts.keys()].sort()).toEqual(
        demoAgents(objects)
          .map((a) => a.name)
          .sort(),
      );
    },
  );

  it('panel: the lead asks its three panelists on threads of their own and answers from theirs', async () => {
    const { answer, events, api } = await demoTurn(DEV_SAMPLES.panel!);
    expect(answer).toMatchObject({ status: 'complete' });
    expect(answer.reply).toMatch(/^The panel's answer: /u);
    const calls = await events('model_call');
    expect(calls.map((c) => [c.agent, c.depth])).toEqual([
      ['panel-lead', 0],
      ['researcher', 1],
      ['skeptic', 1],
      ['editor', 1],
      ['panel-lead', 0],
    ]);
    const asks = (await events('tool_call')).filter((c) => c.toolName === '__delegate_to');
    expect(asks.map((c) => JSON.parse(c.argsJson) as unknown)).toEqual([
      expect.objectContaining({ agent: 'researcher' }),
      expect.objectContaining({ agent: 'skeptic' }),
      expect.objectContaining({ agent: 'editor' }),
    ]);
    // Each thread's answer is its panelist's scripted one, and closes the thread it opened.
    const answers = (await events('tool_result')).filter((r) => r.delegate !== '');
    expect(answers.map((r) => [r.toolCallId, r.delegate, r.content.split(':')[0]])).toEqual([
      [asks[0]?.toolCallId, 'researcher', 'Researcher'],
      [asks[1]?.toolCallId, 'skeptic', 'Skeptic'],
      [asks[2]?.toolCallId, 'editor', 'Editor'],
    ]);
    expect(calls.slice(1, 4).map((c) => c.thread)).toEqual(asks.map((c) => c.toolCallId));
    expect(api.requests).toHaveLength(5);
  });

  it('triage: triage hands the turn to billing, which uses the calculator and answers', async () => {
    const { answer, events } = await demoTurn(DEV_SAMPLES.triage!);
    expect(answer).toMatchObject({ status: 'complete' });
    expect(answer.reply).toMatch(/^You were charged twice/u);
    expect(await events('agent_handoff')).toEqual([
      expect.objectContaining({ fromAgent: 'triage', toAgent: 'billing' }),
    ]);
    const results = await events('tool_result');
    expect(results.map((r) => r.content)).toContain('39.98');
  });
});
