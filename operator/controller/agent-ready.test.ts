import { describe, expect, it } from '@jest/globals';
import type { AgentResourceSpec } from '../api/v1alpha1/agent-resource';
import type { Condition } from '../api/v1alpha1/conversation-status';
import type { AgentReadyInput } from './agent-ready';
import { agentReady, agentTargets } from './agent-ready';

const ready = (status: 'True' | 'False', reason: string): Condition => ({
  type: 'Ready',
  status,
  lastTransitionTime: '2026-12-01T00:00:00Z',
  reason,
  message: '',
});
const spec: AgentResourceSpec = {
  modelRef: { name: 'claude' },
  handoffs: ['billing', 'refunds'],
  delegates: ['search', 'billing'],
};
const existing =
  (...names: string[]) =>
  (name: string) =>
    names.includes(name);
const modelReady = { ready: ready('True', 'Resolved') };
const all = existing('billing', 'refunds', 'search');

describe('agentReady', () => {
  it.each<[string, AgentReadyInput, string, string, string]>([
    [
      'everything resolves',
      { spec, modelConfig: modelReady, agentExists: all },
      'True',
      'Resolved',
      'ModelConfig claude is Ready and every handoff and delegate exists',
    ],
    [
      'no targets at all',
      { spec: { modelRef: { name: 'claude' } }, modelConfig: modelReady, agentExists: existing() },
      'True',
      'Resolved',
      'ModelConfig claude is Ready and every handoff and delegate exists',
    ],
    [
      'ModelConfig missing',
      { spec, modelConfig: undefined, agentExists: all },
      'False',
      'ModelConfigNotFound',
      'ModelConfig claude does not exist in this namespace: create it or fix spec.modelRef.name',
    ],
    [
      'ModelConfig not Ready names its reason',
      { spec, modelConfig: { ready: ready('False', 'SecretForbidden') }, agentExists: all },
      'False',
      'ModelConfigNotReady',
      'ModelConfig claude is not Ready (SecretForbidden): see kubectl describe modelconfig claude',
    ],
    [
      'ModelConfig not reconciled yet',
      { spec, modelConfig: { ready: undefined }, agentExists: all },
      'False',
      'ModelConfigNotReady',
      'ModelConfig claude is not Ready (not reconciled yet): see kubectl describe modelconfig claude',
    ],
    [
      'every missing target is named',
      { spec, modelConfig: modelReady, agentExists: existing('refunds') },
      'False',
      'TargetNotFound',
      'no Agent billing (handoffs), search (delegates) in this namespace: create them or remove them from the list',
    ],
    [
      'both problems: the ModelConfig is the reason, the message has both',
      { spec, modelConfig: undefined, agentExists: existing('billing', 'refunds') },
      'False',
      'ModelConfigNotFound',
      'ModelConfig claude does not exist in this namespace: create it or fix spec.modelRef.name; no Agent search (delegates) in this namespace: create it or remove it from the list',
    ],
  ])('%s', (_name, input, status, reason, message) => {
    expect(agentReady(input)).toEqual({ status, reason, message });
  });

  it('lists each target once, handoffs first', () => {
    expect(agentTargets(spec)).toEqual(['billing', 'refunds', 'search']);
  });
});
