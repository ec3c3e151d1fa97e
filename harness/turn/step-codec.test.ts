import { describe, expect, it } from '@jest/globals';
import { Step as StepMessage } from '../../proto/gen/polychrome/harness/v1/harness';
import { modelCallFromProto, turnStepFromProto, turnStepToProto } from './step-codec';
import type { TurnStep } from './turn-records';
import { steps } from './testdata/turn-steps';

describe('step codec round trips', () => {
  it.each(steps.map((step, i): [string, TurnStep] => [`${i} (${step.kind})`, step]))(
    'step %s survives toProto, wire bytes and fromProto',
    (_label, step) => {
      const wire = StepMessage.decode(StepMessage.encode(turnStepToProto(step, 4)).finish());
      expect(wire.sequence).toBe(4);
      expect(turnStepFromProto(wire)).toEqual(step);
    },
  );
});

describe('step codec reads what proto3 leaves open', () => {
  it('maps an unknown stop reason to other and absent usage to zero tokens', () => {
    const record = modelCallFromProto({
      turnId: 't',
      step: 1,
      model: 'm',
      content: [],
      stopReason: 'pause_turn',
      usage: undefined,
      startedAtMs: 0,
      finishedAtMs: 0,
      closing: false,
      configSha256: Buffer.alloc(0),
      requestSha256: Buffer.alloc(0),
      agent: '',
      thread: '',
      depth: 0,
    });
    expect(record.stopReason).toBe('other');
    expect(record.usage).toEqual({ inputTokens: 0, outputTokens: 0 });
  });
});
