import { describe, expect, it } from '@jest/globals';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseAllDocuments } from 'yaml';
import { agentSchema, modelConfigSchema } from './agent-crds';
import { conversationSchema } from './conversation-crd';
import { checkAgainstSchema, isPlainObject } from './schema-check';
import type { Agent } from './agent-resource';
import type { ModelConfig } from './model-config-resource';
import type { AgentDirectory } from '../../controller/agent-resource-reads';
import { resolveRoster } from '../../turns/agent-roster';

const file = join(__dirname, '../../../config/samples/agent-triage.yaml');
const objects = parseAllDocuments(readFileSync(file, 'utf8')).map((d): unknown => {
  const value: unknown = d.toJSON();
  return value;
});
const schemas = {
  Agent: agentSchema,
  ModelConfig: modelConfigSchema,
  Conversation: conversationSchema,
};

function described(obj: unknown): { kind: string; name: string; spec: Record<string, unknown> } {
  if (!isPlainObject(obj) || !isPlainObject(obj['metadata']) || !isPlainObject(obj['spec'])) {
    throw new Error('agent-triage.yaml: an object without metadata or spec');
  }
  return { kind: String(obj['kind']), name: String(obj['metadata']['name']), spec: obj['spec'] };
}

describe('sample agent-triage.yaml', () => {
  const all = objects.map(described);

  it('holds a ModelConfig, the triage and billing Agents and a Conversation starting at triage', () => {
    expect(all.map((o) => `${o.kind}/${o.name}`)).toEqual([
      'ModelConfig/claude',
      'Agent/triage',
      'Agent/billing',
      'Conversation/support-chat',
    ]);
    const [, triage, billing, chat] = all;
    expect(triage?.spec['handoffs']).toEqual(['billing']);
    expect(triage?.spec['modelRef']).toEqual({ name: 'claude' });
    expect(billing?.spec['modelRef']).toEqual({ name: 'claude' });
    expect(chat?.spec).toEqual({ agentRef: { name: 'triage' } });
  });

  it('passes the schema checks that run without an API server', () => {
    for (const obj of objects) {
      const { kind } = described(obj);
      if (kind !== 'Agent' && kind !== 'ModelConfig' && kind !== 'Conversation') {
        throw new Error(`agent-triage.yaml: unexpected kind ${kind}`);
      }
      expect(checkAgainstSchema(schemas[kind], obj, '')).toEqual([]);
    }
  });
});

describe('sample agent-panel.yaml', () => {
  const text = readFileSync(join(__dirname, '../../../config/samples/agent-panel.yaml'), 'utf8');
  const panel = parseAllDocuments(text).map((d): unknown => {
    const value: unknown = d.toJSON();
    return value;
  });

  it('passes the schema checks, and its roster resolves: the lead and its three panelists', () => {
    for (const obj of panel) {
      const { kind } = described(obj);
      if (kind !== 'Agent' && kind !== 'Conversation') {
        throw new Error(`agent-panel.yaml: unexpected kind ${kind}`);
      }
      expect(checkAgainstSchema(schemas[kind], obj, '')).toEqual([]);
    }
    // With agent-triage.yaml's ModelConfig, as both are applied together.
    const all = [...objects, ...panel] as (Agent | ModelConfig)[];
    const directory: AgentDirectory = {
      agent: (name) => all.find((o): o is Agent => o.kind === 'Agent' && o.metadata.name === name),
      modelConfig: (name) =>
        all.find((o): o is ModelConfig => o.kind === 'ModelConfig' && o.metadata.name === name),
    };
    const chat = panel.map(described).find((o) => o.kind === 'Conversation');
    expect(chat?.spec).toEqual({ agentRef: { name: 'panel-lead' } });
    const { roster } = resolveRoster('panel-lead', directory, 'samples');
    expect(roster.agents.map((a) => [a.name, a.delegates ?? []])).toEqual([
      ['editor', []],
      ['panel-lead', ['editor', 'researcher', 'skeptic']],
      ['researcher', []],
      ['skeptic', []],
    ]);
  });
});
