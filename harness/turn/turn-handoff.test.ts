import { describe, expect, it } from '@jest/globals';
import type { OutputBlock } from '../../common/model/model-port';
import { decodeAgentConfig, hex } from './agent-config';
import { handoffTool, handoffToolFor } from './reserved-tools';
import type { TurnAgent } from './turn-agents';
import { modelReply, runTurn } from './testdata/machine-run';
import type { StepResult, TurnEffect, TurnInput } from './turn-machine';
import type { TurnStep, TurnTool } from './turn-records';

/**
 * Handoffs that continue the turn (docs/turns.md, "Handoffs"): the pure machine decides
 * each `__handoff_to` from what the turn was given, so these tables are also what replay
 * relies on.
 */

const lookup: TurnTool = {
  name: 'lookup',
  description: 'lookup',
  inputSchema: { type: 'object' },
  effect: 'pure',
  needsApproval: false,
};
const model = { model: 'm', maxTokens: 100 };

const billing: TurnAgent = {
  name: 'billing',
  system: 'You are billing.',
  tools: [lookup, handoffTool],
  model,
  handoffs: ['triage'],
};
const refunds: TurnAgent = {
  name: 'refunds',
  system: 'You are refunds.',
  tools: [],
  model,
  handoffs: [],
};

/** Starts as `triage`, which may hand off to billing, refunds and ghost (given no agent). */
const input: TurnInput = {
  turnId: 't1',
  history: [],
  userMessage: 'my invoice is wrong',
  system: 'You are triage.',
  tools: [lookup, handoffTool],
  model,
  agentName: 'triage',
  handoffs: ['billing', 'refunds', 'ghost'],
  agents: [billing, refunds],
  budget: { directive: 4 },
  recordedSteps: [],
  approvalAnswers: [],
  questionAnswers: [],
};

const handoff = (id: string, agent: unknown, reason = 'an invoice'): OutputBlock => ({
  type: 'tool_use',
  id,
  name: '__handoff_to',
  input: { agent: agent as string, reason },
});
const text = (value: string): OutputBlock => ({ type: 'text', text: value });

function brief(effect: TurnEffect): string {
  switch (effect.type) {
    case 'commit_step':
      return briefStep(effect.step);
    case 'call_model':
      return `call_model ${effect.step}${effect.closing ? ' closing' : ''}`;
    case 'finish':
      return `finish ${JSON.stringify(effect.text)} steps=${effect.steps}`;
    case 'fail':
      return `fail ${effect.code}`;
    default:
      return effect.type;
  }
}

function briefStep(step: TurnStep): string {
  switch (step.kind) {
    case 'agent_config':
      return `commit agent_config ${decodeAgentConfig(step.record.configJson).config.agent ?? ''}`;
    case 'agent_handoff':
      return `commit agent_handoff ${step.record.fromAgent}->${step.record.toAgent}`;
    case 'model_call':
      return `commit model_call ${step.record.step} by ${step.record.agent ?? '-'}`;
    case 'tool_call':
      return `commit tool_call ${step.record.toolCallId} by ${step.record.agent ?? '-'}`;
    case 'tool_result':
      return `commit tool_result ${step.record.toolCallId}${step.record.isError ? ' error' : ''}`;
  }
}

const requestOf = (result: StepResult) => {
  const call = result.effects.find((e) => e.type === 'call_model');
  if (call?.type !== 'call_model') throw new Error('no call_model');
  return call.request;
};
const resultOf = (result: StepResult, id: string): string => {
  for (const effect of result.effects) {
    if (
      effect.type === 'commit_step' &&
      effect.step.kind === 'tool_result' &&
      effect.step.record.toolCallId === id
    ) {
      return effect.step.record.content;
    }
  }
  throw new Error(`no tool_result ${id}`);
};

describe('a handoff continues the turn under the target agent', () => {
  it('commits the result, the handoff and the target configuration, then asks the target', () => {
    const [start, moved, done] = runTurn(
      input,
      modelReply(20, handoff('h1', 'billing')),
      modelReply(20, text('Your invoice is fixed.')),
    );
    expect(start!.effects.map(brief)).toEqual(['commit agent_config triage', 'call_model 1']);
    expect(moved!.effects.map(brief)).toEqual([
      'commit model_call 1 by triage',
      'commit tool_result h1',
      'commit agent_handoff triage->billing',
      'commit agent_config billing',
      'call_model 2',
    ]);
    expect(resultOf(moved!, 'h1')).toBe(
      'Handed off to billing by triage. You are billing and answer from here. Reason given: an invoice',
    );
    // The target's own prompt and tools, with the whole turn so far.
    expect(moved!.effects.at(-1)).toMatchObject({ type: 'call_model', agent: 'billing' });
    const request = requestOf(moved!);
    expect(request.system).toBe('You are billing.');
    expect(request.tools.map((t) => t.name)).toEqual(['lookup', '__handoff_to']);
    expect(request.messages.map((m) => m.role)).toEqual(['user', 'assistant', 'user']);
    expect(done!.effects.map(brief)).toEqual([
      'commit model_call 2 by billing',
      'finish "Your invoice is fixed." steps=2',
    ]);
  });

  it('names the agent on every tool call and shares one step budget', () => {
    const use = (id: string): OutputBlock => ({ type: 'tool_use', id, name: 'lookup', input: {} });
    const results = runTurn(
      { ...input, budget: { directive: 2 } },
      modelReply(20, use('a1'), handoff('h1', 'billing')),
      { type: 'tool_finished', toolCallId: 'a1', outcome: { content: 'x', isError: false } },
      modelReply(20, use('b1')),
      { type: 'tool_finished', toolCallId: 'b1', outcome: { content: 'y', isError: false } },
    );
    expect(results[1]?.effects.map(brief)).toContain('commit tool_call a1 by triage');
    // The handoff waited for its sibling, then moved the turn.
    expect(results[2]?.effects.map(brief)).toEqual([
      'commit tool_result a1',
      'commit tool_result h1',
      'commit agent_handoff triage->billing',
      'commit agent_config billing',
      'call_model 2',
    ]);
    expect(results[3]?.effects.map(brief)).toContain('commit tool_call b1 by billing');
    // Two steps were the whole budget, across both agents: the next call is the closing one.
    expect(results[4]?.effects.map(brief)).toEqual([
      'commit tool_result b1',
      'call_model 3 closing',
    ]);
  });
});

describe('a handoff that may not happen is refused with a reason the model reads', () => {
  const cases: readonly [string, TurnInput, OutputBlock[], string][] = [
    [
      'a target this agent may not hand off to',
      { ...input, handoffs: ['refunds'] },
      [handoff('h1', 'billing')],
      'Handoff to billing refused: Agent triage may hand off only to refunds.',
    ],
    [
      'an agent with no targets',
      { ...input, handoffs: [] },
      [handoff('h1', 'billing')],
      'Agent triage may not hand off to any agent.',
    ],
    [
      'itself',
      { ...input, handoffs: ['triage', 'billing'] },
      [handoff('h1', 'triage')],
      'you are triage. Answer the user yourself.',
    ],
    [
      'an agent the turn was not given',
      input,
      [handoff('h1', 'ghost')],
      'agent ghost is not available to this conversation',
    ],
    [
      'a second handoff in the same reply',
      input,
      [handoff('h1', 'billing'), handoff('h2', 'refunds')],
      'this reply already hands the turn to billing',
    ],
    [
      'arguments without an agent',
      input,
      [handoff('h1', 42)],
      '__handoff_to needs arguments of the form { agent: string, reason?: string }.',
    ],
  ];
  it.each(cases)('%s', (_name, start, blocks, reason) => {
    const [, refused] = runTurn(start, modelReply(20, ...blocks));
    const id = blocks.length === 2 ? 'h2' : 'h1';
    expect(resultOf(refused!, id)).toContain(reason);
    const effects = refused!.effects.map(brief);
    expect(effects).toContain(`commit tool_result ${id} error`);
    if (blocks.length === 1) {
      // Nothing moved: the same agent is asked again, with the refusal as the call's result.
      expect(effects.filter((e) => e.includes('agent_handoff'))).toEqual([]);
      expect(effects.at(-1)).toBe('call_model 2');
      expect(requestOf(refused!).system).toBe('You are triage.');
    }
  });

  it('refuses a handoff back to an agent that already answered in the turn (a cycle)', () => {
    const [, , back] = runTurn(
      input,
      modelReply(20, handoff('h1', 'billing')),
      modelReply(20, handoff('h2', 'triage')),
    );
    expect(resultOf(back!, 'h2')).toContain(
      'triage already answered in this turn (triage -> billing -> triage would be a cycle)',
    );
    expect(back!.effects.map(brief)).toEqual([
      'commit model_call 2 by billing',
      'commit tool_result h2 error',
      'call_model 3',
    ]);
  });
});

describe('a resumed turn moves to the same agent again without committing twice', () => {
  it('replays the recorded handoff and asks the target for the next step', () => {
    const [, moved] = runTurn(input, modelReply(20, handoff('h1', 'billing')));
    const recordedSteps = moved!.effects.flatMap((e) =>
      e.type === 'commit_step' && e.step.kind !== 'agent_config' ? [e.step] : [],
    );
    const billingConfig = moved!.effects.find(
      (e) => e.type === 'commit_step' && e.step.kind === 'agent_config',
    );
    if (billingConfig?.type !== 'commit_step' || billingConfig.step.kind !== 'agent_config') {
      throw new Error('no billing config');
    }
    const [resumed] = runTurn({
      ...input,
      recordedSteps,
      recordedConfigSha256: hex(billingConfig.step.record.sha256),
    });
    // Each configuration is committed again where it starts to apply in this attempt.
    expect(resumed!.effects.map(brief)).toEqual([
      'commit agent_config triage',
      'commit agent_config billing',
      'call_model 2',
    ]);
    expect(requestOf(resumed!).system).toBe('You are billing.');
  });

  it('fails when the recorded handoff went to another agent', () => {
    const [, moved] = runTurn(input, modelReply(20, handoff('h1', 'billing')));
    const recordedSteps = moved!.effects.flatMap((e): TurnStep[] => {
      if (e.type !== 'commit_step' || e.step.kind === 'agent_config') return [];
      if (e.step.kind !== 'agent_handoff') return [e.step];
      return [{ kind: 'agent_handoff', record: { ...e.step.record, toAgent: 'refunds' } }];
    });
    const [resumed] = runTurn({ ...input, recordedSteps });
    expect(resumed!.effects.map(brief).at(-1)).toBe('fail failed_precondition');
  });
});

describe('what the turn is given', () => {
  it('refuses an agent given twice', () => {
    const [start] = runTurn({ ...input, agents: [billing, billing] });
    expect(start!.effects.map(brief)).toEqual(['fail failed_precondition']);
  });

  it('ends the turn with a handoff marker when no handoffs are given (journals before handoffs continued)', () => {
    const legacy: TurnInput = { ...input, handoffs: undefined, agents: undefined };
    const [, ended] = runTurn(legacy, modelReply(20, handoff('h1', 'billing')));
    expect(ended!.effects.map(brief)).toEqual(['commit model_call 1 by triage', 'handoff']);
  });

  it('records the agent and its handoffs in its configuration', () => {
    const [start] = runTurn(input);
    const commit = start!.effects[0];
    if (commit?.type !== 'commit_step' || commit.step.kind !== 'agent_config') throw new Error();
    const { config } = decodeAgentConfig(commit.step.record.configJson);
    expect(config.agent).toBe('triage');
    expect(config.handoffs).toEqual(['billing', 'refunds', 'ghost']);
  });
});

describe('the __handoff_to an agent is offered', () => {
  it('names exactly its targets, each with what it does', () => {
    const tool = handoffToolFor([
      { name: 'billing', description: 'Invoices and refunds.' },
      { name: 'legal', description: '' },
    ]);
    expect(tool.name).toBe('__handoff_to');
    expect(tool.inputSchema).toMatchObject({
      properties: { agent: { type: 'string', enum: ['billing', 'legal'] } },
      required: ['agent'],
    });
    expect(tool.description).toContain('\n- billing: Invoices and refunds.\n- legal');
    // Its policy is the reserved tool's: the machine handles it, nothing runs.
    expect([tool.effect, tool.needsApproval]).toEqual(['pure', false]);
  });
});
