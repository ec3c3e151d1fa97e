import { DEFAULT_HISTORY_TOKENS } from '../api/v1alpha1/conversation-values';
import { describe, expect, it } from '@jest/globals';
import { approvalArgsSha256 } from '../../common/approval-bytes';
import { payloadCodecs, type EventKind, type EventPayloads } from '../../common/event-kinds';
import { requestIds } from '../../common/request-ids';
import type { JournalEntry } from '../../common/state-journal';
import { ApprovalDecision, ResolveDecision } from '../../proto/gen/polychrome/events/v1/events';
import type { ConversationStatus } from '../api/v1alpha1/conversation-status';
import { conversation, UID } from '../controller/snapshot-fixtures';
import { foldJournal } from './journal-view';
import type { JournalView } from './journal-view-types';
import { planMessage } from './plan-message';
import { mayNeedResume, planResume, recoveryOf } from './plan-resume';

// The rule for interrupted turns: which one runs again, with what dispatch, and whether a
// conversation is worth reading at all. Real payloads, encoded and folded as the views are.

const OWNER = 'web:owner';
const LEASE = { holder: 'replica-b', fencingToken: 9 };
const NOW_MS = 5_000;
const TTL = 60_000;
const ARGS = '{"amount":5}';

type E = { kind: string; payload: Uint8Array };
function ev<K extends EventKind>(kind: K, payload: Partial<EventPayloads[K]>): E {
  const codec = payloadCodecs[kind];
  return { kind, payload: codec.encode(codec.fromPartial(payload)).finish() };
}
function view(events: E[]): JournalView {
  return foldJournal(events.map((e, position): JournalEntry => ({ position, ...e })));
}
const attribution = { caller: OWNER, participants: [OWNER], persona: 'p', session: 's1' };
const message = (turnId: string): E =>
  ev('message_received', { turnId, idempotencyKey: `k-${turnId}`, text: 'hi', attribution });
const dispatched = (turnId: string, attempt = 1, resumed = false): E =>
  ev('turn_dispatched', {
    turnId,
    attempt,
    leaseHolder: 'replica-a',
    fencingToken: 1,
    attribution,
    resumed,
  });
const complete = (turnId: string): E => ev('turn_complete', { turnId, text: 'done' });
const ambiguous = (turnId: string): E =>
  ev('turn_ambiguous', { turnId, toolCallId: 'c1', reason: 'lost', detectedAtMs: 4 });
const resolved = (turnId: string): E =>
  ev('turn_resolved', {
    turnId,
    decision: ResolveDecision.RESOLVE_DECISION_DID_NOT_RUN,
    toolCallId: 'c1',
    actor: 'web:admin',
  });
const approvalRequest = (turnId: string, requestedAtMs: number): E =>
  ev('approval_request', {
    turnId,
    requestId: requestIds.approvalRequestId(turnId, 'c1'),
    toolCallId: 'c1',
    toolName: 'refund',
    argsJson: ARGS,
    argsSha256: Buffer.from(approvalArgsSha256(ARGS)),
    requestedAtMs,
  });
const approvalResponse = (turnId: string): E =>
  ev('approval_response', {
    turnId,
    requestId: requestIds.approvalRequestId(turnId, 'c1'),
    toolName: 'refund',
    argsSha256: Buffer.from(approvalArgsSha256(ARGS)),
    decision: ApprovalDecision.APPROVAL_DECISION_APPROVED,
    answeredBy: 'web:admin',
  });

const resume = (events: E[], nowMs = NOW_MS) =>
  planResume({
    view: view(events),
    conversation: conversation({ owner: OWNER }),
    lease: LEASE,
    nowMs,
    approvalTtlMs: TTL,
    deploymentHistoryTokens: DEFAULT_HISTORY_TOKENS,
  });

describe('planResume: what the control plane runs again by itself', () => {
  it.each<[string, E[]]>([
    ['an empty journal', []],
    ['a complete turn', [message('t'), dispatched('t'), complete('t')]],
    ['a quarantined turn: never resumed', [message('t'), dispatched('t'), ambiguous('t')]],
    [
      'a turn paused on an approval not due yet',
      [message('t'), dispatched('t'), approvalRequest('t', 0)],
    ],
  ])('does nothing for %s', (_name, events) => {
    expect(resume(events)).toEqual({ kind: 'none' });
  });

  it('runs the oldest orphan again under its id: attempt + 1, its own message, its caller, resumed', () => {
    const events = [
      message('done'),
      dispatched('done'),
      complete('done'),
      message('old'),
      dispatched('old', 1),
      dispatched('old', 2, true),
      message('young'),
      dispatched('young'),
    ];
    const step = resume(events);
    expect(step.kind).toBe('recover');
    if (step.kind !== 'recover') return;
    expect(step.turn.turnId).toBe('old');
    expect(step.attempt).toBe(3);
    expect(step.events).toEqual([
      {
        kind: 'turn_dispatched',
        payload: {
          turnId: 'old',
          attempt: 3,
          leaseHolder: 'replica-b',
          fencingToken: 9,
          attribution,
          dispatchedAtMs: NOW_MS,
          messagePosition: 3,
          // Every earlier turn fits the default budget: the whole history.
          historyFrom: 0,
          resumed: true,
        },
      },
    ]);
  });

  it('runs an answered turn whose new attempt was interrupted (the answer and dispatch are durable)', () => {
    const events = [
      message('t'),
      dispatched('t'),
      approvalRequest('t', 0),
      approvalResponse('t'),
      dispatched('t', 2),
    ];
    const step = resume(events);
    expect(step.kind === 'recover' && step.attempt).toBe(3);
  });

  it('runs a quarantined turn an admin resolved, as the next claim would', () => {
    const step = resume([message('t'), dispatched('t'), ambiguous('t'), resolved('t')]);
    expect(step.kind === 'recover' && step.turn.turnId).toBe('t');
  });

  it('expires a due approval first, in the order a posted message keeps', () => {
    const events = [
      message('p'),
      dispatched('p'),
      approvalRequest('p', 0),
      message('o'),
      dispatched('o'),
    ];
    expect(resume(events, TTL - 1).kind).toBe('recover');
    const step = resume(events, TTL);
    expect(step.kind).toBe('expire');
    expect(step.kind === 'expire' && step.due.turn.turnId).toBe('p');
  });

  it('is the one rule a posted message recovers by', () => {
    const events = [message('old'), dispatched('old'), message('x'), dispatched('x')];
    const recovery = recoveryOf({
      view: view(events),
      conversation: conversation({ owner: OWNER }),
      lease: LEASE,
      nowMs: NOW_MS,
      deploymentHistoryTokens: DEFAULT_HISTORY_TOKENS,
    });
    const step = planMessage({
      view: view(events),
      conversation: conversation({ owner: OWNER }),
      caller: {
        identity: OWNER,
        identities: [OWNER],
        personaId: 'p',
        roles: ['member'],
        sessionId: 's',
      },
      request: { conversationId: UID, text: 'new', idempotencyKey: 'k-new' },
      turnId: 'new',
      lease: LEASE,
      nowMs: NOW_MS,
      approvalTtlMs: TTL,
      deploymentHistoryTokens: DEFAULT_HISTORY_TOKENS,
    });
    expect(step).toEqual({ kind: 'recover', ...recovery });
  });
});

describe('mayNeedResume: whether a conversation is worth reading', () => {
  const at = (status: ConversationStatus | undefined, head: number): boolean =>
    mayNeedResume(conversation({ owner: OWNER }, status), head);
  const journal = (head: number) => ({ head, lastSignedRoot: 'ab', keyId: 'k' });

  it.each<[string, ConversationStatus | undefined, number, boolean]>([
    ['a new conversation, no journal', undefined, 0, false],
    ['a journal with nothing since the last settled batch', { journal: journal(12) }, 12, false],
    [
      'a journal grown past the checkpoint (a dispatch nothing settled)',
      { journal: journal(12) },
      15,
      true,
    ],
    ['a journal with no checkpoint yet (the first turn was cut)', {}, 3, true],
    [
      'a turn running',
      { journal: journal(12), turns: { current: { turnId: 't', state: 'running' } } },
      12,
      true,
    ],
    [
      'a turn paused on an approval (its expiry)',
      {
        journal: journal(12),
        turns: { current: { turnId: 't', state: 'awaiting_approval', requestId: 'r' } },
      },
      12,
      true,
    ],
    ["an older writer's currentTurn", { journal: journal(12), currentTurn: 't' }, 12, true],
    ['an empty currentTurn', { journal: journal(12), currentTurn: '' }, 12, false],
  ])('%s: %s', (_name, status, head, expected) => {
    expect(at(status, head)).toBe(expected);
  });

  it('never for a conversation being deleted', () => {
    const running: ConversationStatus = {
      journal: journal(12),
      turns: { current: { turnId: 't', state: 'running' } },
    };
    const deleting = conversation({ owner: OWNER }, running, {
      deletionTimestamp: '2026-01-01T00:00:00Z',
    });
    expect(mayNeedResume(deleting, 15)).toBe(false);
  });
});
