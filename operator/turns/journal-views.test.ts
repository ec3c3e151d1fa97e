/**
 * JournalViews.append folds the typed events it encoded instead of decoding them again:
 * after every kind of batch the cached view must equal a fresh fold of the journal.
 */
import { afterEach, describe, expect, it } from '@jest/globals';
import { approvalArgsSha256 } from '../../common/approval-bytes';
import { EventKind } from '../../common/event-kinds';
import { ApprovalDecision } from '../../proto/gen/polychrome/events/v1/events';
import { StoreJournal } from '../../test/support/store-journal';
import { foldJournal } from './journal-view';
import { type JournalView } from './journal-view-types';
import { partitionOf } from '../../common/partition-name';
import { JournalViews } from './journal-views';
import type { PlannedEvent } from './plan-common';

let journal: StoreJournal | undefined;
afterEach(async () => {
  await journal?.close();
  journal = undefined;
});

const UID = '0b5c3a9e-4f0d-4d0a-9a52-6f1e2b7c8d90';
const ARGS = '{"expression":"6 * 7"}';
const attribution = { caller: 'web:owner', participants: ['web:owner'], persona: 'p' };
const lease = { fencingToken: 3 };

/** What a reader sees of a view: everything but its laziness. */
function shape(view: JournalView): unknown {
  return {
    head: view.head,
    lastSignedRoot: view.lastSignedRoot,
    turns: view.turns,
    turnIdsByKey: [...view.turnIdsByKey],
    turnsById: [...view.turnsById],
    anomalies: view.anomalies,
    memory: [...view.memory],
  };
}

const e = (kind: PlannedEvent['kind'], payload: object): PlannedEvent =>
  ({ kind, payload }) as PlannedEvent;

const BATCHES: readonly (readonly [string, readonly PlannedEvent[]])[] = [
  [
    'batch one',
    [
      e(EventKind.MessageReceived, {
        turnId: 't1',
        idempotencyKey: 'k1',
        text: 'hi é',
        attribution,
        receivedAtMs: 5,
      }),
      e(EventKind.IngressDirective, { turnId: 't1', maxSteps: 2, requiredApprover: 'web:admin' }),
      e(EventKind.ConversationReopened, { reopenedAtMs: 5, attribution }),
      e(EventKind.TurnDispatched, {
        turnId: 't1',
        attempt: 1,
        leaseHolder: 'a',
        fencingToken: 3,
        attribution,
        dispatchedAtMs: 5,
      }),
    ],
  ],
  ['a model step', [e(EventKind.ModelCall, { turnId: 't1', step: 1, model: 'm' })]],
  [
    'an approval request',
    [
      e(EventKind.ApprovalRequest, {
        turnId: 't1',
        requestId: 'apr_1',
        toolCallId: 'c1',
        toolName: 'calculator',
        argsJson: ARGS,
        argsSha256: Buffer.from(approvalArgsSha256(ARGS)),
        requiredApprover: 'web:admin',
        requestedAtMs: 9,
      }),
    ],
  ],
  [
    'an expiry',
    [
      e(EventKind.ApprovalExpired, {
        turnId: 't1',
        requestId: 'apr_1',
        requestedAtMs: 9,
        expiredAtMs: 20,
        ttlMs: 11,
      }),
      e(EventKind.ApprovalResponse, {
        turnId: 't1',
        requestId: 'apr_1',
        toolName: 'calculator',
        argsSha256: Buffer.from(approvalArgsSha256(ARGS)),
        decision: ApprovalDecision.APPROVAL_DECISION_DENIED,
        answeredBy: 'x',
        keyId: 'k',
        signature: Buffer.alloc(64, 1),
      }),
      e(EventKind.TurnDispatched, {
        turnId: 't1',
        attempt: 2,
        leaseHolder: 'a',
        fencingToken: 3,
        attribution,
      }),
    ],
  ],
  [
    'a tool call and result',
    [
      e(EventKind.ToolCall, {
        turnId: 't1',
        toolCallId: 'c1',
        toolName: 'calculator',
        argsJson: ARGS,
      }),
      e(EventKind.ToolResult, { turnId: 't1', toolCallId: 'c1', content: 'denied', denied: true }),
    ],
  ],
  [
    'batch two',
    [e(EventKind.TurnComplete, { turnId: 't1', text: 'done', steps: 2, completedAtMs: 30 })],
  ],
  [
    'a question and its cancel',
    [
      e(EventKind.MessageReceived, { turnId: 't2', idempotencyKey: 'k2', text: 'q', attribution }),
      e(EventKind.TurnDispatched, { turnId: 't2', attempt: 1, attribution }),
      e(EventKind.QuestionRequest, {
        turnId: 't2',
        requestId: 'q_1',
        toolCallId: 'c2',
        question: 'which?',
      }),
    ],
  ],
  [
    'a cancel',
    [
      e(EventKind.RequestCancelled, {
        turnId: 't2',
        requestId: 'q_1',
        cancelledBy: 'web:admin',
        cancelledAtMs: 40,
        comment: 'no',
      }),
      e(EventKind.TurnComplete, { turnId: 't2', text: 'cancelled' }),
    ],
  ],
  [
    'a question answered, a quarantine, a handoff and an anomaly',
    [
      e(EventKind.MessageReceived, { turnId: 't3', idempotencyKey: 'k3', text: 'q', attribution }),
      e(EventKind.TurnDispatched, { turnId: 't3', attempt: 1, attribution }),
      e(EventKind.QuestionResponse, {
        turnId: 't3',
        requestId: 'q_3',
        answer: 'a',
        answeredBy: 'web:owner',
      }),
      e(EventKind.TurnAmbiguous, { turnId: 't3', toolCallId: 'c3', reason: 'did it run?' }),
      e(EventKind.Handoff, { turnId: 't3', targetAgent: 'other' }),
      e(EventKind.ModelCall, { turnId: 'nobody', step: 1 }),
    ],
  ],
  [
    'memory kept, replaced and cleared',
    [
      e(EventKind.MemorySet, { key: 'city', value: 'Porto', turnId: 't1', toolCallId: 'm1' }),
      e(EventKind.MemorySet, { key: 'pet', value: 'cat', turnId: 't1', toolCallId: 'm2' }),
      e(EventKind.MemorySet, { key: 'city', value: 'Lisbon', turnId: 't1', toolCallId: 'm3' }),
      e(EventKind.MemoryCleared, { key: 'pet', attribution }),
      e(EventKind.MemorySet, { key: 'tea', value: 'green', turnId: 't1', toolCallId: 'm4' }),
    ],
  ],
  [
    'all memory cleared, then one key kept',
    [
      e(EventKind.MemoryCleared, { key: '', attribution }),
      e(EventKind.MemorySet, { key: 'city', value: 'Faro', turnId: 't1', toolCallId: 'm5' }),
    ],
  ],
];

describe('JournalViews.append', () => {
  it('keeps the cached view equal to a fresh fold of the journal after every kind of batch', async () => {
    const store = (journal = await StoreJournal.open());
    const views = new JournalViews({ state: store, isBusy: () => true });
    for (const [name, batch] of BATCHES) {
      const { view } = await views.append(UID, lease, batch);
      const fresh = foldJournal(await store.entries(partitionOf(UID)));
      expect({ name, view: shape(view) }).toEqual({ name, view: shape(fresh) });
      expect(views.cached(UID)).toBe(view);
    }
    // The fold really saw the new kinds (a view that dropped them would still equal itself).
    const view = views.cached(UID);
    expect(view?.turnsById.get('t1')?.expiries).toHaveLength(1);
    expect(view?.turnsById.get('t2')?.cancellations[0]?.response.cancelledBy).toBe('web:admin');
    expect(view?.anomalies.map((a) => a.problem)).toEqual(['after_terminal', 'unknown_turn']);
  });

  it('folds memory: a set replaces, a clear of a key or of all removes, positions are kept', async () => {
    const store = (journal = await StoreJournal.open());
    const views = new JournalViews({ state: store, isBusy: () => true });
    const memoryBatch = BATCHES.find(([name]) => name.startsWith('memory kept'))?.[1] ?? [];
    const { view } = await views.append(UID, lease, memoryBatch);
    // Positions: the five events at 0..4, then the batch's signed_root.
    expect([...view.memory.values()]).toEqual([
      {
        key: 'city',
        value: 'Lisbon',
        position: 2,
        turnId: 't1',
        toolCallId: 'm3',
        setAtMs: 0,
        setPositions: [0, 2],
      },
      {
        key: 'tea',
        value: 'green',
        position: 4,
        turnId: 't1',
        toolCallId: 'm4',
        setAtMs: 0,
        setPositions: [4],
      },
    ]);
    const cleared = await views.append(UID, lease, [
      e(EventKind.MemoryCleared, { key: '', attribution }),
    ]);
    expect(cleared.view.memory.size).toBe(0);
    // The earlier view is unchanged: a view's memory is never modified once it holds it.
    expect(view.memory.size).toBe(2);
  });
});
