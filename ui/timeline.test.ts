import { describe, expect, it } from '@jest/globals';
import {
  decodePayload,
  encodePayload,
  payloadCodecs,
  type EventKind,
  type EventPayloads,
} from '../common/event-kinds';
import { StandingState, type TurnStanding } from '../common/turn-standing';
import {
  actorOf,
  finalAnswerNote,
  finalAnswersOf,
  groupByTurn,
  standingLabel,
  standingsByTurn,
  summaryOf,
  threadOf,
  type TimelineEvent,
} from './timeline';

/** An event as the log stream and the verified export give it: proto3 JSON of real bytes. */
function ev<K extends EventKind>(
  position: number,
  kind: K,
  payload: Partial<EventPayloads[K]>,
): TimelineEvent {
  const codec = payloadCodecs[kind];
  const decoded = decodePayload(kind, encodePayload(kind, codec.fromPartial(payload)));
  return { position, kind, payload: codec.toJSON(decoded) };
}

describe('the timeline says where a turn stands', () => {
  it('reads each turn over all of its events, even when other turns ran in between', () => {
    // t1 is quarantined, t2 runs, then t1 is resolved and completes: two groups of t1.
    const events = [
      ev(0, 'message_received', { turnId: 't1', text: 'pay' }),
      ev(1, 'turn_dispatched', { turnId: 't1', attempt: 1 }),
      ev(2, 'turn_ambiguous', { turnId: 't1', toolCallId: 'c', reason: 'dropped' }),
      ev(3, 'message_received', { turnId: 't2', text: 'hi' }),
      ev(4, 'turn_dispatched', { turnId: 't2', attempt: 1 }),
      ev(5, 'question_request', { turnId: 't2', requestId: 'q1', question: 'which?' }),
      ev(6, 'turn_resolved', { turnId: 't1', toolCallId: 'c', actor: 'web:admin' }),
      ev(7, 'turn_dispatched', { turnId: 't1', attempt: 2 }),
      ev(8, 'turn_complete', { turnId: 't1', text: 'paid' }),
      ev(9, 'signed_root', { leafCount: 9 }),
    ];
    const standings = standingsByTurn([...events].reverse());
    const labels = groupByTurn(events).map((g) => {
      const standing = standings.get(g.turnId);
      return [g.turnId, standing === undefined ? '' : standingLabel(standing)];
    });
    expect(labels).toEqual([
      ['t1', 'complete, after a resolved quarantine'],
      ['t2', 'waiting for an answer'],
      ['t1', 'complete, after a resolved quarantine'],
    ]);
  });

  it.each<[TurnStanding, string]>([
    [{ state: StandingState.Received }, 'received'],
    [{ state: StandingState.Running, dispatchPosition: 1 }, 'running'],
    [
      { state: StandingState.AwaitingApproval, requestId: 'r', position: 2 },
      'waiting for approval',
    ],
    [{ state: StandingState.AwaitingAnswer, requestId: 'q', position: 2 }, 'waiting for an answer'],
    [
      {
        state: StandingState.HandedOff,
        targetAgent: 'billing',
        position: 2,
        afterResolution: false,
      },
      'handed off to billing',
    ],
    [
      {
        state: StandingState.Quarantined,
        toolCallId: 'c',
        reason: 'dropped',
        position: 2,
        afterResolution: false,
      },
      'quarantined',
    ],
    [{ state: StandingState.Resolved, position: 3 }, 'quarantine resolved, to run again'],
    [{ state: StandingState.Complete, position: 3, afterResolution: false }, 'complete'],
    [
      { state: StandingState.Complete, position: 9, afterResolution: true },
      'complete, after a resolved quarantine',
    ],
    [
      { state: StandingState.Failed, position: 3, afterResolution: false },
      'failed: the fallback reply',
    ],
    [
      { state: StandingState.Cancelled, requestId: 'r', position: 4, afterResolution: false },
      'cancelled',
    ],
  ])('%o is labelled %j', (standing, label) => {
    expect(standingLabel(standing)).toBe(label);
  });
});

describe('the timeline shows memory', () => {
  const asker = { caller: 'kubernetes:dave', participants: [], persona: '', session: '' };
  it('says what the agent kept and who cleared it', () => {
    const set = ev(4, 'memory_set', {
      key: 'city',
      value: 'Lisbon',
      turnId: 't1',
      toolCallId: 'c1',
      attribution: { ...asker, caller: 'web:owner' },
    });
    expect([actorOf(set), summaryOf(set)]).toEqual([
      'assistant',
      'kept in memory: "city" = "Lisbon"',
    ]);
    const one = ev(9, 'memory_cleared', { key: 'city', attribution: asker });
    expect([actorOf(one), summaryOf(one)]).toEqual(['kubernetes:dave', 'cleared memory "city"']);
    const all = ev(10, 'memory_cleared', { key: '', attribution: asker });
    expect(summaryOf(all)).toBe('cleared all memory');
    const own = ev(11, 'memory_cleared', { key: 'city', turnId: 't2', attribution: asker });
    expect(actorOf(own)).toBe('assistant');
  });
});

describe('the timeline shows summaries', () => {
  it('says what the control plane summarized, and which dispatch was given it', () => {
    const summary = ev(30, 'summary', {
      fromPosition: 0,
      toPosition: 20,
      previousPosition: 0,
      model: 'claude-x',
      text: 'Ada lives in Lyon.',
    });
    expect([actorOf(summary), summaryOf(summary)]).toEqual([
      'control plane',
      'summary of the turns from 0 to 20 by claude-x: Ada lives in Lyon.',
    ]);
    const given = ev(31, 'turn_dispatched', { turnId: 't', attempt: 1, summaryPosition: 30 });
    expect(summaryOf(given)).toBe('turn dispatched (attempt 1), given the summary at 30');
    const without = ev(32, 'turn_dispatched', { turnId: 'u', attempt: 1 });
    expect(summaryOf(without)).toBe('turn dispatched (attempt 1)');
  });
});

describe('the timeline shows handoffs', () => {
  it('names the agent of each model call and who handed the turn to whom', () => {
    const moved = ev(40, 'agent_handoff', {
      turnId: 't',
      step: 1,
      toolCallId: 'h1',
      fromAgent: 'triage',
      toAgent: 'billing',
      reason: 'an invoice',
    });
    expect([actorOf(moved), summaryOf(moved)]).toEqual([
      'triage',
      'handed the turn to billing: an invoice',
    ]);
    const call = ev(41, 'model_call', { turnId: 't', step: 2, model: 'm', agent: 'billing' });
    expect(actorOf(call)).toBe('billing');
    // A model call recorded before agents were named is the assistant's.
    expect(actorOf(ev(42, 'model_call', { turnId: 't', step: 3, model: 'm' }))).toBe('assistant');
  });
});

describe('the timeline shows delegation threads', () => {
  it('says who asked whom on which thread, what ran there, and the answer that closed it', () => {
    const opened = ev(50, 'tool_call', {
      turnId: 't',
      step: 1,
      toolCallId: 'd1',
      toolName: '__delegate_to',
      argsJson: '{"agent":"researcher","task":"find March"}',
      agent: 'lead',
    });
    expect([actorOf(opened), summaryOf(opened), threadOf(opened)]).toEqual([
      'lead',
      'asks researcher on thread d1: find March',
      { thread: '', depth: 0 },
    ]);
    const step = ev(51, 'model_call', {
      turnId: 't',
      step: 1,
      model: 'm',
      agent: 'researcher',
      thread: 'd1',
      depth: 1,
    });
    expect([actorOf(step), summaryOf(step), threadOf(step)]).toEqual([
      'researcher',
      'model call to m, step 1 on thread d1 (depth 1)',
      { thread: 'd1', depth: 1 },
    ]);
    const closed = ev(52, 'tool_result', {
      turnId: 't',
      toolCallId: 'd1',
      content: '40 billed',
      delegate: 'researcher',
    });
    expect([actorOf(closed), summaryOf(closed)]).toEqual([
      'researcher',
      'answered on thread d1: 40 billed',
    ]);
    // An ordinary tool result stays the tool's.
    const plain = ev(53, 'tool_result', { turnId: 't', toolCallId: 'c', content: 'x' });
    expect([actorOf(plain), summaryOf(plain)]).toEqual(['tool', 'result: x']);
  });

  it('names the agent and thread of each turn final answer, and the threads it heard', () => {
    const delegate = (position: number, id: string) =>
      ev(position, 'tool_call', {
        turnId: 't',
        toolCallId: id,
        toolName: '__delegate_to',
        agent: 'lead',
      });
    const call = (position: number, agent: string, thread = '') =>
      ev(position, 'model_call', {
        turnId: 't',
        step: 1,
        agent,
        thread,
        depth: thread === '' ? 0 : 1,
      });
    const events = [
      call(1, 'triage'),
      ev(2, 'agent_handoff', { turnId: 't', fromAgent: 'triage', toAgent: 'lead' }),
      call(3, 'lead'),
      delegate(4, 'd1'),
      delegate(5, 'd2'),
      call(6, 'researcher', 'd1'),
      call(7, 'checker', 'd2'),
      call(8, 'lead'),
      ev(9, 'turn_complete', { turnId: 't', text: 'both agree' }),
      ev(10, 'message_received', { turnId: 'u', text: 'thanks' }),
      ev(11, 'model_call', { turnId: 'u', step: 1, agent: 'lead' }),
    ];
    const answers = finalAnswersOf([...events].reverse());
    expect(answers.get('t')).toEqual({ agent: 'lead', threads: ['d1', 'd2'] });
    expect(finalAnswerNote(answers.get('t'))).toBe(
      " — the final answer, by lead on the turn's own thread, after threads d1, d2",
    );
    // A turn without threads needs no note.
    expect(answers.get('u')).toEqual({ agent: 'lead', threads: [] });
    expect(finalAnswerNote(answers.get('u'))).toBe('');
  });
});
