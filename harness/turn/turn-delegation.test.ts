import { describe, expect, it } from '@jest/globals';
import { DELEGATION_DEADLINE_MS, MAX_DELEGATION_DEPTH } from '../../common/delegation';
import type { OutputBlock } from '../../common/model/model-port';
import { decodeAgentConfig, hex } from './agent-config';
import { delegateToolFor, handoffTool } from './reserved-tools';
import type { TurnAgent } from './turn-agents';
import {
  approvalOf,
  committedSteps,
  modelReply,
  runTurn,
  testTool,
  threadReply,
} from './testdata/machine-run';
import type { StepResult, TurnEffect, TurnEvent, TurnInput } from './turn-machine';
import type { ApprovalAnswer, TurnStep } from './turn-records';

/**
 * Delegation, agents as tools (docs/turns.md, "Delegation"): the pure machine runs each
 * `__delegate_to` call as a thread of its own under the delegate, and its answer becomes
 * the call's result. These tables are also what replay relies on.
 */

const lookup = testTool('lookup', 'pure');
const refund = testTool('refund', 'side_effect', true);
const send = testTool('send', 'side_effect');
const model = { model: 'm', maxTokens: 100 };
const targets = (...names: string[]) =>
  delegateToolFor(names.map((name) => ({ name, description: '' })));

/** A researcher that may ask a checker, which may ask the lead back (a cycle) or a clerk. */
const researcher: TurnAgent = {
  name: 'researcher',
  system: 'You research.',
  tools: [lookup, refund, send, handoffTool, targets('checker')],
  model,
  handoffs: ['lead'],
  delegates: ['checker'],
};
const checker: TurnAgent = {
  name: 'checker',
  system: 'You check.',
  tools: [targets('lead', 'clerk')],
  model,
  delegates: ['lead', 'clerk'],
};
const clerk: TurnAgent = {
  name: 'clerk',
  system: 'You file.',
  tools: [targets('archivist')],
  model,
  delegates: ['archivist'],
};
const archivist: TurnAgent = { name: 'archivist', system: 'You archive.', tools: [], model };

/** Starts as `lead`, which may delegate to researcher, checker and ghost (given no agent). */
const input: TurnInput = {
  turnId: 't1',
  history: [{ role: 'user', content: [{ type: 'text', text: 'an earlier message' }] }],
  userMessage: 'is the invoice right?',
  system: 'You lead.',
  tools: [lookup, targets('researcher', 'checker', 'ghost')],
  model,
  agentName: 'lead',
  handoffs: [],
  delegates: ['researcher', 'checker', 'ghost'],
  agents: [researcher, checker, clerk, archivist],
  budget: { directive: 4 },
  recordedSteps: [],
  approvalAnswers: [],
  questionAnswers: [],
};

const delegate = (
  id: string,
  agent: unknown,
  task: unknown = 'check the invoice',
): OutputBlock => ({
  type: 'tool_use',
  id,
  name: '__delegate_to',
  input: { agent: agent as string, task: task as string },
});
const use = (id: string, name: string, args: Record<string, number> = {}): OutputBlock => ({
  type: 'tool_use',
  id,
  name,
  input: args,
});
const text = (value: string): OutputBlock => ({ type: 'text', text: value });
const finished = (id: string, content: string): TurnEvent => ({
  type: 'tool_finished',
  toolCallId: id,
  outcome: { content, isError: false },
});

function brief(effect: TurnEffect): string {
  switch (effect.type) {
    case 'commit_step':
      return briefStep(effect.step);
    case 'call_model':
      return `call_model ${effect.step} ${effect.agent}${effect.thread === undefined ? '' : ` in ${effect.thread}`}`;
    case 'call_tool':
      return `call_tool ${effect.call.toolCallId}`;
    case 'finish':
      return `finish ${JSON.stringify(effect.text)}`;
    case 'fail':
      return `fail ${effect.code}`;
    case 'ambiguous':
      return `ambiguous ${effect.toolCallId}`;
    case 'pause_for_approval':
      return `pause_for_approval ${effect.request.toolCallId}`;
    case 'pause_for_question':
      return `pause_for_question ${effect.request.toolCallId}`;
    default:
      return effect.type;
  }
}

function briefStep(step: TurnStep): string {
  const where = (r: { thread?: string; depth?: number }): string =>
    r.thread === undefined ? '' : ` in ${r.thread}@${r.depth ?? '?'}`;
  switch (step.kind) {
    case 'agent_config':
      return `commit agent_config ${decodeAgentConfig(step.record.configJson).config.agent ?? ''}`;
    case 'agent_handoff':
      return `commit agent_handoff ${step.record.fromAgent}->${step.record.toAgent}`;
    case 'model_call':
      return `commit model_call ${step.record.step} by ${step.record.agent ?? '-'}${where(step.record)}`;
    case 'tool_call':
      return `commit tool_call ${step.record.toolCallId} by ${step.record.agent ?? '-'}${where(step.record)}`;
    case 'tool_result':
      return `commit tool_result ${step.record.toolCallId}${step.record.isError ? ' error' : ''}${step.record.thread === undefined ? '' : ` in ${step.record.thread}`}`;
  }
}

const lastRequest = (result: StepResult) => {
  const call = result.effects.findLast((e) => e.type === 'call_model');
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
const newestConfig = (results: readonly StepResult[]): string => {
  const config = committedSteps(results).findLast((step) => step.kind === 'agent_config');
  if (config?.kind !== 'agent_config') throw new Error('no agent_config');
  return hex(config.record.sha256);
};

describe('a delegate answers on a thread of its own, and its answer is the call result', () => {
  it('commits the intent, runs the delegate with the task alone, and returns its answer', () => {
    const [, asked, answered, done] = runTurn(
      input,
      modelReply(20, delegate('d1', 'researcher')),
      threadReply('d1', 30, text('The invoice is right.')),
      modelReply(40, text('Yes, it is right.')),
    );
    expect(asked!.effects.map(brief)).toEqual([
      'commit model_call 1 by lead',
      'commit tool_call d1 by lead',
      'commit agent_config researcher',
      'call_model 1 researcher in d1',
    ]);
    // The delegate is told the task and nothing of the conversation.
    const request = lastRequest(asked!);
    expect(request.system).toBe('You research.');
    expect(request.messages).toEqual([
      { role: 'user', content: [{ type: 'text', text: 'check the invoice' }] },
    ]);
    expect(answered!.effects.map(brief)).toEqual([
      'commit model_call 1 by researcher in d1@1',
      'commit tool_result d1',
      'call_model 2 lead',
    ]);
    expect(resultOf(answered!, 'd1')).toBe('The invoice is right.');
    expect(lastRequest(answered!).messages.at(-1)?.content).toEqual([
      { type: 'tool_result', toolUseId: 'd1', content: 'The invoice is right.', isError: false },
    ]);
    expect(done!.effects.map(brief)).toEqual([
      // The lead's configuration again: its model call names the newest one.
      'commit agent_config lead',
      'commit model_call 2 by lead',
      'finish "Yes, it is right."',
    ]);
  });

  it('runs a panel of calls in one reply side by side, each answer going to its thread', () => {
    const results = runTurn(
      input,
      modelReply(
        20,
        delegate('d1', 'researcher', 'find it'),
        delegate('d2', 'checker', 'check it'),
      ),
      threadReply('d2', 30, text('checked')),
      threadReply('d1', 40, text('found')),
      modelReply(50, text('Both agree.')),
    );
    // Both threads start at once, in the order asked, each after its intent.
    expect(results[1]!.effects.map(brief)).toEqual([
      'commit model_call 1 by lead',
      'commit tool_call d1 by lead',
      'commit agent_config researcher',
      'call_model 1 researcher in d1',
      'commit tool_call d2 by lead',
      'commit agent_config checker',
      'call_model 1 checker in d2',
    ]);
    expect(results[1]!.state.phase).toBe('awaiting_tools');
    // The checker answers first: its thread closes, the lead still waits for the researcher.
    expect(results[2]!.effects.map(brief)).toEqual([
      'commit model_call 1 by checker in d2@1',
      'commit tool_result d2',
    ]);
    expect(results[2]!.state.phase).toBe('awaiting_tools');
    // The researcher's call names its own configuration, committed again after the checker's.
    expect(results[3]!.effects.map(brief)).toEqual([
      'commit agent_config researcher',
      'commit model_call 1 by researcher in d1@1',
      'commit tool_result d1',
      'call_model 2 lead',
    ]);
    // The answers go back in the order asked, not the order they came.
    expect(lastRequest(results[3]!).messages.at(-1)?.content).toEqual([
      { type: 'tool_result', toolUseId: 'd1', content: 'found', isError: false },
      { type: 'tool_result', toolUseId: 'd2', content: 'checked', isError: false },
    ]);
    expect(results[4]!.effects.map(brief)).toEqual([
      'commit agent_config lead',
      'commit model_call 2 by lead',
      'finish "Both agree."',
    ]);
  });

  it("runs the asking agent's own tools while its delegates work", () => {
    const results = runTurn(
      input,
      modelReply(20, use('l1', 'lookup'), delegate('d1', 'researcher')),
      threadReply('d1', 30, text('found')),
      finished('l1', 'ledger says 40'),
    );
    expect(results[1]!.effects.map(brief)).toEqual([
      'commit model_call 1 by lead',
      'commit tool_call l1 by lead',
      'call_tool l1',
      'commit tool_call d1 by lead',
      'commit agent_config researcher',
      'call_model 1 researcher in d1',
    ]);
    expect(results[2]!.effects.map(brief)).toEqual([
      'commit model_call 1 by researcher in d1@1',
      'commit tool_result d1',
    ]);
    expect(results[3]!.effects.map(brief)).toEqual(['commit tool_result l1', 'call_model 2 lead']);
  });

  it('names the thread and depth on the delegate tool calls, and routes their results to it', () => {
    const results = runTurn(
      input,
      modelReply(20, delegate('d1', 'researcher')),
      threadReply('d1', 30, use('l1', 'lookup')),
      finished('l1', 'ledger says 40'),
      threadReply('d1', 50, text('40, as billed')),
    );
    expect(results[2]!.effects.map(brief)).toEqual([
      'commit model_call 1 by researcher in d1@1',
      'commit tool_call l1 by researcher in d1@1',
      'call_tool l1',
    ]);
    expect(results[3]!.effects.map(brief)).toEqual([
      'commit tool_result l1 in d1',
      'call_model 2 researcher in d1',
    ]);
    expect(resultOf(results[4]!, 'd1')).toBe('40, as billed');
  });
});

/** The signed approval of the call `r1`, `refund` with `{"n":1}`, in turn t1. */
function approvedRefund(): ApprovalAnswer {
  return approvalOf({ turnId: 't1', toolCallId: 'r1', toolName: 'refund', argsJson: '{"n":1}' });
}

describe('a panel runs its threads side by side', () => {
  const panel = modelReply(
    20,
    delegate('d1', 'researcher', 'find it'),
    delegate('d2', 'checker', 'check it'),
  );

  it('refuses a model answer for a thread that has no call in flight, or none named', () => {
    const started = runTurn(input, panel);
    const machineAt = (events: TurnEvent[]) => () => runTurn(input, panel, ...events);
    expect(started[1]!.state.phase).toBe('awaiting_tools');
    expect(machineAt([threadReply('d9', 30, text('hi'))])).toThrow(
      'no model call of thread d9 is in flight',
    );
    // The lead waits for its delegates: an answer that names no thread is not its.
    expect(machineAt([modelReply(30, text('hi'))])).toThrow(
      'no model call of the turn is in flight',
    );
    // A closed thread takes no second answer.
    expect(
      machineAt([threadReply('d1', 30, text('found')), threadReply('d1', 31, text('again'))]),
    ).toThrow('no model call of thread d1 is in flight');
  });

  it('pauses the turn for a thread only once its siblings have settled', () => {
    const answer = approvedRefund();
    const results = runTurn(
      input,
      modelReply(20, delegate('d1', 'researcher', 'refund it'), delegate('d2', 'checker')),
      threadReply('d1', 30, use('r1', 'refund', { n: 1 })),
      threadReply('d2', 40, text('checked')),
      { type: 'approval_answered', answer },
      finished('r1', 'refunded'),
      threadReply('d1', 60, text('refunded')),
    );
    // The researcher waits for a person while the checker still works: no pause yet.
    expect(results[2]!.effects.map(brief)).toEqual([
      'commit agent_config researcher',
      'commit model_call 1 by researcher in d1@1',
    ]);
    expect(results[2]!.state.phase).toBe('awaiting_tools');
    expect(results[3]!.effects.map(brief)).toEqual([
      'commit agent_config checker',
      'commit model_call 1 by checker in d2@1',
      'commit tool_result d2',
      'pause_for_approval r1',
    ]);
    expect(results[4]!.effects.map(brief)).toEqual([
      'commit tool_call r1 by researcher in d1@1',
      'call_tool r1',
    ]);
    expect(results[6]!.effects.map(brief)).toEqual([
      'commit agent_config researcher',
      'commit model_call 2 by researcher in d1@1',
      'commit tool_result d1',
      'call_model 2 lead',
    ]);
  });

  it('a resumed dispatch rebuilds every thread from interleaved steps and asks only the open one', () => {
    const first = runTurn(input, panel, threadReply('d2', 30, text('checked')));
    const [resumed, answered] = runTurn(
      {
        ...input,
        recordedSteps: committedSteps(first),
        recordedConfigSha256: newestConfig(first),
      },
      threadReply('d1', 40, text('found')),
    );
    // Nothing recorded is committed or asked again: only the researcher's call is open, and
    // the checker's thread, whose result is recorded, does not start.
    expect(resumed!.effects.map(brief)).toEqual([
      'commit agent_config lead',
      'commit agent_config researcher',
      'call_model 1 researcher in d1',
    ]);
    expect(answered!.effects.map(brief)).toEqual([
      'commit model_call 1 by researcher in d1@1',
      'commit tool_result d1',
      'call_model 2 lead',
    ]);
    expect(lastRequest(answered!).messages.at(-1)?.content).toEqual([
      { type: 'tool_result', toolUseId: 'd1', content: 'found', isError: false },
      { type: 'tool_result', toolUseId: 'd2', content: 'checked', isError: false },
    ]);
  });

  it("one thread's model failure fails the turn while another still works", () => {
    const results = runTurn(input, panel, {
      type: 'model_failed',
      code: 'resource_exhausted',
      message: 'context too long',
      retryable: false,
      thread: 'd2',
    });
    expect(results[2]!.effects).toEqual([
      { type: 'fail', code: 'resource_exhausted', message: 'context too long', retryable: false },
    ]);
    expect(results[2]!.state.phase).toBe('done');
  });
});

describe('a delegation is refused with a reason, and the asking agent goes on', () => {
  const depth3 = (): TurnInput => ({ ...input, delegates: ['researcher'] });
  it.each<[string, OutputBlock, string]>([
    [
      'an agent it may not delegate to',
      delegate('d1', 'clerk'),
      'Delegation to clerk refused: Agent lead may delegate only to researcher, checker, ghost. Do the task yourself or pick one of those.',
    ],
    [
      'itself',
      delegate('d1', 'lead'),
      'Delegation to lead refused: Agent lead may delegate only to researcher, checker, ghost. Do the task yourself or pick one of those.',
    ],
    [
      'an agent the turn was not given',
      delegate('d1', 'ghost'),
      'Delegation to ghost refused: agent ghost is not available to this conversation (it may have been deleted or may not be ready). Do the task yourself.',
    ],
    [
      'arguments without a task',
      delegate('d1', 'researcher', ''),
      '__delegate_to needs arguments of the form { agent: string, task: string } with a task that is not empty.',
    ],
  ])('%s', (_, call, refusal) => {
    const [, asked] = runTurn(input, modelReply(20, call));
    expect(asked!.effects.map(brief)).toEqual([
      'commit model_call 1 by lead',
      'commit tool_result d1 error',
      'call_model 2 lead',
    ]);
    expect(resultOf(asked!, 'd1')).toBe(refusal);
  });

  it('a cycle back to an agent above the thread', () => {
    const results = runTurn(
      input,
      modelReply(20, delegate('d1', 'checker')),
      threadReply('d1', 30, delegate('d2', 'lead')),
    );
    expect(results[2]!.effects.map(brief)).toEqual([
      'commit model_call 1 by checker in d1@1',
      'commit tool_result d2 error in d1',
      'call_model 2 checker in d1',
    ]);
    expect(resultOf(results[2]!, 'd2')).toBe(
      'Delegation to lead refused: lead is already working on this request above you (lead -> checker -> lead would be a cycle). Do the task yourself.',
    );
  });

  it(`a thread deeper than ${MAX_DELEGATION_DEPTH}`, () => {
    const results = runTurn(
      depth3(),
      modelReply(20, delegate('d1', 'researcher')),
      threadReply('d1', 30, delegate('d2', 'checker')),
      threadReply('d2', 40, delegate('d3', 'clerk')),
      threadReply('d3', 50, delegate('d4', 'archivist')),
    );
    expect(results[3]!.effects.map(brief)).toContain('call_model 1 clerk in d3');
    expect(results[4]!.effects.map(brief)).toEqual([
      'commit model_call 1 by clerk in d3@3',
      'commit tool_result d4 error in d3',
      'call_model 2 clerk in d3',
    ]);
    expect(resultOf(results[4]!, 'd4')).toBe(
      `Delegation to archivist refused: delegations nest at most ${MAX_DELEGATION_DEPTH} deep and this one would be 4 deep. Do the task yourself.`,
    );
  });

  it('a handoff from inside a thread', () => {
    const handoff: OutputBlock = {
      type: 'tool_use',
      id: 'h1',
      name: '__handoff_to',
      input: { agent: 'lead' },
    };
    const results = runTurn(
      input,
      modelReply(20, delegate('d1', 'researcher')),
      threadReply('d1', 30, handoff),
    );
    expect(results[2]!.effects.map(brief)).toEqual([
      'commit model_call 1 by researcher in d1@1',
      'commit tool_result h1 error in d1',
      'call_model 2 researcher in d1',
    ]);
    expect(resultOf(results[2]!, 'h1')).toBe(
      'Handoff refused: you are doing a task lead delegated to you. Answer it yourself: your answer goes back to that agent.',
    );
  });

  it('a thread that answers after its deadline gives its caller the deadline, not the answer', () => {
    const late = 20 + DELEGATION_DEADLINE_MS + 1;
    const results = runTurn(
      input,
      modelReply(20, delegate('d1', 'researcher')),
      threadReply('d1', late, use('s1', 'send')),
    );
    // The late reply is recorded; its side-effecting call never starts.
    expect(results[2]!.effects.map(brief)).toEqual([
      'commit model_call 1 by researcher in d1@1',
      'commit tool_result d1 error',
      'call_model 2 lead',
    ]);
    expect(resultOf(results[2]!, 'd1')).toBe(
      'Delegation to researcher stopped: it ran past its deadline of 300 s without answering. Do the task yourself or ask for less.',
    );
  });
});

describe('what happens in a thread happens to the turn', () => {
  it("a delegate's gated call pauses the whole turn, and the answer runs it in the thread", () => {
    const results = runTurn(
      input,
      modelReply(20, delegate('d1', 'researcher')),
      threadReply('d1', 30, use('r1', 'refund', { n: 1 })),
      { type: 'approval_answered', answer: approvedRefund() },
      finished('r1', 'refunded'),
    );
    expect(results[2]!.effects.map(brief)).toEqual([
      'commit model_call 1 by researcher in d1@1',
      'pause_for_approval r1',
    ]);
    expect(results[2]!.state.phase).toBe('paused');
    expect(results[3]!.effects.map(brief)).toEqual([
      'commit tool_call r1 by researcher in d1@1',
      'call_tool r1',
    ]);
    expect(results[4]!.effects.map(brief)).toEqual([
      'commit tool_result r1 in d1',
      'call_model 2 researcher in d1',
    ]);
  });

  it('a resumed dispatch runs the approved call in the thread from the recorded steps', () => {
    const first = runTurn(
      input,
      modelReply(20, delegate('d1', 'researcher')),
      threadReply('d1', 30, use('r1', 'refund', { n: 1 })),
    );
    const [resumed] = runTurn({
      ...input,
      recordedSteps: committedSteps(first),
      recordedConfigSha256: newestConfig(first),
      approvalAnswers: [approvedRefund()],
    });
    // No step is committed twice and no model asked again; the attempt names each agent's
    // configuration as it enters it (the journal's newest is the researcher's), as a
    // resumed handoff does.
    expect(resumed!.effects.map(brief)).toEqual([
      'commit agent_config lead',
      'commit agent_config researcher',
      'commit tool_call r1 by researcher in d1@1',
      'call_tool r1',
    ]);
  });

  it('a side-effecting call committed in a thread with no result quarantines the resumed turn', () => {
    const first = runTurn(
      input,
      modelReply(20, delegate('d1', 'researcher')),
      threadReply('d1', 30, use('s1', 'send')),
    );
    expect(first[2]!.effects.map(brief)).toContain('call_tool s1');
    const [resumed] = runTurn({
      ...input,
      recordedSteps: committedSteps(first),
      recordedConfigSha256: newestConfig(first),
    });
    expect(resumed!.effects.map(brief)).toEqual([
      'commit agent_config lead',
      'commit agent_config researcher',
      'ambiguous s1',
    ]);
  });

  it("a resolved quarantine in a thread (the admin's result, in the thread) lets the thread go on", () => {
    const first = runTurn(
      input,
      modelReply(20, delegate('d1', 'researcher')),
      threadReply('d1', 30, use('s1', 'send')),
    );
    const resolved: TurnStep = {
      kind: 'tool_result',
      record: {
        turnId: 't1',
        toolCallId: 's1',
        content: 'sent',
        isError: false,
        denied: false,
        thread: 'd1',
      },
    };
    const [resumed] = runTurn({
      ...input,
      recordedSteps: [...committedSteps(first), resolved],
      recordedConfigSha256: newestConfig(first),
    });
    expect(resumed!.effects.map(brief)).toEqual([
      'commit agent_config lead',
      'commit agent_config researcher',
      'call_model 2 researcher in d1',
    ]);
  });

  it('a pure call committed in a thread with no result runs again in it', () => {
    const first = runTurn(
      input,
      modelReply(20, delegate('d1', 'researcher')),
      threadReply('d1', 30, use('l1', 'lookup')),
    );
    const [resumed] = runTurn({
      ...input,
      recordedSteps: committedSteps(first),
      recordedConfigSha256: newestConfig(first),
    });
    expect(resumed!.effects.map(brief)).toEqual([
      'commit agent_config lead',
      'commit agent_config researcher',
      'call_tool l1',
    ]);
  });

  it("a delegate's model failure fails the turn, as at the top", () => {
    const results = runTurn(input, modelReply(20, delegate('d1', 'researcher')), {
      type: 'model_failed',
      code: 'unavailable',
      message: 'overloaded',
      retryable: true,
      thread: 'd1',
    });
    expect(results[2]!.effects).toEqual([
      { type: 'fail', code: 'unavailable', message: 'overloaded', retryable: true },
    ]);
  });

  it('a cancel while a side-effecting call runs in a thread is ambiguous', () => {
    const results = runTurn(
      input,
      modelReply(20, delegate('d1', 'researcher')),
      threadReply('d1', 30, use('s1', 'send')),
      {
        type: 'cancelled',
        reason: 'user',
      },
    );
    expect(results[3]!.effects.map(brief)).toEqual(['ambiguous s1']);
  });
});
