import { describe, expect, it } from '@jest/globals';
import { TurnOutput } from '../../proto/gen/polychrome/harness/v1/harness';
import type { TurnOutcome } from '../turn/turn-outcome';
import { argsJson, argsSha256 } from '../turn/testdata/turn-steps';
import {
  trustedAnswerFromProto,
  trustedAnswerToProto,
  trustedCallFromProto,
  trustedCallToProto,
  turnOutcomeFromProto,
  turnOutcomeToProto,
  type TrustedAnswer,
} from './turn-output-codec';

describe('turn output codec round trips', () => {
  const outcomes: TurnOutcome[] = [
    { kind: 'completed', text: 'done', steps: 2, fallback: true, completedAtMs: 10 },
    {
      kind: 'awaiting_approval',
      request: {
        turnId: 't-1',
        requestId: 'apr_1',
        toolCallId: 'toolu_1',
        toolName: 'refund',
        argsJson,
        argsSha256,
        reason: 'Moves money.',
        requiredApprover: '',
      },
      rejection: 'forged',
    },
    {
      kind: 'awaiting_answer',
      request: { turnId: 't-1', requestId: 'q_1', toolCallId: 'toolu_3', question: 'Which?' },
    },
    {
      kind: 'handed_off',
      handoff: { turnId: 't-1', toolCallId: 'toolu_4', targetAgent: 'billing', reason: 'r' },
    },
    { kind: 'ambiguous', toolCallId: 'toolu_1', reason: 'crashed', detectedAtMs: 11 },
    { kind: 'failed', code: 'unavailable', message: 'model overloaded', retryable: true },
    { kind: 'cancelled', reason: 'client went away' },
  ];

  it.each(outcomes.map((outcome): [string, TurnOutcome] => [outcome.kind, outcome]))(
    'outcome %s survives the wire as its terminal message',
    (kind, outcome) => {
      const output = turnOutcomeToProto(outcome, 't-1');
      expect(output.$case).toBe(kind.startsWith('awaiting') ? 'paused' : 'result');
      const wire = TurnOutput.decode(TurnOutput.encode({ output }).finish()).output;
      if (wire === undefined || (wire.$case !== 'paused' && wire.$case !== 'result')) {
        throw new Error('lost the terminal message');
      }
      expect(turnOutcomeFromProto(wire)).toEqual(outcome);
    },
  );

  it('trusted calls and answers survive toProto/fromProto', () => {
    const trusted = {
      call: {
        turnId: 't-1',
        toolCallId: 'toolu_9',
        name: 'charge',
        input: { amount: 5 },
        argsJson: '{"amount":5}',
        step: 2,
        maxSteps: 0,
      },
      effect: 'side_effect' as const,
    };
    expect(trustedCallFromProto(trustedCallToProto(trusted))).toEqual(trusted);
    const answers: TrustedAnswer[] = [
      { toolCallId: 'toolu_9', known: true, outcome: { content: 'charged', isError: false } },
      { toolCallId: 'toolu_9', known: false, reason: 'settlement timed out' },
    ];
    for (const answer of answers) {
      expect(trustedAnswerFromProto(trustedAnswerToProto(answer))).toEqual(answer);
    }
  });
});

describe('turn output codec rejects what proto3 cannot', () => {
  it('refuses a failure with an unknown error code', () => {
    expect(() =>
      turnOutcomeFromProto({
        $case: 'result',
        value: {
          outcome: { $case: 'failed', value: { code: 'oops', message: '', retryable: false } },
        },
      }),
    ).toThrow('result.failed.code: "oops" is not an error code');
  });
});
