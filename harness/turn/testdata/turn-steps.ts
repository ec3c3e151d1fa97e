import { approvalArgsSha256 } from '../../../common/approval-bytes';
import type { TurnStep } from '../turn-records';

/**
 * Recorded steps of one turn, one of each kind and shape, shared by the codec tests of
 * the turn steps (`step-codec.test.ts`) and of a turn's start, which carries them
 * (`harness/server/turn-start-codec.test.ts`).
 */

export const argsJson = '{"amount":5,"order":"A-1"}';
export const argsSha256 = approvalArgsSha256(argsJson);

export const steps: TurnStep[] = [
  {
    kind: 'model_call',
    record: {
      turnId: 't-1',
      step: 1,
      model: 'scripted',
      content: [
        { type: 'text', text: 'Refunding.' },
        { type: 'tool_use', toolCallId: 'toolu_1', name: 'refund', argsJson },
      ],
      stopReason: 'tool_use',
      usage: { inputTokens: 12, outputTokens: 7 },
      startedAtMs: 1_700_000_000_000,
      finishedAtMs: 1_700_000_000_250,
      closing: false,
    },
  },
  {
    kind: 'tool_call',
    record: {
      turnId: 't-1',
      step: 1,
      toolCallId: 'toolu_1',
      toolName: 'refund',
      argsJson,
      effect: 'side_effect',
      approvalRequestId: 'apr_1',
    },
  },
  {
    kind: 'tool_call',
    record: {
      turnId: 't-1',
      step: 2,
      toolCallId: 'toolu_2',
      toolName: 'calculator',
      argsJson: '{}',
      effect: 'pure',
      approvalRequestId: '',
    },
  },
  {
    kind: 'tool_result',
    record: { turnId: 't-1', toolCallId: 'toolu_1', content: 'ok', isError: true, denied: true },
  },
  {
    kind: 'model_call',
    record: {
      turnId: 't-1',
      step: 3,
      model: 'm',
      content: [],
      stopReason: 'end_turn',
      usage: { inputTokens: 0, outputTokens: 0 },
      startedAtMs: 0,
      finishedAtMs: 0,
      closing: true,
    },
  },
  // A delegate's thread (docs/turns.md, "Delegation"): its steps name it and their depth,
  // and the result closing it names who answered.
  {
    kind: 'model_call',
    record: {
      turnId: 't-1',
      step: 1,
      model: 'm',
      content: [{ type: 'text', text: 'found' }],
      stopReason: 'end_turn',
      usage: { inputTokens: 3, outputTokens: 1 },
      startedAtMs: 5,
      finishedAtMs: 6,
      closing: false,
      agent: 'researcher',
      thread: 'toolu_ask',
      depth: 1,
    },
  },
  {
    kind: 'tool_call',
    record: {
      turnId: 't-1',
      step: 1,
      toolCallId: 'toolu_look',
      toolName: 'lookup',
      argsJson: '{}',
      effect: 'pure',
      approvalRequestId: '',
      agent: 'researcher',
      thread: 'toolu_ask',
      depth: 1,
    },
  },
  {
    kind: 'tool_result',
    record: {
      turnId: 't-1',
      toolCallId: 'toolu_ask',
      content: 'found',
      isError: false,
      denied: false,
      delegate: 'researcher',
    },
  },
];
