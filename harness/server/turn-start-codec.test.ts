import { describe, expect, it } from '@jest/globals';
import { AppError } from '../../common/errors';
import { ToolEffect } from '../../proto/gen/polychrome/events/v1/events';
import { ToolHost, TurnStart } from '../../proto/gen/polychrome/harness/v1/harness';
import { askUserTool } from '../turn/reserved-tools';
import { argsSha256, steps } from '../turn/testdata/turn-steps';
import type { TurnTool } from '../turn/turn-records';
import { turnToolFromProto } from './tool-spec-codec';
import { turnRequestFromProto, turnRequestToProto, type TurnRequest } from './turn-start-codec';

const refundTool: TurnTool = {
  name: 'refund',
  description: 'Refund.',
  inputSchema: { type: 'object', properties: { amount: { type: 'number' } } },
  effect: 'side_effect',
  needsApproval: true,
  approvalReason: 'Moves money.',
  host: 'control_plane',
};

const request: TurnRequest = {
  conversationId: 'c-1',
  turnId: 't-1',
  attempt: 2,
  model: 'claude-sonnet-5-5',
  input: {
    turnId: 't-1',
    agentName: 'support',
    system: 'Be brief.',
    history: [
      { role: 'user', content: [{ type: 'text', text: 'hi' }] },
      {
        role: 'assistant',
        content: [
          { type: 'text', text: 'Checking.' },
          { type: 'tool_use', id: 'toolu_0', name: 'calculator', input: { expression: '1+1' } },
        ],
      },
      {
        role: 'user',
        content: [{ type: 'tool_result', toolUseId: 'toolu_0', content: '2', isError: false }],
      },
    ],
    userMessage: 'refund A-1',
    tools: [refundTool, { ...askUserTool, host: 'harness' }],
    budget: { deployment: 8, conversation: 5, directive: 3 },
    recordedSteps: steps,
    approvalAnswers: [
      {
        turnId: 't-1',
        requestId: 'apr_1',
        toolName: 'refund',
        argsSha256,
        decision: 'approved',
        answeredBy: 'web:alice',
        keyId: 'k1',
        signature: new Uint8Array(64).fill(3),
        answeredAtMs: 5,
        comment: 'fine',
      },
    ],
    questionAnswers: [
      { turnId: 't-1', requestId: 'q_1', answer: 'blue', answeredBy: 'web:bob', answeredAtMs: 9 },
    ],
    requiredApprover: 'web:alice',
    requestTimes: [
      { requestId: 'apr_1', requestedAtMs: 2 },
      { requestId: 'q_1', requestedAtMs: 7 },
    ],
  },
};

describe('turn start codec round trips', () => {
  it("a whole start (history, tools, budget, answers and their requests' times, recorded steps) survives the wire", () => {
    const wire = TurnStart.decode(TurnStart.encode(turnRequestToProto(request)).finish());
    expect(turnRequestFromProto(wire)).toEqual(request);
  });

  it('a minimal start leaves unset limits, system prompt and approver out', () => {
    const minimal: TurnRequest = {
      conversationId: 'c',
      turnId: 't',
      attempt: 0,
      model: '',
      input: {
        turnId: 't',
        history: [],
        userMessage: 'hi',
        tools: [],
        budget: {},
        recordedSteps: [],
        approvalAnswers: [],
        questionAnswers: [],
      },
    };
    expect(turnRequestFromProto(turnRequestToProto(minimal))).toEqual(minimal);
  });
});

describe('turn start codec rejects what proto3 cannot', () => {
  const start = turnRequestToProto(request);

  it.each<[string, TurnStart, string]>([
    ['an empty turn id', { ...start, turnId: '' }, 'start.turn_id: is empty'],
    [
      'an empty conversation id',
      { ...start, conversationId: '' },
      'start.conversation_id: is empty',
    ],
    [
      'a tool without effect',
      { ...start, tools: [{ ...start.tools[0]!, effect: ToolEffect.TOOL_EFFECT_UNSPECIFIED }] },
      'start.tools[0].effect: tool effect must be PURE or SIDE_EFFECT',
    ],
    [
      'a tool schema that is not an object',
      { ...start, tools: [{ ...start.tools[0]!, inputSchemaJson: '[1]' }] },
      'start.tools[0].input_schema_json: is not a JSON object',
    ],
    [
      'history tool args that are not JSON',
      {
        ...start,
        history: [
          {
            role: 2,
            content: [
              { block: { $case: 'toolUse', value: { toolCallId: 'x', name: 'n', argsJson: '{' } } },
            ],
          },
        ],
      },
      'start.history[0].content[0].tool_use.args_json: is not valid JSON',
    ],
    [
      'a message without role',
      { ...start, history: [{ role: 0, content: [] }] },
      'start.history[0].role: must be USER or ASSISTANT',
    ],
    [
      'an empty recorded step',
      { ...start, recordedSteps: [{ sequence: 0, step: undefined, commitWithResult: false }] },
      'start.recorded_steps[0]: step has no model_call, tool_call, tool_result, agent_config or agent_handoff',
    ],
    [
      'an answer without decision',
      { ...start, approvalAnswers: [{ ...start.approvalAnswers[0]!, decision: 0 }] },
      'start.approval_answers[0].decision: decision must be APPROVED or DENIED',
    ],
  ])('%s', (_label, bad, message) => {
    let caught: unknown;
    try {
      turnRequestFromProto(bad);
    } catch (error) {
      caught = error;
    }
    expect(caught).toBeInstanceOf(AppError);
    expect(caught).toMatchObject({ code: 'invalid_argument', message });
  });

  it('maps an unspecified host to the harness', () => {
    expect(
      turnToolFromProto({ ...start.tools[0]!, host: ToolHost.TOOL_HOST_UNSPECIFIED }).host,
    ).toBe('harness');
  });

  it('takes a tool named by reference from the catalog, adding only an approval', () => {
    const catalog = (name: string): TurnTool | undefined =>
      name === askUserTool.name ? askUserTool : undefined;
    const byReference = {
      name: askUserTool.name,
      description: '',
      inputSchemaJson: '',
      effect: 0,
      needsApproval: true,
      approvalReason: 'a person decides',
      host: ToolHost.TOOL_HOST_HARNESS,
    };
    const tool = turnToolFromProto(byReference, 'start.tools[0]', catalog);
    expect(tool.inputSchema).toEqual(askUserTool.inputSchema);
    expect(tool.description).toBe(askUserTool.description);
    expect(tool.needsApproval).toBe(true);
    expect(tool.approvalReason).toBe('a person decides');
    expect(
      turnToolFromProto({ ...byReference, needsApproval: false }, 't', catalog).needsApproval,
    ).toBe(askUserTool.needsApproval);
    expect(() =>
      turnToolFromProto({ ...byReference, name: 'nope' }, 'start.tools[0]', catalog),
    ).toThrow(
      'start.tools[0].input_schema_json: is empty, and this harness has no tool named "nope"',
    );
  });

  it('defers by-reference tools the catalog lacks when told to, and keeps them on the wire', () => {
    const catalog = (name: string): TurnTool | undefined =>
      name === askUserTool.name ? askUserTool : undefined;
    const deferred = (name: string): boolean => name.startsWith('files/');
    const withReferences: TurnRequest = {
      ...request,
      toolReferences: [
        { name: askUserTool.name, needsApproval: false },
        { name: 'files/write', needsApproval: true, approvalReason: 'writes files' },
        { name: 'files/read', needsApproval: false },
      ],
    };
    const wire = TurnStart.decode(TurnStart.encode(turnRequestToProto(withReferences)).finish());
    expect(wire.tools.map((tool) => [tool.name, tool.inputSchemaJson === ''])).toEqual([
      ...request.input.tools.map((tool) => [tool.name, false]),
      [askUserTool.name, true],
      ['files/write', true],
      ['files/read', true],
    ]);
    const decoded = turnRequestFromProto(wire, catalog, deferred);
    // The catalog's tool is resolved now; the deferred ones wait for the run.
    expect(decoded.input.tools.map((tool) => tool.name)).toEqual([
      ...request.input.tools.map((tool) => tool.name),
      askUserTool.name,
    ]);
    expect(decoded.toolReferences).toEqual([
      { name: 'files/write', needsApproval: true, approvalReason: 'writes files' },
      { name: 'files/read', needsApproval: false },
    ]);
    // Not deferred: a reference the harness cannot fill is refused at once, as before.
    expect(() => turnRequestFromProto(wire, catalog)).toThrow(
      `start.tools[${request.input.tools.length + 1}].input_schema_json: is empty, and this harness has no tool named "files/write"`,
    );
    expect(turnRequestFromProto(turnRequestToProto(request), catalog, deferred)).toEqual(request);
  });
});
