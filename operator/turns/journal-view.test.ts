import { openedTurn } from './view-state';
import { describe, expect, it } from '@jest/globals';
import { approvalArgsSha256 } from '../../common/approval-bytes';
import { AppError } from '../../common/errors';
import { isSettled } from '../../common/turn-standing';
import { payloadCodecs, type EventKind, type EventPayloads } from '../../common/event-kinds';
import type { JournalEntry } from '../../common/state-journal';
import {
  ApprovalDecision,
  ResolveDecision,
  ToolEffect,
  type Attribution,
} from '../../proto/gen/polychrome/events/v1/events';
import { Role } from '../../proto/gen/polychrome/harness/v1/harness';
import { AnomalyProblem, type JournalView, type TurnView } from './journal-view-types';
import { applyEntries, applyEntry, emptyView, foldJournal } from './journal-view';
import {
  approvalAnswers,
  committedHistory,
  questionAnswers,
  recordedSteps,
  transcriptTurns,
  turnReplyOf,
} from './turn-projections';
import {
  nextAttempt,
  oldestOrphan,
  pendingRequest,
  pendingTurn,
  turnForKey,
  turnState,
  TurnState,
} from './turn-state';
import type { TranscriptTurn } from './turn-service';

// ---- journal builder: real payloads, encoded with the codecs ----

interface NewEvent {
  readonly kind: string;
  readonly payload: Uint8Array;
}

function event<K extends EventKind>(kind: K, payload: Partial<EventPayloads[K]>): NewEvent {
  const codec = payloadCodecs[kind];
  return { kind, payload: codec.encode(codec.fromPartial(payload)).finish() };
}

const ALICE = 'web:alice';
const attribution = (caller: string): Attribution => ({
  caller,
  participants: [caller],
  persona: `persona-${caller}`,
  session: '',
});

const message = (turnId: string, key: string, text: string, caller = ALICE): NewEvent =>
  event('message_received', {
    turnId,
    idempotencyKey: key,
    text,
    attribution: attribution(caller),
    receivedAtMs: 1_000,
  });
const directive = (turnId: string, maxSteps: number, requiredApprover: string): NewEvent =>
  event('ingress_directive', { turnId, maxSteps, requiredApprover });
const dispatch = (turnId: string, attempt: number, fencingToken = attempt): NewEvent =>
  event('turn_dispatched', {
    turnId,
    attempt,
    leaseHolder: `replica-${attempt}`,
    fencingToken,
    attribution: attribution(ALICE),
    dispatchedAtMs: 2_000 + attempt,
  });
const modelText = (turnId: string, step: number, text: string): NewEvent =>
  event('model_call', {
    turnId,
    step,
    model: 'm',
    content: [{ block: { $case: 'text', value: text } }],
    stopReason: 'end_turn',
  });
const modelTool = (turnId: string, step: number, toolCallId: string, name: string): NewEvent =>
  event('model_call', {
    turnId,
    step,
    model: 'm',
    content: [{ block: { $case: 'toolUse', value: { toolCallId, name, argsJson: ARGS } } }],
    stopReason: 'tool_use',
  });
const toolCall = (turnId: string, step: number, toolCallId: string, effect: ToolEffect): NewEvent =>
  event('tool_call', { turnId, step, toolCallId, toolName: 'refund', argsJson: ARGS, effect });
const toolResult = (
  turnId: string,
  toolCallId: string,
  content: string,
  denied = false,
): NewEvent => event('tool_result', { turnId, toolCallId, content, denied });
const ARGS = '{"amount_minor":500,"order":"A-17"}';
const approvalRequest = (
  turnId: string,
  requestId: string,
  requiredApprover = '',
  argsSha256: Uint8Array = approvalArgsSha256(ARGS),
): NewEvent =>
  event('approval_request', {
    turnId,
    requestId,
    toolCallId: `call-${requestId}`,
    toolName: 'refund',
    argsJson: ARGS,
    argsSha256: Buffer.from(argsSha256),
    reason: 'refunds move money',
    requiredApprover,
  });
const approvalResponse = (
  turnId: string,
  requestId: string,
  decision: ApprovalDecision,
): NewEvent =>
  event('approval_response', {
    turnId,
    requestId,
    toolName: 'refund',
    argsSha256: Buffer.from(approvalArgsSha256(ARGS)),
    decision,
    answeredBy: 'web:admin',
    keyId: 'approval-key',
    signature: Buffer.alloc(64, 7),
    answeredAtMs: 3_000,
  });
const questionRequest = (turnId: string, requestId: string, question: string): NewEvent =>
  event('question_request', { turnId, requestId, toolCallId: `call-${requestId}`, question });
const questionResponse = (turnId: string, requestId: string, answer: string): NewEvent =>
  event('question_response', { turnId, requestId, answer, answeredBy: ALICE, answeredAtMs: 4_000 });
const complete = (turnId: string, text: string, fallback = false): NewEvent =>
  event('turn_complete', { turnId, text, steps: 1, completedAtMs: 5_000, fallback });
const ambiguous = (turnId: string, toolCallId: string, reason: string): NewEvent =>
  event('turn_ambiguous', { turnId, toolCallId, reason, detectedAtMs: 6_000 });
const handoff = (turnId: string, targetAgent: string, reason: string): NewEvent =>
  event('handoff', { turnId, toolCallId: 'call-h', targetAgent, reason });

/** A journal written the way the coordinator writes it: every batch ends with a signed_root. */
class Journal {
  readonly entries: JournalEntry[] = [];

  /** Appends `events` and the batch's signed_root; returns the batch's first position. */
  batch(...events: NewEvent[]): number {
    const first = this.entries.length;
    for (const e of events) this.raw(e.kind, e.payload);
    const leafCount = this.entries.length;
    this.raw(
      'signed_root',
      event('signed_root', {
        leafCount,
        root: Buffer.alloc(32, leafCount),
        keyId: 'journal-key',
        signature: Buffer.alloc(64, 1),
      }).payload,
    );
    return first;
  }

  raw(kind: string, payload: Uint8Array): void {
    this.entries.push({ position: this.entries.length, kind, payload });
  }

  view(): JournalView {
    return foldJournal(this.entries);
  }
}

/**
 * Everything a view exposes, as a deep copy of plain data (views are lazy objects, and a
 * copy shows whether anything the view handed out changed later).
 */
function snapshot(view: JournalView): unknown {
  return structuredClone({
    head: view.head,
    lastSignedRoot: view.lastSignedRoot,
    turns: view.turns,
    openTurns: view.openTurns,
    newestTurns: [...view.newestTurns()],
    turnIdsByKey: [...view.turnIdsByKey],
    turnsById: [...view.turnsById],
    anomalies: view.anomalies,
    acceptedLosses: view.acceptedLosses,
    memory: [...view.memory],
  });
}

function turnOf(view: JournalView, turnId: string): TurnView {
  const turn = view.turnsById.get(turnId);
  if (turn === undefined) throw new Error(`test: no turn ${turnId}`);
  return turn;
}

/** The history a turn whose message came next, dispatched with no window, would be given. */
function historyOfAll(view: JournalView): ReturnType<typeof committedHistory> {
  const next: TurnView = {
    ...openedTurn({
      turnId: 'next',
      idempotencyKey: 'next',
      text: '',
      attribution: attribution(ALICE),
      receivedAtMs: 0,
      messagePosition: view.head,
    }),
  };
  return committedHistory(view, next);
}

function thrown(run: () => unknown): AppError {
  try {
    run();
  } catch (error) {
    if (error instanceof AppError) return error;
    throw error;
  }
  throw new Error('test: expected an AppError, nothing was thrown');
}

const userText = (text: string) => ({ text, caller: ALICE, receivedAtMs: 1_000 });

// ---- tests ----

describe('foldJournal', () => {
  it('folds an empty journal to an empty view', () => {
    const view = foldJournal([]);
    expect(snapshot(view)).toEqual({
      head: 0,
      lastSignedRoot: undefined,
      turns: [],
      openTurns: [],
      newestTurns: [],
      turnIdsByKey: [],
      turnsById: [],
      anomalies: [],
      acceptedLosses: [],
      memory: [],
    });
    expect(oldestOrphan(view)).toBeUndefined();
    expect(pendingTurn(view)).toBeUndefined();
    expect(historyOfAll(view)).toEqual([]);
    expect(transcriptTurns(view)).toEqual([]);
    expect(snapshot(emptyView())).toEqual(snapshot(view));
  });

  it('tracks the last signed_root and counts it in positions', () => {
    const j = new Journal();
    j.batch(message('t1', 'k1', 'hi'), dispatch('t1', 1));
    j.batch(modelText('t1', 1, 'hello'));
    j.batch(complete('t1', 'hello'));
    const view = j.view();
    expect(view.head).toBe(7);
    expect(view.lastSignedRoot).toEqual({
      position: 6,
      leafCount: 6,
      root: '06'.repeat(32),
      keyId: 'journal-key',
    });
    const turn = turnOf(view, 't1');
    expect(turn.messagePosition).toBe(0);
    expect(turn.dispatches.map((d) => d.position)).toEqual([1]);
    expect(turn.steps.map((s) => s.position)).toEqual([3]);
    expect(turn.terminal?.position).toBe(5);
  });

  it('settles a complete turn: history, transcript and reply', () => {
    const j = new Journal();
    j.batch(
      message('t1', 'k1', 'refund order A-17'),
      directive('t1', 3, 'web:boss'),
      dispatch('t1', 1),
    );
    j.batch(modelText('t1', 1, 'Done.'));
    j.batch(complete('t1', 'Done.'));
    const view = j.view();
    const turn = turnOf(view, 't1');

    expect(turnState(turn)).toBe(TurnState.Complete);
    expect(turn).toMatchObject({
      turnId: 't1',
      idempotencyKey: 'k1',
      text: 'refund order A-17',
      attribution: attribution(ALICE),
      receivedAtMs: 1_000,
      messagePosition: 0,
      directive: { position: 1, maxSteps: 3, requiredApprover: 'web:boss' },
      dispatches: [
        {
          attempt: 1,
          position: 2,
          leaseHolder: 'replica-1',
          fencingToken: 1,
          attribution: attribution(ALICE),
          dispatchedAtMs: 2_001,
        },
      ],
    });
    expect(view.turnIdsByKey.get('k1')).toBe('t1');
    expect(turnForKey(view, 'k1')).toBe(turn);
    expect(turnForKey(view, 'k2')).toBeUndefined();
    expect(oldestOrphan(view)).toBeUndefined();
    expect(pendingTurn(view)).toBeUndefined();

    expect(historyOfAll(view)).toEqual([
      { role: Role.ROLE_USER, content: [{ block: { $case: 'text', value: 'refund order A-17' } }] },
      { role: Role.ROLE_ASSISTANT, content: [{ block: { $case: 'text', value: 'Done.' } }] },
    ]);
    expect(transcriptTurns(view)).toEqual([
      {
        turnId: 't1',
        position: 0,
        user: userText('refund order A-17'),
        status: 'complete',
        reply: 'Done.',
        fallback: false,
      },
    ]);
    expect(turnReplyOf('conv-1', turn)).toEqual({
      conversationId: 'conv-1',
      turnId: 't1',
      status: 'complete',
      reply: 'Done.',
      fallback: false,
      requestedAt: 0,
    });
  });

  it('carries the fallback flag of a complete turn', () => {
    const j = new Journal();
    j.batch(message('t1', 'k1', 'hi'), dispatch('t1', 1));
    j.batch(complete('t1', 'Sorry, please rephrase.', true));
    expect(turnReplyOf('c', turnOf(j.view(), 't1'))).toMatchObject({
      status: 'complete',
      reply: 'Sorry, please rephrase.',
      fallback: true,
    });
  });

  describe('a paused turn, answered and re-dispatched, then complete', () => {
    const j = new Journal();
    const ends: number[] = [];
    const mark = (): void => void ends.push(j.entries.length);
    j.batch(message('t1', 'k1', 'refund A-17'), directive('t1', 0, 'web:boss'), dispatch('t1', 1));
    mark(); // 0: dispatched, nothing after it
    j.batch(modelTool('t1', 1, 'call-r1', 'refund'));
    mark(); // 1: a step, still in flight
    j.batch(approvalRequest('t1', 'r1'));
    mark(); // 2: paused
    j.batch(
      approvalResponse('t1', 'r1', ApprovalDecision.APPROVAL_DECISION_APPROVED),
      dispatch('t1', 2),
    );
    mark(); // 3: answered and re-dispatched: an orphan until it settles
    j.batch(toolCall('t1', 1, 'call-r1', ToolEffect.TOOL_EFFECT_SIDE_EFFECT));
    j.batch(toolResult('t1', 'call-r1', 'refunded'));
    j.batch(modelText('t1', 2, 'Refunded.'));
    mark(); // 4: attempt 2 has steps, still no outcome
    j.batch(complete('t1', 'Refunded.'));
    mark(); // 5: complete

    const at = (i: number): JournalView => foldJournal(j.entries.slice(0, ends[i]));

    it.each([
      [0, TurnState.Orphan],
      [1, TurnState.Orphan],
      [2, TurnState.AwaitingApproval],
      [3, TurnState.Orphan],
      [4, TurnState.Orphan],
      [5, TurnState.Complete],
    ])('after stage %i the turn is %s', (stage, state) => {
      const view = at(stage);
      const turn = turnOf(view, 't1');
      expect(turnState(turn)).toBe(state);
      expect(oldestOrphan(view)?.turnId).toBe(state === TurnState.Orphan ? 't1' : undefined);
      expect(pendingTurn(view)?.turnId).toBe(
        state === TurnState.AwaitingApproval ? 't1' : undefined,
      );
      // Never partial text: in flight it is absent, paused it is a card.
      expect(transcriptTurns(view).map((t) => t.status)).toEqual(
        state === TurnState.Orphan ? [] : [state === TurnState.Complete ? 'complete' : 'paused'],
      );
      expect(historyOfAll(view)).toHaveLength(state === TurnState.Complete ? 2 : 0);
    });

    it('shows the pending call as an approval card while paused', () => {
      const turn = turnOf(at(2), 't1');
      const card = {
        requestId: 'r1',
        toolCallId: 'call-r1',
        toolName: 'refund',
        args: { amount_minor: 500, order: 'A-17' },
        argsSha256: Buffer.from(approvalArgsSha256(ARGS)).toString('hex'),
        reason: 'refunds move money',
        // The request names none: the directive's approver applies.
        requiredApprover: 'web:boss',
      };
      expect(turnReplyOf('conv-1', turn)).toEqual({
        conversationId: 'conv-1',
        turnId: 't1',
        status: 'paused',
        approval: card,
        requestedAt: 0,
      });
      expect(transcriptTurns(at(2))).toEqual([
        {
          turnId: 't1',
          position: 0,
          user: userText('refund A-17'),
          status: 'paused',
          approval: card,
        },
      ]);
      expect(pendingRequest(turn)).toMatchObject({ type: 'approval', position: 6 });
      expect(turnReplyOf('conv-1', turnOf(at(3), 't1'))).toBeUndefined();
    });

    it('keeps the steps of both attempts in journal order, for recorded_steps', () => {
      const turn = turnOf(at(5), 't1');
      expect(turn.steps.map((s) => [s.kind, s.position])).toEqual([
        ['model_call', 4],
        ['tool_call', 11],
        ['tool_result', 13],
        ['model_call', 15],
      ]);
      expect(turn.dispatches.map((d) => [d.attempt, d.position])).toEqual([
        [1, 2],
        [2, 9],
      ]);
      expect(nextAttempt(turn)).toBe(3);
      const steps = recordedSteps(turn);
      expect(steps.map((s) => [s.sequence, s.step?.$case])).toEqual([
        [0, 'modelCall'],
        [0, 'toolCall'],
        [0, 'toolResult'],
        [0, 'modelCall'],
      ]);
      expect(steps[1]?.step).toEqual({
        $case: 'toolCall',
        value: expect.objectContaining({
          toolCallId: 'call-r1',
          effect: ToolEffect.TOOL_EFFECT_SIDE_EFFECT,
          argsJson: ARGS,
        }),
      });
      expect(approvalAnswers(turn).map((a) => [a.requestId, a.decision])).toEqual([
        ['r1', ApprovalDecision.APPROVAL_DECISION_APPROVED],
      ]);
    });
  });

  it('a denial: the turn goes on and completes', () => {
    const j = new Journal();
    j.batch(message('t1', 'k1', 'refund'), dispatch('t1', 1));
    j.batch(modelTool('t1', 1, 'call-r1', 'refund'));
    j.batch(approvalRequest('t1', 'r1', 'web:boss'));
    const paused = j.view();
    expect(turnReplyOf('c', turnOf(paused, 't1'))?.approval?.requiredApprover).toBe('web:boss');
    j.batch(
      approvalResponse('t1', 'r1', ApprovalDecision.APPROVAL_DECISION_DENIED),
      dispatch('t1', 2),
    );
    expect(turnState(turnOf(j.view(), 't1'))).toBe(TurnState.Orphan);
    j.batch(toolResult('t1', 'call-r1', 'denied by web:boss', true));
    j.batch(modelText('t1', 2, 'I could not refund it.'));
    j.batch(complete('t1', 'I could not refund it.'));
    const turn = turnOf(j.view(), 't1');
    expect(turnState(turn)).toBe(TurnState.Complete);
    expect(turn.steps.find((s) => s.kind === 'tool_result')?.payload).toMatchObject({
      denied: true,
    });
    expect(turnReplyOf('c', turn)?.reply).toBe('I could not refund it.');
  });

  it('a rejected answer followed by the same request again leaves the turn paused', () => {
    const j = new Journal();
    j.batch(message('t1', 'k1', 'refund'), dispatch('t1', 1));
    j.batch(approvalRequest('t1', 'r1'));
    j.batch(
      approvalResponse('t1', 'r1', ApprovalDecision.APPROVAL_DECISION_APPROVED),
      dispatch('t1', 2),
    );
    // The harness rejected that answer (say, a bad signature) and paused again.
    j.batch(approvalRequest('t1', 'r1'));
    const view = j.view();
    const turn = turnOf(view, 't1');
    expect(turnState(turn)).toBe(TurnState.AwaitingApproval);
    expect(pendingRequest(turn)?.position).toBe(8);
    expect(oldestOrphan(view)).toBeUndefined();
    expect(pendingTurn(view)).toBe(turn);
  });

  it.each([
    ['approval', approvalRequest('t1', 'r1')],
    ['question', questionRequest('t1', 'q1', 'which?')],
  ])(
    'an unanswered %s request before the latest dispatch does not pause the turn',
    (_name, request) => {
      const j = new Journal();
      j.batch(message('t1', 'k1', 'hi'), dispatch('t1', 1));
      j.batch(request);
      expect(turnState(turnOf(j.view(), 't1'))).not.toBe(TurnState.Orphan);
      j.batch(dispatch('t1', 2));
      const view = j.view();
      expect(turnState(turnOf(view, 't1'))).toBe(TurnState.Orphan);
      expect(pendingTurn(view)).toBeUndefined();
      expect(oldestOrphan(view)?.turnId).toBe('t1');
    },
  );

  it('two unanswered requests after one dispatch: the later one is pending', () => {
    const j = new Journal();
    j.batch(message('t1', 'k1', 'hi'), dispatch('t1', 1));
    j.batch(approvalRequest('t1', 'r1'));
    j.batch(questionRequest('t1', 'q1', 'which?'));
    const turn = turnOf(j.view(), 't1');
    expect(turnState(turn)).toBe(TurnState.AwaitingAnswer);
    expect(pendingRequest(turn)).toMatchObject({ type: 'question', position: 5 });
  });

  it('nextAttempt follows the highest attempt recorded, not the number of dispatches', () => {
    const j = new Journal();
    j.batch(message('t1', 'k1', 'hi'), dispatch('t1', 3));
    expect(nextAttempt(turnOf(j.view(), 't1'))).toBe(4);
    j.batch(dispatch('t1', 2));
    expect(nextAttempt(turnOf(j.view(), 't1'))).toBe(4);
  });

  it('a question: awaiting an answer, then answered, re-dispatched and complete', () => {
    const j = new Journal();
    j.batch(message('t1', 'k1', 'book a table'), dispatch('t1', 1));
    j.batch(questionRequest('t1', 'q1', 'For how many?'));
    const paused = j.view();
    const turn = turnOf(paused, 't1');
    expect(turnState(turn)).toBe(TurnState.AwaitingAnswer);
    expect(pendingTurn(paused)).toBe(turn);
    expect(turnReplyOf('c', turn)).toEqual({
      conversationId: 'c',
      turnId: 't1',
      status: 'paused',
      question: { requestId: 'q1', question: 'For how many?' },
      requestedAt: 0,
    });
    j.batch(questionResponse('t1', 'q1', 'four'), dispatch('t1', 2));
    const resumed = j.view();
    expect(turnState(turnOf(resumed, 't1'))).toBe(TurnState.Orphan);
    expect(questionAnswers(turnOf(resumed, 't1')).map((a) => a.answer)).toEqual(['four']);
    j.batch(complete('t1', 'Booked for four.'));
    expect(turnState(turnOf(j.view(), 't1'))).toBe(TurnState.Complete);
  });

  it('an ambiguous turn is quarantined: never an orphan, never in history, in the transcript', () => {
    const j = new Journal();
    j.batch(message('t1', 'k1', 'pay'), dispatch('t1', 1));
    j.batch(toolCall('t1', 1, 'call-p', ToolEffect.TOOL_EFFECT_SIDE_EFFECT));
    j.batch(ambiguous('t1', 'call-p', 'the payment may have gone through'));
    const view = j.view();
    const turn = turnOf(view, 't1');
    expect(turnState(turn)).toBe(TurnState.Ambiguous);
    expect(oldestOrphan(view)).toBeUndefined();
    expect(pendingTurn(view)).toBeUndefined();
    expect(historyOfAll(view)).toEqual([]);
    expect(transcriptTurns(view)).toEqual([
      {
        turnId: 't1',
        position: 0,
        user: userText('pay'),
        status: 'ambiguous',
        ambiguous: { toolCallId: 'call-p', reason: 'the payment may have gone through' },
      },
    ]);
    // A later dispatch of a quarantined turn changes nothing.
    j.batch(dispatch('t1', 2));
    const after = j.view();
    expect(turnState(turnOf(after, 't1'))).toBe(TurnState.Ambiguous);
    expect(oldestOrphan(after)).toBeUndefined();
    expect(after.anomalies.map((a) => a.problem)).toEqual([AnomalyProblem.AfterTerminal]);
  });

  it('a handoff settles the turn', () => {
    const j = new Journal();
    j.batch(message('t1', 'k1', 'talk to billing'), dispatch('t1', 1));
    j.batch(handoff('t1', 'billing', 'a billing question'));
    const view = j.view();
    const turn = turnOf(view, 't1');
    expect(turnState(turn)).toBe(TurnState.Handoff);
    expect(oldestOrphan(view)).toBeUndefined();
    expect(historyOfAll(view)).toEqual([]);
    expect(turnReplyOf('c', turn)).toEqual({
      conversationId: 'c',
      turnId: 't1',
      status: 'handoff',
      handoff: { targetAgent: 'billing', reason: 'a billing question' },
      requestedAt: 0,
    });
  });

  it('two orphans: the one whose message came first is recovered first', () => {
    const j = new Journal();
    j.batch(message('t1', 'k1', 'one'), dispatch('t1', 1));
    j.batch(message('t2', 'k2', 'two'), dispatch('t2', 1));
    // t1's newer attempt crashed too: its latest dispatch is now after t2's.
    j.batch(dispatch('t1', 2));
    const view = j.view();
    expect(view.turns.map((t) => [t.turnId, turnState(t)])).toEqual([
      ['t1', 'orphan'],
      ['t2', 'orphan'],
    ]);
    expect(oldestOrphan(view)?.turnId).toBe('t1');
    j.batch(complete('t1', 'done one'));
    expect(oldestOrphan(j.view())?.turnId).toBe('t2');
    j.batch(complete('t2', 'done two'));
    expect(oldestOrphan(j.view())).toBeUndefined();
  });

  it('pendingTurn returns the oldest paused turn when there are several', () => {
    const j = new Journal();
    j.batch(message('t1', 'k1', 'one'), dispatch('t1', 1));
    j.batch(message('t2', 'k2', 'two'), dispatch('t2', 1));
    j.batch(questionRequest('t2', 'q2', 'which?'));
    j.batch(approvalRequest('t1', 'r1'));
    expect(pendingTurn(j.view())?.turnId).toBe('t1');
  });

  it('history holds complete turns only, in order; the transcript leaves in-flight turns out', () => {
    const j = new Journal();
    j.batch(message('t1', 'k1', 'first'), dispatch('t1', 1));
    j.batch(complete('t1', 'reply one'));
    j.batch(message('t2', 'k2', 'ambiguous one'), dispatch('t2', 1));
    j.batch(ambiguous('t2', 'call-x', 'unknown'));
    j.batch(message('t3', 'k3', 'third'), dispatch('t3', 1));
    j.batch(complete('t3', 'reply three'));
    j.batch(message('t4', 'k4', 'paused one'), dispatch('t4', 1));
    j.batch(approvalRequest('t4', 'r4'));
    j.batch(message('t5', 'k5', 'in flight'), dispatch('t5', 1));
    j.batch(modelText('t5', 1, 'partial text'));
    const view = j.view();
    const texts = (h: ReturnType<typeof committedHistory>) =>
      h.map((m) => [
        m.role,
        m.content.map((b) => (b.block?.$case === 'text' ? b.block.value : '')),
      ]);
    expect(texts(historyOfAll(view))).toEqual([
      [Role.ROLE_USER, ['first']],
      [Role.ROLE_ASSISTANT, ['reply one']],
      [Role.ROLE_USER, ['third']],
      [Role.ROLE_ASSISTANT, ['reply three']],
    ]);
    // The history a turn starts with: only turns before it.
    expect(texts(committedHistory(view, turnOf(view, 't3')))).toEqual([
      [Role.ROLE_USER, ['first']],
      [Role.ROLE_ASSISTANT, ['reply one']],
    ]);
    expect(committedHistory(view, turnOf(view, 't1'))).toEqual([]);
    expect(transcriptTurns(view).map((t: TranscriptTurn) => [t.turnId, t.status])).toEqual([
      ['t1', 'complete'],
      ['t2', 'ambiguous'],
      ['t3', 'complete'],
      ['t4', 'paused'],
    ]);
    expect(JSON.stringify(transcriptTurns(view))).not.toContain('partial text');
  });

  it('a message without a dispatch is neither an orphan nor in history or transcript', () => {
    const j = new Journal();
    j.batch(message('t1', 'k1', 'lost'));
    const view = j.view();
    const turn = turnOf(view, 't1');
    expect(turnState(turn)).toBe(TurnState.Received);
    expect(nextAttempt(turn)).toBe(1);
    expect(oldestOrphan(view)).toBeUndefined();
    expect(transcriptTurns(view)).toEqual([]);
    expect(turnReplyOf('c', turn)).toBeUndefined();
    // Even with a (damaged) completion, the committed-turn filter wants the dispatch too.
    j.batch(complete('t1', 'never dispatched'));
    expect(historyOfAll(j.view())).toEqual([]);
    expect(transcriptTurns(j.view())).toEqual([]);
  });

  it('a reused idempotency key never replaces the first message, and shows as an anomaly', () => {
    const j = new Journal();
    j.batch(message('t1', 'k1', 'original'), dispatch('t1', 1));
    j.batch(message('t1', 'k1', 'retry written twice'));
    j.batch(message('t9', 'k1', 'same key, other turn id'), dispatch('t9', 1));
    j.batch(message('t1', 'k7', 'same turn id, other key'));
    const view = j.view();
    expect(turnOf(view, 't1').text).toBe('original');
    expect(turnOf(view, 't1').messagePosition).toBe(0);
    expect(view.turnIdsByKey.get('k1')).toBe('t1');
    expect(view.turnIdsByKey.has('k7')).toBe(false);
    // The other turn id is a real turn (it was dispatched), reachable by id only.
    expect(view.turns.map((t) => t.turnId)).toEqual(['t1', 't9']);
    expect(view.anomalies.map((a) => [a.position, a.kind, a.turnId, a.problem])).toEqual([
      [3, 'message_received', 't1', AnomalyProblem.DuplicateIdempotencyKey],
      [5, 'message_received', 't9', AnomalyProblem.DuplicateIdempotencyKey],
      [8, 'message_received', 't1', AnomalyProblem.DuplicateTurnId],
    ]);
    expect(view.anomalies[0]?.message).toBe(
      'idempotency key "k1" already opened turn t1; the first message keeps the key',
    );
  });

  it('sets aside events of unknown turns, second directives and second terminal markers', () => {
    const j = new Journal();
    j.batch(message('t1', 'k1', 'hi'), directive('t1', 2, ''), dispatch('t1', 1));
    j.batch(modelText('ghost', 1, 'boo'));
    j.batch(directive('t1', 9, 'web:other'));
    j.batch(complete('t1', 'first reply'));
    j.batch(complete('t1', 'second reply'));
    const view = j.view();
    const turn = turnOf(view, 't1');
    expect(turn.directive).toEqual({ position: 1, maxSteps: 2, requiredApprover: '' });
    expect(turn.steps).toEqual([]);
    expect(turnReplyOf('c', turn)?.reply).toBe('first reply');
    expect(view.anomalies.map((a) => [a.position, a.turnId, a.problem])).toEqual([
      [4, 'ghost', AnomalyProblem.UnknownTurn],
      [6, 't1', AnomalyProblem.DuplicateDirective],
      [10, 't1', AnomalyProblem.AfterTerminal],
    ]);
  });

  it('decodes the kinds it does not keep, and ignores them', () => {
    const j = new Journal();
    j.batch(
      event('memory_set', { key: 'tz', value: 'UTC', attribution: attribution(ALICE) }),
      event('conversation_closed', { reason: 'idle', closedAtMs: 1 }),
      event('conversation_reopened', { reopenedAtMs: 2 }),
      event('key_rotated', { oldKeyId: 'a', newKeyId: 'b' }),
      event('memory_cleared', { key: '' }),
    );
    const view = j.view();
    expect(view.head).toBe(6);
    expect(view.turns).toEqual([]);
    expect(view.anomalies).toEqual([]);
  });

  it('keeps the newest payment_policy: a later unlink ends the link', () => {
    const j = new Journal();
    expect(j.view().paymentPolicy).toBeUndefined();
    j.batch(
      event('payment_policy', { wallet: 'ops', limitsJson: '{"periodSeconds":60}', actor: 'a' }),
    );
    expect(j.view().paymentPolicy).toMatchObject({ position: 0, wallet: 'ops', actor: 'a' });
    j.batch(event('payment_policy', { wallet: '', actor: 'b' }));
    expect(j.view().paymentPolicy).toMatchObject({ position: 2, wallet: '', limitsJson: '' });
  });

  it("folds a turn's paid calls: each charge, then its send and its receipt, onto the call's newest charge", () => {
    const j = new Journal();
    j.batch(message('t1', 'k1', 'buy'), dispatch('t1', 1));
    j.batch(
      event('payment_charge', { turnId: 't1', toolCallId: 'a', amount: '5', idempotencyKey: 'ka' }),
      event('payment_charge', { turnId: 't1', toolCallId: 'b', amount: '7', idempotencyKey: 'kb' }),
      event('payment_sent', { turnId: 't1', toolCallId: 'b', idempotencyKey: 'kb' }),
      event('outbound_payment_receipt', { turnId: 't1', toolCallId: 'b', transaction: '0xt' }),
      // A send for a call that met no 402 changes nothing.
      event('payment_sent', { turnId: 't1', toolCallId: 'zz' }),
    );
    const turn = j.view().turnsById.get('t1');
    expect(
      turn?.payments.map((p) => [
        p.position,
        p.charge.toolCallId,
        p.sent?.position,
        p.receipt?.payload.transaction,
      ]),
    ).toEqual([
      [3, 'a', undefined, undefined],
      [4, 'b', 5, '0xt'],
    ]);
  });
});

describe('rejected journals', () => {
  const good = new Journal();
  good.batch(message('t1', 'k1', 'hi'), dispatch('t1', 1));

  it.each([
    ['a gap', 4],
    ['a repeat', 1],
  ])('rejects %s in positions, naming expected and found', (_name, found) => {
    const entries = [
      ...good.entries,
      { position: found, kind: 'model_call', payload: modelText('t1', 1, 'x').payload },
    ];
    const error = thrown(() => foldJournal(entries));
    expect(error.code).toBe('data_loss');
    expect(error.message).toBe(
      `journal position ${found} (model_call): expected position 3; positions must be dense from 0 (events are missing or repeated), read the journal again from 0`,
    );
    expect(error.details).toEqual({ expected: 3, found, kind: 'model_call' });
  });

  it('rejects a journal that does not start at 0', () => {
    const error = thrown(() =>
      foldJournal([{ position: 1, kind: 'signed_root', payload: new Uint8Array() }]),
    );
    expect(error.details).toEqual({ expected: 0, found: 1, kind: 'signed_root' });
  });

  it('rejects an unknown kind, naming its position', () => {
    const entries = [
      ...good.entries,
      { position: 3, kind: 'turn_completed', payload: new Uint8Array() },
    ];
    const error = thrown(() => foldJournal(entries));
    expect(error.code).toBe('data_loss');
    expect(error.message).toBe(
      'journal position 3: unknown event kind "turn_completed"; this reader cannot interpret the journal (written by a newer version?)',
    );
    expect(error.details).toEqual({ position: 3, kind: 'turn_completed' });
  });

  it.each([
    // Field 1 (turn_id), length-delimited, claims 5 bytes and has 1.
    [
      'a truncated payload',
      'turn_complete',
      Uint8Array.of(0x0a, 0x05, 0x61),
      'the payload does not decode',
    ],
    [
      'an empty turn id',
      'turn_complete',
      new Uint8Array(),
      'the payload names no turn (empty turn_id)',
    ],
    [
      'an empty turn id',
      'message_received',
      new Uint8Array(),
      'the payload names no turn (empty turn_id)',
    ],
    [
      'args that are not JSON',
      'approval_request',
      event('approval_request', {
        turnId: 't1',
        requestId: 'r1',
        argsJson: '{oops',
        argsSha256: Buffer.from(approvalArgsSha256('{oops')),
      }).payload,
      'args_json of request r1 is not JSON',
    ],
    [
      'an args hash that is not the args’ hash',
      'approval_request',
      approvalRequest('t1', 'r1', '', approvalArgsSha256('{"amount_minor":50000}')).payload,
      'args_sha256 of request r1 is not the SHA-256 of its args_json',
    ],
  ])('rejects %s in a %s payload, naming position and kind', (_name, kind, payload, what) => {
    const entries = [...good.entries, { position: 3, kind, payload }];
    const error = thrown(() => foldJournal(entries));
    expect(error.code).toBe('data_loss');
    expect(error.message).toBe(
      `journal position 3 (${kind}): ${what}; the journal cannot be read past it`,
    );
    expect(error.details).toEqual({ position: 3, kind });
  });
});

describe('applyEntry', () => {
  // A journal touching every rule: roots everywhere, pause, answer, retry, ambiguity,
  // duplicates, a ghost turn.
  const j = new Journal();
  j.batch(message('t1', 'k1', 'one'), directive('t1', 4, 'web:boss'), dispatch('t1', 1));
  j.batch(modelTool('t1', 1, 'call-r1', 'refund'));
  j.batch(approvalRequest('t1', 'r1'));
  j.batch(
    approvalResponse('t1', 'r1', ApprovalDecision.APPROVAL_DECISION_APPROVED),
    dispatch('t1', 2),
  );
  j.batch(toolCall('t1', 1, 'call-r1', ToolEffect.TOOL_EFFECT_SIDE_EFFECT));
  j.batch(toolResult('t1', 'call-r1', 'ok'), modelText('t1', 2, 'done'));
  j.batch(complete('t1', 'done'));
  j.batch(message('t2', 'k2', 'two'), dispatch('t2', 1));
  j.batch(message('t2', 'k2', 'two again'), modelText('ghost', 1, 'boo'));
  j.batch(toolCall('t2', 1, 'call-p', ToolEffect.TOOL_EFFECT_SIDE_EFFECT));
  j.batch(ambiguous('t2', 'call-p', 'unknown'));
  j.batch(message('t3', 'k3', 'three'), dispatch('t3', 1));
  j.batch(questionRequest('t3', 'q3', 'which?'));
  const full = foldJournal(j.entries);

  it('event by event gives the same view as folding the whole journal', () => {
    let view = emptyView();
    for (const entry of j.entries) view = applyEntry(view, entry);
    expect(snapshot(view)).toEqual(snapshot(full));
    expect(view.anomalies).toHaveLength(2);
    expect(full.turns.map(turnState)).toEqual(['complete', 'ambiguous', 'awaiting_answer']);
  });

  it('gives the same views whether or not the views in between were read', () => {
    let view = emptyView();
    for (const entry of j.entries) {
      view = applyEntry(view, entry);
      // Reading every view folds each from the previous one.
      expect(view.head).toBe(entry.position + 1);
      expect(snapshot(view)).toEqual(snapshot(foldJournal(j.entries.slice(0, view.head))));
    }
  });

  it('in batches gives the same view, and never modifies the view it extends', () => {
    const cut = 17;
    const base = foldJournal(j.entries.slice(0, cut));
    const before = snapshot(base);
    const extended = applyEntries(base, j.entries.slice(cut));
    expect(snapshot(extended)).toEqual(snapshot(full));
    expect(snapshot(base)).toEqual(before);
    // Two different continuations of one view do not disturb each other.
    const other = applyEntry(base, {
      position: cut,
      kind: 'turn_complete',
      payload: complete('t1', 'another ending').payload,
    });
    expect(snapshot(extended)).toEqual(snapshot(full));
    expect(other.head).toBe(cut + 1);
    expect(snapshot(base)).toEqual(before);
  });

  it('applies nothing of a batch with a bad entry, and the view stays usable', () => {
    const cut = 10;
    const base = foldJournal(j.entries.slice(0, cut));
    const before = snapshot(base);
    const batch = [
      ...j.entries.slice(cut, cut + 2),
      { position: cut + 2, kind: 'bogus', payload: new Uint8Array() },
    ];
    expect(thrown(() => applyEntries(base, batch)).message).toContain(
      `journal position ${cut + 2}: unknown event kind "bogus"`,
    );
    expect(snapshot(base)).toEqual(before);
    expect(snapshot(applyEntries(base, j.entries.slice(cut)))).toEqual(snapshot(full));
  });

  it('rejects an entry that is not at the head, naming both', () => {
    const view = foldJournal(j.entries.slice(0, 5));
    const error = thrown(() => applyEntry(view, { ...j.entries[6]!, position: 6 }));
    expect(error.code).toBe('data_loss');
    expect(error.message).toContain('journal position 6 (');
    expect(error.message).toContain('expected position 5');
    expect(thrown(() => applyEntry(view, j.entries[4]!)).details).toMatchObject({
      expected: 5,
      found: 4,
    });
  });

  it('returns the same view for no entries', () => {
    const view = foldJournal(j.entries.slice(0, 3));
    expect(applyEntries(view, [])).toBe(view);
  });
});

describe('the indexes the turn path reads', () => {
  const idsOf = (turns: Iterable<TurnView>): string[] => [...turns].map((t) => t.turnId);
  const unsettled = (view: JournalView): string[] =>
    idsOf(view.turns.filter((t) => !isSettled(t.standingFold.standing.state)));

  it('open turns are the unsettled turns, oldest first, and newestTurns walks back, at every head', () => {
    const j = new Journal();
    j.batch(message('t1', 'k1', 'one'), dispatch('t1', 1));
    j.batch(toolCall('t1', 1, 'call-p', ToolEffect.TOOL_EFFECT_SIDE_EFFECT));
    j.batch(ambiguous('t1', 'call-p', 'unknown'));
    j.batch(message('t2', 'k2', 'two'), dispatch('t2', 1));
    j.batch(approvalRequest('t2', 'r2'));
    j.batch(message('t3', 'k3', 'three'), dispatch('t3', 1));
    j.batch(
      event('turn_resolved', {
        turnId: 't1',
        decision: ResolveDecision.RESOLVE_DECISION_DID_NOT_RUN,
        toolCallId: 'call-p',
        actor: 'web:admin',
        caller: 'web:admin',
        resolvedAtMs: 7_000,
      }),
    );
    j.batch(complete('t3', 'three done'));
    let view = emptyView();
    const seen: string[][] = [];
    for (const entry of j.entries) {
      view = applyEntry(view, entry);
      expect(idsOf(view.openTurns)).toEqual(unsettled(view));
      expect(idsOf(view.newestTurns())).toEqual(idsOf(view.turns).reverse());
      seen.push(idsOf(view.openTurns));
    }
    // Quarantined t1 left the open turns; its resolution put it back ahead of the later ones.
    expect(seen).toContainEqual(['t2']);
    expect(seen).toContainEqual(['t2', 't3']);
    expect(idsOf(view.openTurns)).toEqual(['t1', 't2']);
    expect(oldestOrphan(view)?.turnId).toBe('t1');
    expect(pendingTurn(view)?.turnId).toBe('t2');
  });

  it('a view read in the middle of a chain keeps its own open turns', () => {
    const j = new Journal();
    j.batch(message('t1', 'k1', 'one'), dispatch('t1', 1));
    const open = foldJournal(j.entries);
    expect(idsOf(open.openTurns)).toEqual(['t1']);
    j.batch(complete('t1', 'done'));
    const settled = applyEntries(open, j.entries.slice(open.head));
    expect(idsOf(settled.openTurns)).toEqual([]);
    expect(idsOf(open.openTurns)).toEqual(['t1']);
    expect(turnState(open.turnsById.get('t1')!)).toBe('orphan');
  });
});

describe('harness Role values', () => {
  it('match the generated enum', () => {
    const j = new Journal();
    j.batch(message('t1', 'k1', 'q'), dispatch('t1', 1));
    j.batch(complete('t1', 'a'));
    expect(historyOfAll(j.view()).map((m) => m.role)).toEqual([
      Role.ROLE_USER,
      Role.ROLE_ASSISTANT,
    ]);
  });
});
