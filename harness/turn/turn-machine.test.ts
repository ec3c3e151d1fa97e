import { describe, expect, it } from '@jest/globals';
import { approvalArgsSha256 } from '../../common/approval-bytes';
import { nodeEd25519Signer, nodeEd25519Verifier } from '../crypto/node-ed25519';
import type { Message, ModelResponse, OutputBlock } from '../../common/model/model-port';
import { encodeAgentConfig, hex, modelRequestSha256 } from './agent-config';
import { signApproval } from './approval-token';
import { requestIds } from '../../common/request-ids';
import {
  createTurnMachine,
  type StepResult,
  type TurnEffect,
  type TurnEvent,
  type TurnInput,
  type TurnState,
} from './turn-machine';
import type { ApprovalAnswer, TurnTool } from './turn-records';

const key = nodeEd25519Signer(new Uint8Array(32).fill(7));
const machine = createTurnMachine({
  ids: requestIds,
  verifier: nodeEd25519Verifier,
  approvalPublicKey: key.publicKey,
});

const tool = (name: string, effect: TurnTool['effect'], needsApproval = false): TurnTool => ({
  name,
  description: name,
  inputSchema: { type: 'object' },
  effect,
  needsApproval,
});
const tools = [
  tool('add', 'pure'),
  tool('email', 'side_effect'),
  tool('refund', 'side_effect', true),
];

const input: TurnInput = {
  turnId: 't1',
  history: [],
  userMessage: 'hi',
  tools,
  budget: { directive: 2 },
  recordedSteps: [],
  approvalAnswers: [],
  questionAnswers: [],
};

const response = (...content: OutputBlock[]): ModelResponse => ({
  model: 'm',
  content,
  stopReason: content.some((b) => b.type === 'tool_use') ? 'tool_use' : 'end_turn',
  usage: { inputTokens: 1, outputTokens: 1 },
});
const responded = (...content: OutputBlock[]): TurnEvent => ({
  type: 'model_responded',
  response: response(...content),
  startedAtMs: 10,
  finishedAtMs: 20,
});
const toolUse = (id: string, name: string): OutputBlock => ({
  type: 'tool_use',
  id,
  name,
  input: { n: 1 },
});

/** Runs events from the initial state; returns every step's result. */
function run(...events: TurnEvent[]): StepResult[] {
  let state: TurnState = machine.initialState;
  return events.map((event) => {
    const result = machine.step(state, event);
    state = result.state;
    return result;
  });
}

/** A compact view of effects for table assertions. */
function brief(effect: TurnEffect): string {
  switch (effect.type) {
    case 'commit_step':
      if (effect.step.kind === 'agent_config') return 'commit agent_config';
      return `commit ${effect.step.kind} ${
        effect.step.kind === 'model_call' ? effect.step.record.step : effect.step.record.toolCallId
      }`;
    case 'call_model':
      return `call_model ${effect.step}${effect.closing ? ' closing' : ''}`;
    case 'call_tool':
    case 'call_trusted_tool':
    case 'request_charge':
    case 'settle_payment':
      return `${effect.type} ${effect.call.toolCallId}`;
    case 'pause_for_approval':
      return `pause_for_approval ${effect.request.toolCallId}${effect.rejection === undefined ? '' : ` (${effect.rejection})`}`;
    case 'pause_for_question':
      return `pause_for_question ${effect.request.toolCallId}`;
    case 'handoff':
      return `handoff ${effect.handoff.targetAgent}`;
    case 'finish':
      return `finish ${JSON.stringify(effect.text)} steps=${effect.steps}${effect.fallback ? ' fallback' : ''}`;
    case 'ambiguous':
      return `ambiguous ${effect.toolCallId}`;
    case 'fail':
      return `fail ${effect.code}`;
    case 'cancelled':
      return `cancelled ${effect.reason}`;
  }
}

const started: TurnEvent = { type: 'turn_started', input };
const finished = (id: string, content = 'ok'): TurnEvent => ({
  type: 'tool_finished',
  toolCallId: id,
  outcome: { content, isError: false },
});

describe('turn machine step', () => {
  it.each<[string, TurnEvent[], unknown[][]]>([
    [
      'text reply',
      [started, responded({ type: 'text', text: 'yo' })],
      [['call_model 1'], ['commit model_call 1', 'finish "yo" steps=1']],
    ],
    [
      'parallel calls: every tool_call commit precedes every call; results settle in any order',
      [
        started,
        responded(toolUse('a', 'add'), toolUse('b', 'email')),
        finished('b'),
        finished('a'),
      ],
      [
        ['call_model 1'],
        [
          'commit model_call 1',
          'commit tool_call a',
          'commit tool_call b',
          'call_tool a',
          'call_tool b',
        ],
        ['commit tool_result b'],
        ['commit tool_result a', 'call_model 2'],
      ],
    ],
    [
      'budget spent with tool calls: one closing call',
      [
        started,
        responded(toolUse('a', 'add')),
        finished('a'),
        responded(toolUse('b', 'add')),
        finished('b'),
        responded({ type: 'text', text: 'tried' }),
      ],
      [
        ['call_model 1'],
        ['commit model_call 1', 'commit tool_call a', 'call_tool a'],
        ['commit tool_result a', 'call_model 2'],
        ['commit model_call 2', 'commit tool_call b', 'call_tool b'],
        ['commit tool_result b', 'call_model 3 closing'],
        ['commit model_call 3', 'finish "tried" steps=3'],
      ],
    ],
    [
      'an empty reply gets a closing call, then the fallback',
      [started, responded(), responded(toolUse('x', 'add'))],
      [
        ['call_model 1'],
        ['commit model_call 1', 'call_model 2 closing'],
        ['commit model_call 2', expect.stringMatching(/^finish ".*" steps=2 fallback$/)],
      ],
    ],
    [
      'unknown tool: an error result, the loop goes on',
      [started, responded(toolUse('u', 'rm'))],
      [['call_model 1'], ['commit model_call 1', 'commit tool_result u', 'call_model 2']],
    ],
    [
      'pure call with an unknown outcome: error result',
      [
        started,
        responded(toolUse('a', 'add')),
        { type: 'tool_outcome_unknown', toolCallId: 'a', reason: 'timeout' },
      ],
      [
        ['call_model 1'],
        ['commit model_call 1', 'commit tool_call a', 'call_tool a'],
        ['commit tool_result a', 'call_model 2'],
      ],
    ],
    [
      'side-effecting call with an unknown outcome: ambiguous',
      [
        started,
        responded(toolUse('e', 'email')),
        { type: 'tool_outcome_unknown', toolCallId: 'e', reason: 'timeout' },
      ],
      [
        ['call_model 1'],
        ['commit model_call 1', 'commit tool_call e', 'call_tool e'],
        ['ambiguous e'],
      ],
    ],
    [
      'cancel while only pure calls run',
      [started, responded(toolUse('a', 'add')), { type: 'cancelled', reason: 'stop' }],
      [
        ['call_model 1'],
        ['commit model_call 1', 'commit tool_call a', 'call_tool a'],
        ['cancelled stop'],
      ],
    ],
    [
      'model failure',
      [started, { type: 'model_failed', code: 'unavailable', message: 'down', retryable: true }],
      [['call_model 1'], ['fail unavailable']],
    ],
    [
      'invalid budget fails at once',
      [{ type: 'turn_started', input: { ...input, budget: { directive: -2 } } }],
      [['fail invalid_argument']],
    ],
  ])('%s', (_name, events, expected) => {
    expect(run(...events).map((r) => r.effects.map(brief))).toEqual(expected);
  });

  it('builds the first model request from history, user message and tools', () => {
    const [first] = run({
      type: 'turn_started',
      input: {
        ...input,
        system: 'sys',
        history: [{ role: 'assistant', content: [{ type: 'text', text: 'earlier' }] }],
      },
    });
    expect(first?.effects).toEqual([
      {
        type: 'call_model',
        step: 1,
        agent: '',
        closing: false,
        request: {
          system: 'sys',
          messages: [
            { role: 'assistant', content: [{ type: 'text', text: 'earlier' }] },
            { role: 'user', content: [{ type: 'text', text: 'hi' }] },
          ],
          tools: tools.map(({ name, description, inputSchema }) => ({
            name,
            description,
            inputSchema,
          })),
          toolChoice: 'auto',
        },
      },
    ]);
  });

  it('gives each step taken from one state its own messages, and leaves the history as given', () => {
    const history: Message[] = [
      { role: 'assistant', content: [{ type: 'text', text: 'earlier' }] },
    ];
    const first = machine.step(machine.initialState, {
      type: 'turn_started',
      input: { ...input, history },
    });
    const requestOf = (state: TurnState, ...events: TurnEvent[]): Message[] => {
      let result: StepResult = { state, effects: [] };
      for (const event of events) result = machine.step(result.state, event);
      const call = result.effects.find((e) => e.type === 'call_model');
      if (call?.type !== 'call_model') throw new Error('no call_model');
      return [...call.request.messages];
    };
    const a = requestOf(first.state, responded(toolUse('a', 'add')), finished('a', 'from a'));
    const b = requestOf(first.state, responded(toolUse('b', 'add')), finished('b', 'from b'));
    const again = requestOf(first.state, responded(toolUse('a', 'add')), finished('a', 'from a'));
    const results = (m: Message | undefined): unknown => m?.content;
    expect(a).toHaveLength(4);
    expect(b).toHaveLength(4);
    expect(results(a[3])).toEqual([
      { type: 'tool_result', toolUseId: 'a', content: 'from a', isError: false },
    ]);
    expect(results(b[3])).toEqual([
      { type: 'tool_result', toolUseId: 'b', content: 'from b', isError: false },
    ]);
    expect(again).toEqual(a);
    expect(history).toEqual([{ role: 'assistant', content: [{ type: 'text', text: 'earlier' }] }]);
  });

  describe('live approval answers', () => {
    const requestId = requestIds.approvalRequestId('t1', 'r');
    const argsSha256 = approvalArgsSha256('{"n":1}');
    const answer = (decision: 'approved' | 'denied', signer = key): ApprovalAnswer => {
      const binding = { turnId: 't1', requestId, toolName: 'refund', argsSha256, decision };
      return {
        ...binding,
        ...signApproval(binding, signer),
        answeredBy: 'a',
        answeredAtMs: 1,
        comment: '',
      };
    };

    it('a forged answer pauses again with the reason; a valid one runs the call after its commit', () => {
      const forged = {
        ...answer('approved', nodeEd25519Signer(new Uint8Array(32))),
        keyId: answer('approved').keyId,
      };
      const results = run(
        started,
        responded(toolUse('r', 'refund')),
        { type: 'approval_answered', answer: forged },
        { type: 'approval_answered', answer: answer('approved') },
      );
      expect(results.map((r) => r.effects.map(brief))).toEqual([
        ['call_model 1'],
        ['commit model_call 1', 'pause_for_approval r'],
        ['pause_for_approval r (answer signature does not verify with the approval key (forged))'],
        ['commit tool_call r', 'call_tool r'],
      ]);
      expect(results[3]?.effects[0]).toMatchObject({
        step: {
          kind: 'tool_call',
          record: { approvalRequestId: requestId, effect: 'side_effect' },
        },
      });
    });

    it('an answer for another request is refused', () => {
      const other = { ...answer('approved'), requestId: 'apr_other' };
      const results = run(started, responded(toolUse('r', 'refund')), {
        type: 'approval_answered',
        answer: other,
      });
      expect(results[2]?.effects.map(brief)).toEqual([
        `pause_for_approval r (answer is for request apr_other, not ${requestId})`,
      ]);
    });
  });

  it.each<[string, TurnEvent[], string]>([
    [
      'a tool result for a call that is not running',
      [started, finished('zz')],
      'turn t1: cannot apply tool_finished in phase awaiting_model: tool call zz is not running',
    ],
    [
      'a second start',
      [started, started],
      'turn t1: cannot apply turn_started in phase awaiting_model: the turn already started',
    ],
    [
      'any event after the end',
      [started, responded({ type: 'text', text: 'x' }), finished('a')],
      'turn t1: cannot apply tool_finished in phase done: the turn has ended',
    ],
    [
      'an answer when not paused',
      [
        started,
        {
          type: 'question_answered',
          answer: { turnId: 't1', requestId: 'q', answer: 'a', answeredBy: 'a', answeredAtMs: 1 },
        },
      ],
      'turn t1: cannot apply question_answered in phase awaiting_model: the turn is not paused for awaiting answer',
    ],
  ])('refuses %s', (_name, events, message) => {
    expect(() => run(...events)).toThrow(message);
  });

  it('refuses recorded steps of another turn', () => {
    const [first] = run({
      type: 'turn_started',
      input: {
        ...input,
        recordedSteps: [
          {
            kind: 'tool_result',
            record: {
              turnId: 'other',
              toolCallId: 'a',
              content: '',
              isError: false,
              denied: false,
            },
          },
        ],
      },
    });
    expect(first?.effects).toEqual([
      {
        type: 'fail',
        code: 'failed_precondition',
        message:
          "t1: a recorded tool_result belongs to turn other; resume with this turn's steps only".replace(
            /^/,
            'turn ',
          ),
        retryable: false,
      },
    ]);
  });

  it('replays a recorded model call instead of asking again, and never mutates state', () => {
    const recorded = run(started, responded(toolUse('a', 'add')), finished('a', '2'));
    const steps = recorded.flatMap((r) =>
      r.effects.flatMap((e) => (e.type === 'commit_step' ? [e.step] : [])),
    );
    const before = machine.initialState;
    const [resumed] = run({ type: 'turn_started', input: { ...input, recordedSteps: steps } });
    expect(resumed?.effects.map(brief)).toEqual(['call_model 2']);
    expect(machine.initialState).toBe(before);
    expect(before.phase).toBe('idle');
  });
});

describe('recording for replay (docs/replay.md)', () => {
  const model = { model: 'm', maxTokens: 64 };
  const recorded: TurnInput = { ...input, model };

  it('commits the configuration before the first model call, and the call names it and its request', () => {
    const started = machine.step(machine.initialState, { type: 'turn_started', input: recorded });
    expect(started.effects.map(brief)).toEqual(['commit agent_config', 'call_model 1']);
    const [config, call] = started.effects;
    if (config?.type !== 'commit_step' || config.step.kind !== 'agent_config') throw new Error();
    if (call?.type !== 'call_model') throw new Error();
    const encoded = encodeAgentConfig({
      model,
      system: '',
      tools,
      budget: input.budget,
      requiredApprover: '',
    });
    expect(config.step.record.configJson).toBe(encoded.json);
    expect(hex(config.step.record.sha256)).toBe(hex(encoded.sha256));
    const answered = machine.step(started.state, responded({ type: 'text', text: 'hello' }));
    const commit = answered.effects[0];
    if (commit?.type !== 'commit_step' || commit.step.kind !== 'model_call') throw new Error();
    expect(hex(commit.step.record.configSha256 ?? new Uint8Array())).toBe(hex(encoded.sha256));
    expect(hex(commit.step.record.requestSha256 ?? new Uint8Array())).toBe(
      hex(modelRequestSha256(call.request, encoded.sha256)),
    );
  });

  it('does not record a configuration the journal already holds, and still names it', () => {
    const sha = hex(
      encodeAgentConfig({ model, system: '', tools, budget: input.budget, requiredApprover: '' })
        .sha256,
    );
    const started = machine.step(machine.initialState, {
      type: 'turn_started',
      input: { ...recorded, recordedConfigSha256: sha },
    });
    expect(started.effects.map(brief)).toEqual(['call_model 1']);
    const answered = machine.step(started.state, responded({ type: 'text', text: 'hello' }));
    const commit = answered.effects[0];
    if (commit?.type !== 'commit_step' || commit.step.kind !== 'model_call') throw new Error();
    expect(hex(commit.step.record.configSha256 ?? new Uint8Array())).toBe(sha);
  });

  it('records a new configuration when the tools change', () => {
    const sha = hex(
      encodeAgentConfig({ model, system: '', tools, budget: input.budget, requiredApprover: '' })
        .sha256,
    );
    const started = machine.step(machine.initialState, {
      type: 'turn_started',
      input: { ...recorded, recordedConfigSha256: sha, tools: tools.slice(1) },
    });
    expect(started.effects.map(brief)).toEqual(['commit agent_config', 'call_model 1']);
  });

  it('records nothing without model parameters (a turn that cannot be recorded stays as before)', () => {
    const started = machine.step(machine.initialState, { type: 'turn_started', input });
    expect(started.effects.map(brief)).toEqual(['call_model 1']);
    const answered = machine.step(started.state, responded({ type: 'text', text: 'hello' }));
    const commit = answered.effects[0];
    if (commit?.type !== 'commit_step' || commit.step.kind !== 'model_call') throw new Error();
    expect(commit.step.record.requestSha256).toBeUndefined();
  });
});
