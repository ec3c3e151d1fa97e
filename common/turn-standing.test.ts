import { describe, expect, it } from '@jest/globals';
import {
  ApprovalDecision,
  ResolveDecision,
  ToolEffect,
} from '../proto/gen/polychrome/events/v1/events';
import {
  decodePayload,
  encodePayload,
  payloadCodecs,
  type EventKind,
  type EventPayloads,
} from './event-kinds';
import {
  advanceStanding,
  isSettled,
  NEW_TURN,
  StandingState,
  standingOf,
  type StandingEvent,
  type TurnStanding,
} from './turn-standing';

// ---- real events: payloads encoded with the codecs and decoded again ----

interface Planned {
  readonly kind: EventKind;
  readonly bytes: Uint8Array;
}

function ev<K extends EventKind>(kind: K, payload: Partial<EventPayloads[K]>): Planned {
  return { kind, bytes: encodePayload(kind, payloadCodecs[kind].fromPartial(payload)) };
}

/** The events at positions 0, 1, ... with their payloads decoded from the bytes. */
function journal(...planned: readonly Planned[]): StandingEvent[] {
  return planned.map(({ kind, bytes }, position) => ({
    position,
    kind,
    payload: decodePayload(kind, bytes),
  }));
}

/** The same events in their proto3 JSON form (the log stream's, which the UI reads). */
function asJson(events: readonly StandingEvent[]): StandingEvent[] {
  return events.map((e) => {
    const codec = payloadCodecs[e.kind as EventKind] as { toJSON(message: unknown): unknown };
    return { ...e, payload: JSON.parse(JSON.stringify(codec.toJSON(e.payload))) as unknown };
  });
}

const T = 'turn_1';
const message = ev('message_received', { turnId: T, idempotencyKey: 'k1', text: 'pay 42' });
const dispatch = (attempt: number): Planned =>
  ev('turn_dispatched', { turnId: T, attempt, leaseHolder: 'cp-0', fencingToken: 1 });
const modelCall = ev('model_call', { turnId: T, step: 1, model: 'm', stopReason: 'tool_use' });
const toolCall = ev('tool_call', {
  turnId: T,
  step: 1,
  toolCallId: 'call-pay',
  toolName: 'transfer',
  argsJson: '{"amount":42}',
  effect: ToolEffect.TOOL_EFFECT_SIDE_EFFECT,
});
const toolResult = ev('tool_result', { turnId: T, toolCallId: 'call-pay', content: 'paid' });
const approvalRequest = (requestId: string): Planned =>
  ev('approval_request', {
    turnId: T,
    requestId,
    toolCallId: 'call-pay',
    toolName: 'transfer',
    argsJson: '{"amount":42}',
  });
const approvalResponse = (requestId: string, decision: ApprovalDecision): Planned =>
  ev('approval_response', { turnId: T, requestId, toolName: 'transfer', decision });
const approved = (requestId: string): Planned =>
  approvalResponse(requestId, ApprovalDecision.APPROVAL_DECISION_APPROVED);
const question = (requestId: string): Planned =>
  ev('question_request', { turnId: T, requestId, question: 'Which account?' });
const answered = (requestId: string): Planned =>
  ev('question_response', { turnId: T, requestId, answer: 'savings', answeredBy: 'web:alice' });
const complete = (fallback = false): Planned =>
  ev('turn_complete', { turnId: T, text: fallback ? 'Sorry.' : 'Paid.', steps: 2, fallback });
const ambiguous = ev('turn_ambiguous', {
  turnId: T,
  toolCallId: 'call-pay',
  reason: 'the connection dropped mid-call',
});
const resolved = ev('turn_resolved', {
  turnId: T,
  decision: ResolveDecision.RESOLVE_DECISION_DID_NOT_RUN,
  toolCallId: 'call-pay',
  actor: 'web:admin',
  caller: 'web:admin',
});
const handoff = ev('handoff', {
  turnId: T,
  toolCallId: 'call-h',
  targetAgent: 'billing',
  reason: 'a billing question',
});
const signedRoot = ev('signed_root', { leafCount: 3, keyId: 'key' });

const rows: readonly (readonly [string, readonly Planned[], TurnStanding])[] = [
  ['received: nothing dispatched', [message], { state: StandingState.Received }],
  [
    'running: dispatched, steps committed, nothing settling or pausing it',
    [message, dispatch(1), signedRoot, modelCall, toolCall, toolResult],
    { state: StandingState.Running, dispatchPosition: 1 },
  ],
  [
    'paused for approval',
    [message, dispatch(1), modelCall, approvalRequest('r1')],
    { state: StandingState.AwaitingApproval, requestId: 'r1', position: 3 },
  ],
  [
    'paused for a question',
    [message, dispatch(1), modelCall, question('q1')],
    { state: StandingState.AwaitingAnswer, requestId: 'q1', position: 3 },
  ],
  [
    'answered and dispatched again: running',
    [message, dispatch(1), question('q1'), answered('q1'), dispatch(2)],
    { state: StandingState.Running, dispatchPosition: 4 },
  ],
  [
    'a request of an earlier attempt does not pause the turn',
    [message, dispatch(1), approvalRequest('r1'), dispatch(2)],
    { state: StandingState.Running, dispatchPosition: 3 },
  ],
  [
    'an answer recorded before its request does not count (the harness paused again)',
    [
      message,
      dispatch(1),
      approvalRequest('r1'),
      approved('r1'),
      dispatch(2),
      approvalRequest('r1'),
    ],
    { state: StandingState.AwaitingApproval, requestId: 'r1', position: 5 },
  ],
  [
    'two open requests: the later one',
    [message, dispatch(1), approvalRequest('r1'), question('q1')],
    { state: StandingState.AwaitingAnswer, requestId: 'q1', position: 3 },
  ],
  [
    'an answer to the later request leaves the earlier one pending',
    [message, dispatch(1), approvalRequest('r1'), question('q1'), answered('q1')],
    { state: StandingState.AwaitingApproval, requestId: 'r1', position: 2 },
  ],
  [
    'a question answer does not answer an approval with the same id',
    [message, dispatch(1), approvalRequest('x'), answered('x')],
    { state: StandingState.AwaitingApproval, requestId: 'x', position: 2 },
  ],
  [
    'an expired approval: the signed denial and the next dispatch, running',
    [
      message,
      dispatch(1),
      approvalRequest('r1'),
      ev('approval_expired', { turnId: T, requestId: 'r1', ttlMs: 1_000 }),
      approvalResponse('r1', ApprovalDecision.APPROVAL_DECISION_DENIED),
      dispatch(2),
    ],
    { state: StandingState.Running, dispatchPosition: 5 },
  ],
  [
    'handed off',
    [message, dispatch(1), modelCall, handoff],
    { state: StandingState.HandedOff, targetAgent: 'billing', position: 3, afterResolution: false },
  ],
  [
    'quarantined (ambiguous)',
    [message, dispatch(1), modelCall, toolCall, ambiguous],
    {
      state: StandingState.Quarantined,
      toolCallId: 'call-pay',
      reason: 'the connection dropped mid-call',
      position: 4,
      afterResolution: false,
    },
  ],
  [
    'a quarantined turn stays quarantined whatever follows but a resolution',
    [message, dispatch(1), toolCall, ambiguous, dispatch(2), complete()],
    {
      state: StandingState.Quarantined,
      toolCallId: 'call-pay',
      reason: 'the connection dropped mid-call',
      position: 3,
      afterResolution: false,
    },
  ],
  [
    'resolved: the quarantine ended, not dispatched again yet',
    [message, dispatch(1), toolCall, ambiguous, resolved],
    { state: StandingState.Resolved, position: 4 },
  ],
  [
    'resolved, then dispatched again: running',
    [message, dispatch(1), toolCall, ambiguous, resolved, dispatch(2)],
    { state: StandingState.Running, dispatchPosition: 5 },
  ],
  [
    'resolved then completed: complete, not quarantined',
    [
      message,
      dispatch(1),
      modelCall,
      toolCall,
      ambiguous,
      resolved,
      dispatch(2),
      toolCall,
      toolResult,
      complete(),
    ],
    { state: StandingState.Complete, position: 9, afterResolution: true },
  ],
  [
    'resolved, then quarantined again',
    [message, dispatch(1), toolCall, ambiguous, resolved, dispatch(2), toolCall, ambiguous],
    {
      state: StandingState.Quarantined,
      toolCallId: 'call-pay',
      reason: 'the connection dropped mid-call',
      position: 7,
      afterResolution: true,
    },
  ],
  [
    'complete',
    [message, dispatch(1), modelCall, complete(), signedRoot],
    { state: StandingState.Complete, position: 3, afterResolution: false },
  ],
  [
    'failed: settled with the fixed fallback reply',
    [message, dispatch(1), modelCall, complete(true)],
    { state: StandingState.Failed, position: 3, afterResolution: false },
  ],
  [
    'cancelled: an admin cancelled the pending request, the control plane replied',
    [
      message,
      dispatch(1),
      approvalRequest('r1'),
      ev('request_cancelled', { turnId: T, requestId: 'r1', cancelledBy: 'web:admin' }),
      complete(),
    ],
    { state: StandingState.Cancelled, requestId: 'r1', position: 4, afterResolution: false },
  ],
  [
    'the first settling marker wins',
    [message, dispatch(1), complete(), ambiguous, handoff],
    { state: StandingState.Complete, position: 2, afterResolution: false },
  ],
  [
    'a turn_resolved of a turn that is not quarantined counts for nothing',
    [message, dispatch(1), resolved, complete()],
    { state: StandingState.Complete, position: 3, afterResolution: false },
  ],
];

describe('where a turn stands (common/turn-standing.ts)', () => {
  it.each(rows)('%s', (_name, planned, expected) => {
    const events = journal(...planned);
    expect(standingOf(events)).toEqual(expected);
    // The UI reads the proto3 JSON form (defaults left out): the same standing.
    expect(standingOf(asJson(events))).toEqual(expected);
  });

  it('folds event by event to what standingOf reads', () => {
    const events = journal(message, dispatch(1), toolCall, ambiguous, resolved, dispatch(2));
    const states: string[] = [];
    let fold = NEW_TURN;
    for (const event of events) {
      fold = advanceStanding(fold, event);
      states.push(fold.standing.state);
    }
    expect(states).toEqual([
      StandingState.Received,
      StandingState.Running,
      StandingState.Running,
      StandingState.Quarantined,
      StandingState.Resolved,
      StandingState.Running,
    ]);
    expect(NEW_TURN.standing).toEqual({ state: StandingState.Received });
  });

  it('names the settled states: only a resolution moves a turn on from them', () => {
    expect(Object.values(StandingState).filter(isSettled)).toEqual([
      StandingState.HandedOff,
      StandingState.Quarantined,
      StandingState.Complete,
      StandingState.Failed,
      StandingState.Cancelled,
    ]);
  });
});
