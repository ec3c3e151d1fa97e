import { openedTurn } from './view-state';
import { describe, expect, it } from '@jest/globals';
import { MEMORY_LIMITS, type MemoryEntry } from '../../common/memory';
import type { TrustedToolCall } from '../../proto/gen/polychrome/harness/v1/harness';
import type { Conversation } from '../api/v1alpha1/conversation-types';
import type { RecordedStep, TurnView } from './journal-view-types';
import { planMemoryCall, planMemoryClear, type MemoryCallFacts } from './plan-memory';

const ARGS = '{"action":"set","key":"city","value":"Lisbon"}';
const attribution = { caller: 'web:owner', participants: [], persona: 'p', session: 's' };

function turn(steps: RecordedStep[]): TurnView {
  return {
    ...openedTurn({
      turnId: 't1',
      idempotencyKey: 'k',
      text: 'remember',
      attribution,
      receivedAtMs: 0,
      messagePosition: 0,
    }),
    steps,
  };
}

function toolCall(argsJson = ARGS, toolCallId = 'c1'): RecordedStep {
  const payload = { turnId: 't1', step: 1, toolCallId, toolName: 'memory', argsJson };
  return {
    kind: 'tool_call',
    position: 3,
    payload: { ...payload, effect: 1, approvalRequestId: '', agent: '', thread: '', depth: 0 },
  };
}

function conversation(builtin = ['memory']): Conversation {
  return {
    apiVersion: 'polychrome.dev/v1alpha1',
    kind: 'Conversation',
    metadata: { name: 'c', namespace: 'n', uid: 'u' },
    spec: { owner: 'web:owner', tools: { builtin } },
  };
}

function call(argsJson = ARGS, over: Partial<TrustedToolCall> = {}): TrustedToolCall {
  return {
    turnId: 't1',
    step: 1,
    toolCallId: 'c1',
    toolName: 'memory',
    argsJson,
    effect: 1,
    ...over,
  };
}

function facts(over: Partial<MemoryCallFacts> = {}, argsJson = ARGS): MemoryCallFacts {
  return {
    turn: turn([toolCall(argsJson)]),
    conversation: conversation(),
    memory: new Map(),
    nowMs: 7,
    ...over,
  };
}

function entry(key: string, over: Partial<MemoryEntry> = {}): MemoryEntry {
  return {
    key,
    value: 'v',
    position: 1,
    turnId: 't0',
    toolCallId: 'c0',
    setAtMs: 0,
    setPositions: [1],
    ...over,
  };
}

describe('planMemoryCall', () => {
  it('commits memory_set with the turn caller, the turn and the tool call, and answers', () => {
    const plan = planMemoryCall(facts(), call());
    expect(plan).toEqual({
      kind: 'answer',
      events: [
        {
          kind: 'memory_set',
          payload: {
            key: 'city',
            value: 'Lisbon',
            attribution,
            setAtMs: 7,
            turnId: 't1',
            toolCallId: 'c1',
          },
        },
      ],
      result: {
        toolCallId: 'c1',
        content: 'kept "city" for later turns',
        isError: false,
        outcomeUnknownReason: '',
      },
    });
  });

  it.each([
    ['another turn', facts(), call(ARGS, { turnId: 't9' }), /names turn t9/u],
    [
      'a tool the spec does not offer',
      facts({ conversation: conversation([]) }),
      call(),
      /does not offer/u,
    ],
    ['no committed tool_call', facts({ turn: turn([]) }), call(), /no committed tool_call/u],
    [
      'other arguments than committed',
      facts(),
      call('{"action":"set","key":"city","value":"Porto"}'),
      /differs from its committed tool_call/u,
    ],
    [
      'a call that already has a result',
      facts({
        turn: turn([
          toolCall(),
          {
            kind: 'tool_result',
            position: 5,
            payload: {
              turnId: 't1',
              toolCallId: 'c1',
              content: '',
              isError: false,
              denied: false,
              thread: '',
              delegate: '',
            },
          },
        ]),
      }),
      call(),
      /already has a committed tool_result/u,
    ],
  ])('quarantines a forged call: %s', (_name, given, asked, reason) => {
    const plan = planMemoryCall(given, asked);
    expect(plan.kind).toBe('forged');
    expect(plan.kind === 'forged' && plan.reason).toMatch(reason);
  });

  it.each([
    ['{"action":"remember","key":"k"}', 'action must be "set" or "delete"'],
    ['{"action":"set","key":""}', 'the key is empty'],
    [`{"action":"set","key":"${'k'.repeat(129)}","value":"v"}`, 'longer than 128 bytes'],
    ['{"action":"set","key":"a\\nb","value":"v"}', 'control character'],
    ['{"action":"set","key":"k"}', 'value must be a string'],
    [
      `{"action":"set","key":"k","value":"${'v'.repeat(MEMORY_LIMITS.maxValueBytes + 1)}"}`,
      'longer than 4096 bytes',
    ],
  ])('answers the model an error and commits nothing for %s', (args, message) => {
    const plan = planMemoryCall(facts({}, args), call(args));
    expect(plan).toMatchObject({ kind: 'answer', events: [], result: { isError: true } });
    expect(plan.kind === 'answer' && plan.result.content).toContain(message);
  });

  it('refuses a new key past the limit, and allows replacing one', () => {
    const full = new Map(
      Array.from({ length: MEMORY_LIMITS.maxKeys }, (_, i) => [`k${i}`, entry(`k${i}`)]),
    );
    const plan = planMemoryCall(facts({ memory: full }), call());
    expect(plan).toMatchObject({ kind: 'answer', events: [], result: { isError: true } });
    const replace = '{"action":"set","key":"k1","value":"w"}';
    const replaced = planMemoryCall(facts({ memory: full }, replace), call(replace));
    expect(replaced.kind === 'answer' && replaced.events.map((e) => e.kind)).toEqual([
      'memory_set',
    ]);
  });

  it('answers a call run again after a crash without a second event', () => {
    const memory = new Map([['city', entry('city', { turnId: 't1', toolCallId: 'c1' })]]);
    const plan = planMemoryCall(facts({ memory }), call());
    expect(plan).toMatchObject({ kind: 'answer', events: [], result: { isError: false } });
  });

  it('deletes a key as memory_cleared naming its set positions; a missing key commits nothing', () => {
    const del = '{"action":"delete","key":"city"}';
    const memory = new Map([['city', entry('city', { setPositions: [1, 4] })]]);
    const plan = planMemoryCall(facts({ memory }, del), call(del));
    expect(plan.kind === 'answer' && plan.events).toEqual([
      {
        kind: 'memory_cleared',
        payload: {
          key: 'city',
          attribution,
          clearedAtMs: 7,
          setPositions: [1, 4],
          turnId: 't1',
          toolCallId: 'c1',
        },
      },
    ]);
    const none = planMemoryCall(facts({}, del), call(del));
    expect(none).toMatchObject({ kind: 'answer', events: [], result: { isError: false } });
  });
});

describe('planMemoryClear', () => {
  it('clears all or one key with the positions it takes out, and nothing when there is nothing', () => {
    const memory = new Map([
      ['a', entry('a', { setPositions: [2, 9] })],
      ['b', entry('b', { setPositions: [5] })],
    ]);
    expect(planMemoryClear(memory, '', attribution, 1)).toEqual([
      {
        kind: 'memory_cleared',
        payload: { key: '', attribution, clearedAtMs: 1, setPositions: [2, 5, 9] },
      },
    ]);
    expect(planMemoryClear(memory, 'b', attribution, 1)[0]?.payload).toMatchObject({
      setPositions: [5],
    });
    expect(planMemoryClear(memory, 'zzz', attribution, 1)).toEqual([]);
    expect(planMemoryClear(new Map(), '', attribution, 1)).toEqual([]);
  });
});
