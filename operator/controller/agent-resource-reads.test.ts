import { describe, expect, it } from '@jest/globals';
import { validFullAgentSpec, validFullModelConfigSpec } from '../api/v1alpha1/agent-cases';
import { isAgent, isModelConfig } from './agent-resource-reads';

const meta = { name: 'triage', namespace: 'team-a' };
const agent = {
  apiVersion: 'polychrome.dev/v1alpha1',
  kind: 'Agent',
  metadata: meta,
  spec: validFullAgentSpec,
};
const model = {
  apiVersion: 'polychrome.dev/v1alpha1',
  kind: 'ModelConfig',
  metadata: meta,
  spec: validFullModelConfigSpec,
};

describe('isAgent and isModelConfig', () => {
  it('accept objects that match their CRD', () => {
    expect(isAgent(agent)).toBe(true);
    expect(isModelConfig(model)).toBe(true);
  });

  it.each([
    ['the other kind', { ...agent, kind: 'ModelConfig' }],
    ['another version', { ...agent, apiVersion: 'polychrome.dev/v1beta1' }],
    ['no namespace', { ...agent, metadata: { name: 'triage' } }],
    ['a spec the schema refuses', { ...agent, spec: { ...validFullAgentSpec, maxSteps: 'many' } }],
    ['no modelRef', { ...agent, spec: { systemPrompt: 'x' } }],
    ['not an object', 'triage'],
  ])('refuse an Agent with %s', (_name, value) => {
    expect(isAgent(value)).toBe(false);
  });

  it('refuses a ModelConfig with an unknown provider', () => {
    expect(isModelConfig({ ...model, spec: { ...validFullModelConfigSpec, provider: 'x' } })).toBe(
      false,
    );
  });
});
