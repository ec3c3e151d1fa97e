import { describe, expect, it } from '@jest/globals';
import type { Condition, ConversationStatus } from '../api/v1alpha1/conversation-status';
import { ConversationEvents } from './conversation-events';
import type { EventRegarding } from './event-recorder';
import type { LifecycleEvent } from './lifecycle-events';
import { NOTE_MAX_BYTES, lifecycleEvents, truncateNote } from './lifecycle-events';
import type { ActOutcome } from './report';
import { reportStatus } from './report';
import { ActionKind, planReconcile } from './plan';
import type { ConversationSnapshot } from './snapshot';
import {
  NOW,
  UID,
  agentSnapshot,
  boundClaim,
  claim,
  conversation,
  pod,
  podSnapshot,
  sandbox,
} from './snapshot-fixtures';

const MINUTE = 60_000;
const ago = (ms: number): string =>
  new Date(NOW.getTime() - ms).toISOString().replace(/\.\d{3}Z$/u, 'Z');

/** One real pass (plan, every action succeeds, report) and the Events it calls for. */
function pass(
  snapshot: ConversationSnapshot,
  outcome?: (completed: ActOutcome['completed']) => ActOutcome,
): { status: ConversationStatus; events: LifecycleEvent[] } {
  const plan = planReconcile(snapshot, NOW);
  const acted = outcome?.(plan.actions) ?? { completed: plan.actions };
  const status = reportStatus(snapshot, plan, acted, NOW);
  const events = lifecycleEvents({
    conversation: snapshot.conversation,
    previous: snapshot.conversation.status,
    next: status,
    completed: acted.completed,
  });
  return { status, events };
}

const brief = (events: readonly LifecycleEvent[]): string[] =>
  events.map((e) => `${e.type} ${e.reason} ${e.action}`);

const degraded = (reason: string, message: string): Condition => ({
  type: 'Degraded',
  status: 'True',
  reason,
  message,
  lastTransitionTime: ago(MINUTE),
});

describe('lifecycleEvents (with the real plan and report)', () => {
  const ready = agentSnapshot(conversation(), {
    claim: boundClaim(true),
    sandbox: sandbox(true),
    pod: pod(true, { name: 'sb-1' }),
  });

  it('a new claim is SandboxClaimed, naming the claim and the warm pool', () => {
    const { events } = pass(agentSnapshot(conversation()));
    expect(events).toEqual([
      {
        type: 'Normal',
        reason: 'SandboxClaimed',
        action: 'ClaimSandbox',
        note: 'created SandboxClaim c1 on warm pool polychrome-harness; waiting for agent-sandbox to bind a sandbox',
      },
    ]);
  });

  it('a created pod (pod backend) is SandboxClaimed too; a failed create is not', () => {
    expect(brief(pass(podSnapshot(conversation({ sandbox: { backend: 'pod' } }))).events)).toEqual([
      'Normal SandboxClaimed ClaimSandbox',
    ]);
    const failed = pass(podSnapshot(conversation({ sandbox: { backend: 'pod' } })), (actions) => ({
      completed: [],
      failed: { action: actions[0] ?? { kind: 'add-finalizer' }, message: '403: forbidden' },
    }));
    expect(failed.events).toEqual([]);
  });

  it('Ready becoming True is SandboxReady with the endpoint, once', () => {
    const pending = pass(agentSnapshot(conversation())).status;
    const first = pass({ ...ready, conversation: conversation({}, pending) });
    expect(first.events).toEqual([
      {
        type: 'Normal',
        reason: 'SandboxReady',
        action: 'ObserveSandbox',
        note: 'harness pod sb-1 is ready at 10.1.2.3:7070; the conversation takes turns',
      },
    ]);
    // The next pass over the same state changes nothing and emits nothing.
    expect(pass({ ...ready, conversation: conversation({}, first.status) }).events).toEqual([]);
  });

  it('closing when idle is ClosedIdle with the Closed message; a closed pass again is silent', () => {
    const spec = { idleTimeout: '30m' };
    const open = pass({ ...ready, conversation: conversation(spec) }).status;
    const idle = { ...open, lastTurnTime: ago(31 * MINUTE) };
    const closing = pass({ ...ready, conversation: conversation(spec, idle) });
    expect(brief(closing.events)).toEqual(['Normal ClosedIdle Close']);
    expect(closing.events[0]?.note).toBe(
      `closed at ${closing.status.closedTime ?? ''} after 30m without a turn; the next turn reopens it; the object is deleted 24h after closing`,
    );
    expect(pass(agentSnapshot(conversation(spec, closing.status))).events).toEqual([]);
  });

  it('a turn after closing is Reopened, then the new claim is SandboxClaimed', () => {
    const closed: ConversationStatus = {
      phase: 'Closed',
      closedTime: ago(10 * MINUTE),
      lastTurnTime: ago(MINUTE),
    };
    const { events } = pass(agentSnapshot(conversation({ idleTimeout: '5m' }, closed)));
    expect(brief(events)).toEqual(['Normal Reopened Reopen', 'Normal SandboxClaimed ClaimSandbox']);
    expect(events[0]?.note).toBe(
      `reopened: a turn arrived at ${ago(MINUTE)} after it closed at ${ago(10 * MINUTE)}; a new sandbox is claimed and the journal is replayed into it`,
    );
  });

  it('retention passing is DeletedByRetention with the rule that fired', () => {
    const closed: ConversationStatus = { phase: 'Closed', closedTime: ago(25 * 60 * MINUTE) };
    const { events } = pass(agentSnapshot(conversation({}, closed)));
    expect(events).toEqual([
      {
        type: 'Normal',
        reason: 'DeletedByRetention',
        action: 'Delete',
        note: `deleting Conversation c1: retention 24h after closing at ${ago(25 * 60 * MINUTE)} has passed; set spec.retention (or never) to keep closed conversations longer`,
      },
    ]);
  });

  it('each Degraded reason as it appears is a Warning of that reason with the condition message', () => {
    const noPool = agentSnapshot(conversation({ sandbox: { warmPool: 'absent' } }), {
      warmPool: undefined,
      templateFound: undefined,
      claim: claim({ warmPoolName: 'absent' }),
    });
    const first = pass(noPool);
    expect(first.events).toEqual([
      {
        type: 'Warning',
        reason: 'WarmPoolMissing',
        action: 'Reconcile',
        note: 'SandboxWarmPool absent not found in namespace team: label the namespace so the operator installs it (kubectl label namespace team polychrome.dev/enabled=true), or set spec.sandbox.warmPool',
      },
    ]);
    // Still missing: no second Warning.
    expect(
      pass({ ...noPool, conversation: conversation(noPool.conversation.spec, first.status) })
        .events,
    ).toEqual([]);
    // Another reason replaces it: a Warning of the new reason.
    const noTemplate = agentSnapshot(conversation(noPool.conversation.spec, first.status), {
      warmPool: { templateName: 'gone' },
      templateFound: false,
      claim: claim({ warmPoolName: 'absent' }),
    });
    expect(brief(pass(noTemplate).events)).toEqual(['Warning SandboxTemplateMissing Reconcile']);
  });

  it('a malformed retention is a RetentionInvalid Warning', () => {
    const { events } = pass({ ...ready, conversation: conversation({ retention: 'soon' }) });
    expect(brief(events)).toContain('Warning RetentionInvalid Reconcile');
  });
});

describe('lifecycleEvents (transitions the turn code writes)', () => {
  const c = conversation();
  const quarantine = degraded(
    'TurnAmbiguous',
    'turn t1 is quarantined: the outcome of side-effecting tool call tc1 is unknown (harness lost); an admin must check it and repair the conversation',
  );

  it('Degraded TurnAmbiguous appearing is TurnQuarantined (Warning) with its message', () => {
    const events = lifecycleEvents({
      conversation: c,
      previous: { phase: 'Ready' },
      next: { phase: 'Degraded', conditions: [quarantine] },
      completed: [],
    });
    expect(events).toEqual([
      {
        type: 'Warning',
        reason: 'TurnQuarantined',
        action: 'QuarantineTurn',
        note: quarantine.message,
      },
    ]);
  });

  it('TurnAmbiguous clearing is QuarantineResolved; another Degraded reason left is named', () => {
    const healthy: Condition = { ...quarantine, status: 'False', reason: 'Healthy', message: 'ok' };
    expect(
      brief(
        lifecycleEvents({
          conversation: c,
          previous: { conditions: [quarantine] },
          next: { conditions: [healthy] },
          completed: [],
        }),
      ),
    ).toEqual(['Normal QuarantineResolved ResolveQuarantine']);
    const stillDegraded = lifecycleEvents({
      conversation: c,
      previous: { conditions: [quarantine] },
      next: { conditions: [degraded('RetentionInvalid', 'bad retention')] },
      completed: [],
    });
    expect(brief(stillDegraded)).toEqual([
      'Normal QuarantineResolved ResolveQuarantine',
      'Warning RetentionInvalid Reconcile',
    ]);
    expect(stillDegraded[0]?.note).toMatch(/, once Degraded RetentionInvalid is fixed$/u);
  });

  it('a failed finalizer removal (journal retention refused) is a FinalizeFailed Warning with its message', () => {
    const deleting = conversation({}, undefined, { deletionTimestamp: ago(0) });
    const message =
      'journal retention (spec.journalRetention delete) of Conversation ns/c failed: unavailable; ' +
      'set spec.journalRetention to keep';
    const events = lifecycleEvents({
      conversation: deleting,
      previous: {},
      next: {},
      completed: [],
      failed: { action: { kind: ActionKind.RemoveFinalizer }, message },
    });
    expect(brief(events)).toEqual(['Warning FinalizeFailed Delete']);
    expect(events[0]?.note).toBe(
      `the Conversation keeps its finalizer, retried with backoff: ${message}`,
    );
    // Another failed action is no such Event.
    expect(
      lifecycleEvents({
        conversation: deleting,
        previous: {},
        next: {},
        completed: [],
        failed: { action: { kind: ActionKind.AddFinalizer }, message },
      }),
    ).toEqual([]);
  });

  it('a cleared closedTime on an object being deleted is not a reopen', () => {
    const deleting = conversation({}, undefined, { deletionTimestamp: ago(0) });
    expect(
      lifecycleEvents({
        conversation: deleting,
        previous: { closedTime: ago(MINUTE) },
        next: {},
        completed: [],
      }),
    ).toEqual([]);
  });

  it('the same status before and after emits nothing (a restart compares against what the object has)', () => {
    const status: ConversationStatus = {
      phase: 'Degraded',
      closedTime: ago(MINUTE),
      conditions: [
        quarantine,
        { ...quarantine, type: 'Ready', status: 'True', reason: 'SandboxReady' },
      ],
    };
    expect(
      lifecycleEvents({ conversation: c, previous: status, next: status, completed: [] }),
    ).toEqual([]);
  });
});

describe('truncateNote', () => {
  it('keeps a note of at most 1 KiB, and cuts a longer one on a character boundary with an ellipsis', () => {
    expect(truncateNote('short')).toBe('short');
    const long = 'é'.repeat(NOTE_MAX_BYTES);
    const cut = truncateNote(long);
    expect(Buffer.byteLength(cut, 'utf8')).toBeLessThanOrEqual(NOTE_MAX_BYTES);
    expect(cut.endsWith('é…')).toBe(true);
    const events = lifecycleEvents({
      conversation: conversation(),
      previous: {},
      next: { conditions: [degraded('SandboxFailed', 'x'.repeat(5_000))] },
      completed: [],
    });
    expect(Buffer.byteLength(events[0]?.note ?? '', 'utf8')).toBeLessThanOrEqual(NOTE_MAX_BYTES);
  });
});

describe('ConversationEvents', () => {
  const recorded: { regarding: EventRegarding; event: LifecycleEvent }[] = [];
  const sink = {
    record: (regarding: EventRegarding, event: LifecycleEvent) =>
      void recorded.push({ regarding, event }),
  };
  const quarantined: ConversationStatus = {
    conditions: [degraded('TurnAmbiguous', 'turn t1 is quarantined')],
  };
  const reasons = (): string[] => recorded.map((r) => r.event.reason);

  it('at first sight compares with the stored status: nothing old is emitted again', () => {
    recorded.length = 0;
    const events = new ConversationEvents(sink);
    events.afterPass({ conversation: conversation({}, quarantined), completed: [] });
    expect(recorded).toEqual([]);
  });

  it('between passes, a change the turn code wrote is emitted once, about the Conversation', () => {
    recorded.length = 0;
    const events = new ConversationEvents(sink);
    events.afterPass({ conversation: conversation({}, { phase: 'Ready' }), completed: [] });
    events.afterPass({ conversation: conversation({}, quarantined), completed: [] });
    events.afterPass({ conversation: conversation({}, quarantined), completed: [] });
    expect(reasons()).toEqual(['TurnQuarantined']);
    expect(recorded[0]?.regarding).toEqual({
      apiVersion: 'polychrome.dev/v1alpha1',
      kind: 'Conversation',
      namespace: 'team',
      name: 'c1',
      uid: UID,
    });
  });

  it('what a pass wrote is the baseline of the next; a failed write leaves the stored one', () => {
    recorded.length = 0;
    const events = new ConversationEvents(sink);
    const stored = conversation({}, { phase: 'Ready' });
    // The write failed: nothing written, so the transition is still to come.
    events.afterPass({ conversation: stored, completed: [] });
    events.afterPass({ conversation: stored, completed: [], written: quarantined });
    events.afterPass({ conversation: conversation({}, quarantined), completed: [] });
    expect(reasons()).toEqual(['TurnQuarantined']);
  });

  it('a new object of the same name, or one another replica handled, starts from its stored status', () => {
    recorded.length = 0;
    const events = new ConversationEvents(sink);
    events.afterPass({ conversation: conversation({}, { phase: 'Ready' }), completed: [] });
    events.afterPass({
      conversation: conversation({}, quarantined, { uid: 'another-uid' }),
      completed: [],
    });
    events.afterPass({ conversation: conversation({}, { phase: 'Ready' }), completed: [] });
    events.forget('team', 'c1');
    events.afterPass({ conversation: conversation({}, quarantined), completed: [] });
    expect(recorded).toEqual([]);
  });

  it('remembers a bounded number of conversations, forgetting the least recent', () => {
    recorded.length = 0;
    const events = new ConversationEvents(sink, 2);
    for (const name of ['a', 'b', 'c']) {
      events.afterPass({
        conversation: conversation({}, { phase: 'Ready' }, { name }),
        completed: [],
      });
    }
    // `c` is remembered; `a` was forgotten, so its quarantine is a first sight (no Event).
    for (const name of ['c', 'a']) {
      events.afterPass({ conversation: conversation({}, quarantined, { name }), completed: [] });
    }
    expect(recorded.map((r) => r.regarding.name)).toEqual(['c']);
  });
});
