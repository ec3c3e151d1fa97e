import { describe, expect, it } from '@jest/globals';
import type { JsonObject } from '../../common/canonical-json';
import { DELEGATION_DEADLINE_MS } from '../../common/delegation';
import type { OutputBlock } from '../../common/model/model-port';
import { requestIds } from '../../common/request-ids';
import { hex } from './agent-config';
import { askUserTool, delegateToolFor } from './reserved-tools';
import {
  approvalOf,
  committedSteps,
  modelReply,
  runTurn,
  testTool,
  threadReply,
} from './testdata/machine-run';
import { personWaits, threadRunMs, type PersonWait, type RequestTime } from './turn-delegation';
import type { StepResult, TurnEvent, TurnInput } from './turn-machine';
import type { ApprovalAnswer, QuestionAnswer } from './turn-records';

/**
 * A delegation thread's deadline counts the time the turn runs, not the time it waits for a
 * person (docs/turns.md, "Delegation"): a wait lasts from the commit of an approval or
 * question request to the commit of its answer (the control plane's clock), and the whole
 * turn is paused meanwhile. Every attempt here is a resumed dispatch, as the control plane
 * makes one after an answer: the recorded steps, the answers and the requests' times.
 */

const S = 1_000;
const MIN = 60 * S;
/** When the lead's first reply ends: the thread opens then. */
const T0 = 1_000_000_000;

const refund = testTool('refund', 'side_effect', true);
const model = { model: 'm', maxTokens: 100 };
const input: TurnInput = {
  turnId: 't1',
  history: [],
  userMessage: 'refund the invoice',
  system: 'You lead.',
  tools: [refund, delegateToolFor([{ name: 'researcher', description: '' }])],
  model,
  agentName: 'lead',
  delegates: ['researcher'],
  agents: [{ name: 'researcher', system: 'You research.', tools: [refund, askUserTool], model }],
  budget: { directive: 4 },
  recordedSteps: [],
  approvalAnswers: [],
  questionAnswers: [],
};

const use = (id: string, name: string, args: JsonObject = {}): OutputBlock => ({
  type: 'tool_use',
  id,
  name,
  input: args,
});
const asks = use('d1', '__delegate_to', { agent: 'researcher', task: 'refund it' });
const text = (value: string): OutputBlock => ({ type: 'text', text: value });
const finished = (id: string): TurnEvent => ({
  type: 'tool_finished',
  toolCallId: id,
  outcome: { content: 'refunded', isError: false },
});

/** An admin's signed approval of refund call `id`, committed at `answeredAtMs`. */
function approved(id: string, answeredAtMs: number): ApprovalAnswer {
  return approvalOf(
    { turnId: 't1', toolCallId: id, toolName: 'refund', argsJson: '{}' },
    answeredAtMs,
  );
}

/** The user's answer to the question of call `id`, committed at `answeredAtMs`. */
function answered(id: string, answeredAtMs: number): QuestionAnswer {
  const requestId = requestIds.questionRequestId('t1', id);
  return { turnId: 't1', requestId, answer: 'EUR', answeredBy: 'u', answeredAtMs };
}

/** When the request of call `id` was committed. */
const requested = (
  id: string,
  requestedAtMs: number,
  kind: 'approval' | 'question' = 'approval',
): RequestTime => ({
  requestId:
    kind === 'approval'
      ? requestIds.approvalRequestId('t1', id)
      : requestIds.questionRequestId('t1', id),
  requestedAtMs,
});

/** What a resumed dispatch is given after `earlier` attempts, with these answers and times. */
interface Given {
  readonly approvals?: readonly ApprovalAnswer[];
  readonly questions?: readonly QuestionAnswer[];
  readonly times?: readonly RequestTime[];
}

/** A resumed attempt after `earlier` (each an attempt's results), applying `events`. */
function resume(earlier: readonly StepResult[][], given: Given, ...events: TurnEvent[]) {
  const results = earlier.flat();
  const config = committedSteps(results).findLast((step) => step.kind === 'agent_config');
  return runTurn(
    {
      ...input,
      recordedSteps: committedSteps(results),
      ...(config?.kind === 'agent_config'
        ? { recordedConfigSha256: hex(config.record.sha256) }
        : {}),
      approvalAnswers: given.approvals ?? [],
      questionAnswers: given.questions ?? [],
      requestTimes: given.times ?? [],
    },
    ...events,
  );
}

/** The result the lead got for its `__delegate_to` call, or undefined while the thread runs. */
function delegateResult(results: readonly StepResult[]): string | undefined {
  for (const { effects } of results) {
    for (const effect of effects) {
      if (
        effect.type === 'commit_step' &&
        effect.step.kind === 'tool_result' &&
        effect.step.record.toolCallId === 'd1'
      ) {
        return effect.step.record.content;
      }
    }
  }
  return undefined;
}

const DEADLINE =
  'Delegation to researcher stopped: it ran past its deadline of 300 s without answering. Do the task yourself or ask for less.';

/** Attempt one: the lead asks at T0, the researcher asks for a refund at T0 + 10 s; paused. */
function pausedOnRefund(): StepResult[] {
  const results = runTurn(
    input,
    modelReply(T0, asks),
    threadReply('d1', T0 + 10 * S, use('r1', 'refund')),
  );
  expect(results.at(-1)!.effects.map((e) => e.type)).toContain('pause_for_approval');
  return results;
}

describe('the rule, pure', () => {
  it.each<[string, RequestTime[], (ApprovalAnswer | QuestionAnswer)[], PersonWait[]]>([
    [
      'an answered request',
      [requested('r1', 100)],
      [approved('r1', 400)],
      [{ fromMs: 100, toMs: 400 }],
    ],
    ['a request not answered yet', [requested('r1', 100)], [], []],
    ['a request recorded without a time', [requested('r1', 0)], [approved('r1', 400)], []],
    ['an answer stamped before its request', [requested('r1', 500)], [approved('r1', 400)], []],
    [
      "another turn's answer",
      [requested('r1', 100)],
      [{ ...approved('r1', 400), turnId: 't2' }],
      [],
    ],
    [
      'a question and an approval, each to its first answer',
      [requested('q1', 100, 'question'), requested('r1', 700)],
      [answered('q1', 300), answered('q1', 350), approved('r1', 900)],
      [
        { fromMs: 100, toMs: 300 },
        { fromMs: 700, toMs: 900 },
      ],
    ],
  ])('personWaits: %s', (_, times, answers, waits) => {
    expect(personWaits('t1', times, answers)).toEqual(waits);
  });

  it.each<[string, PersonWait[], number]>([
    ['no wait', [], 10 * MIN],
    ['a wait within the thread', [{ fromMs: T0 + S, toMs: T0 + 7 * MIN }], 10 * MIN - 7 * MIN + S],
    ['a wait before it opened', [{ fromMs: T0 - 7 * MIN, toMs: T0 - S }], 10 * MIN],
    ['a wait answered after the reply', [{ fromMs: T0 + S, toMs: T0 + 11 * MIN }], 10 * MIN],
    [
      'two waits',
      [
        { fromMs: T0 + S, toMs: T0 + 4 * MIN },
        { fromMs: T0 + 5 * MIN, toMs: T0 + 9 * MIN },
      ],
      10 * MIN - (4 * MIN - S) - 4 * MIN,
    ],
  ])('threadRunMs: %s', (_, waits, runMs) => {
    expect(threadRunMs(T0, T0 + 10 * MIN, waits)).toBe(runMs);
  });
});

describe("a thread's deadline leaves out the turn's waits for a person", () => {
  const asked = T0 + 11 * S;
  const answeredAt = asked + 6 * MIN;

  it.each<[string, RequestTime[], string]>([
    [
      'the wait recorded: the thread ran 31 s and its answer is taken',
      [requested('r1', asked)],
      'refunded it',
    ],
    ['no request time (a journal before times were): the wait counts, as it used to', [], DEADLINE],
  ])("a delegate's approval answered 6 minutes later, %s", (_, times, result) => {
    const first = pausedOnRefund();
    const second = resume(
      [first],
      { approvals: [approved('r1', answeredAt)], times },
      finished('r1'),
    );
    // The approved call runs either way: the deadline is decided on the thread's next reply.
    expect(second[0]!.effects.map((e) => e.type)).toEqual([
      'commit_step',
      'commit_step',
      'commit_step',
      'call_tool',
    ]);
    const [, , replied] = resume(
      [first],
      { approvals: [approved('r1', answeredAt)], times },
      finished('r1'),
      threadReply('d1', answeredAt + 20 * S, text('refunded it')),
    );
    expect(delegateResult([replied!])).toBe(result);
  });

  it.each<[string, number, string | undefined]>([
    ['exactly 5 minutes of its own time', DELEGATION_DEADLINE_MS, 'refunded it'],
    ['1 ms past 5 minutes of its own time', DELEGATION_DEADLINE_MS + 1, DEADLINE],
  ])('a thread that runs %s after the wait', (_, runMs, result) => {
    // Before the pause it ran 11 s (T0 to the request); the rest after the answer.
    const replyAt = answeredAt + (runMs - 11 * S);
    const results = resume(
      [pausedOnRefund()],
      { approvals: [approved('r1', answeredAt)], times: [requested('r1', asked)] },
      finished('r1'),
      threadReply('d1', replyAt, text('refunded it')),
    );
    expect(delegateResult(results)).toBe(result);
  });

  it("a delegate's question answered 6 minutes later, the same as an approval", () => {
    const first = runTurn(
      input,
      modelReply(T0, asks),
      threadReply('d1', T0 + 10 * S, use('q1', '__ask_user', { question: 'Which currency?' })),
    );
    expect(first.at(-1)!.effects.map((e) => e.type)).toContain('pause_for_question');
    const given = (times: RequestTime[]): Given => ({
      questions: [answered('q1', answeredAt)],
      times,
    });
    const reply = threadReply('d1', answeredAt + 20 * S, text('in EUR'));
    const [, withTime] = resume([first], given([requested('q1', asked, 'question')]), reply);
    expect(delegateResult([withTime!])).toBe('in EUR');
    const [, without] = resume([first], given([]), reply);
    expect(delegateResult([without!])).toBe(DEADLINE);
  });

  it("the lead's own pause while the thread waits too: both waits are left out", () => {
    // The lead asks for its own refund r0 and the researcher at T0; the researcher's refund r1
    // waits too, and the turn shows the lead's first (the order asked).
    const first = runTurn(
      input,
      modelReply(T0, use('r0', 'refund'), asks),
      threadReply('d1', T0 + 10 * S, use('r1', 'refund')),
    );
    const shown = first.at(-1)!.effects.at(-1);
    expect(shown?.type === 'pause_for_approval' && shown.request.toolCallId).toBe('r0');
    const leadAnswered = asked + 6 * MIN;
    const times = [requested('r0', asked)];
    // Attempt two runs r0; then the turn pauses for the researcher's r1.
    const second = resume(
      [first],
      { approvals: [approved('r0', leadAnswered)], times },
      finished('r0'),
    );
    const next = second.at(-1)!.effects.at(-1);
    expect(next?.type === 'pause_for_approval' && next.request.toolCallId).toBe('r1');
    const r1Asked = leadAnswered + 5 * S;
    const r1Answered = r1Asked + 6 * MIN;
    const third = (recorded: RequestTime[]) =>
      resume(
        [first, second],
        { approvals: [approved('r0', leadAnswered), approved('r1', r1Answered)], times: recorded },
        finished('r1'),
        threadReply('d1', r1Answered + 20 * S, text('refunded it')),
      );
    // 11 s + 5 s + 20 s of its own time, over 12 minutes of the clock.
    expect(delegateResult(third([...times, requested('r1', r1Asked)]))).toBe('refunded it');
    // Had only its own wait been left out, the lead's 6 minutes would have used its time up.
    expect(delegateResult(third([requested('r1', r1Asked)]))).toBe(DEADLINE);
  });
});
