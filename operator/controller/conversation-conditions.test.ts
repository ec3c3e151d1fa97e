import { describe, expect, it } from '@jest/globals';
import type { ConditionReason } from '../api/v1alpha1/conditions';
import type { ConversationSpec } from '../api/v1alpha1/conversation-spec';
import type { ConversationStatus } from '../api/v1alpha1/conversation-status';
import type { SandboxVerdict } from './conversation-conditions';
import { conversationConditions, storedVerdict } from './conversation-conditions';
import { conversation } from './snapshot-fixtures';

const NOW = '2026-11-30T12:00:00.000Z';

function open(status: 'True' | 'False', reason: ConditionReason): SandboxVerdict {
  return { lifecycle: 'open', ready: { type: 'Ready', status, reason, message: `m ${reason}` } };
}
const READY = open('True', 'SandboxReady');
const PENDING = open('False', 'SandboxPending');
const CLOSED: SandboxVerdict = {
  lifecycle: 'closed',
  ready: { type: 'Ready', status: 'False', reason: 'Closed', message: 'closed at ...' },
};
const DELETING: SandboxVerdict = {
  lifecycle: 'deleting',
  ready: { type: 'Ready', status: 'False', reason: 'Terminating', message: 'being deleted' },
};
const UNOBSERVED = storedVerdict(undefined);

const running: ConversationStatus = {
  currentTurn: 't1',
  turns: { current: { turnId: 't1', state: 'running' } },
};
const approval: ConversationStatus = {
  currentTurn: 't1',
  turns: { current: { turnId: 't1', state: 'awaiting_approval', requestId: 'apr_1' } },
};
const question: ConversationStatus = {
  currentTurn: 't1',
  turns: { current: { turnId: 't1', state: 'awaiting_answer', requestId: 'q_1' } },
};
const quarantine = {
  turnId: 't0',
  toolCallId: 'toolu_1',
  reason: 'crashed',
  since: '2026-11-30T11:00:00Z',
};
const quarantined: ConversationStatus = { turns: { quarantined: quarantine } };

function summary(out: Pick<ConversationStatus, 'phase' | 'conditions'>): string {
  const of = (type: string): string => {
    const c = out.conditions?.find((x) => x.type === type);
    return c === undefined ? '-' : `${c.status} ${c.reason}`;
  };
  return [out.phase ?? '', of('Ready'), of('Progressing'), of('Degraded')].join(' | ');
}

// One row per line of docs/operator.md, "Status": situation, verdict, the turn code's facts,
// the spec, and `phase | Ready | Progressing | Degraded`.
const rows: readonly [
  string,
  SandboxVerdict,
  ConversationStatus,
  Partial<ConversationSpec>,
  string,
][] = [
  [
    'not observed yet',
    UNOBSERVED,
    {},
    {},
    'Pending | Unknown Reconciling | True Reconciling | False Healthy',
  ],
  [
    'claim/pod being made or starting',
    PENDING,
    {},
    {},
    'Pending | False SandboxPending | True SandboxPending | False Healthy',
  ],
  ['harness pod ready', READY, {}, {}, 'Ready | True SandboxReady | False Idle | False Healthy'],
  [
    'warm pool missing',
    open('False', 'WarmPoolMissing'),
    {},
    {},
    'Degraded | False WarmPoolMissing | False WarmPoolMissing | True WarmPoolMissing',
  ],
  [
    'template missing',
    open('False', 'SandboxTemplateMissing'),
    {},
    {},
    'Degraded | False SandboxTemplateMissing | False SandboxTemplateMissing | True SandboxTemplateMissing',
  ],
  [
    'sandbox failed',
    open('False', 'SandboxFailed'),
    {},
    {},
    'Degraded | False SandboxFailed | False SandboxFailed | True SandboxFailed',
  ],
  [
    'RuntimeClass missing',
    open('False', 'RuntimeClassMissing'),
    {},
    {},
    'Degraded | False RuntimeClassMissing | False RuntimeClassMissing | True RuntimeClassMissing',
  ],
  ['closed', CLOSED, {}, {}, 'Closed | False Closed | False Closed | False Healthy'],
  [
    'being deleted',
    DELETING,
    {},
    {},
    'Terminating | False Terminating | True Terminating | False Healthy',
  ],
  [
    'a turn running',
    READY,
    running,
    {},
    'Running | True SandboxReady | True TurnRunning | False Healthy',
  ],
  [
    'a turn waiting for an approval',
    READY,
    approval,
    {},
    'AwaitingApproval | True SandboxReady | True AwaitingApproval | False Healthy',
  ],
  [
    'a turn waiting for an answer',
    READY,
    question,
    {},
    'AwaitingAnswer | True SandboxReady | True AwaitingAnswer | False Healthy',
  ],
  [
    'a turn on a closed conversation (it reopens)',
    CLOSED,
    running,
    {},
    'Running | False Closed | True TurnRunning | False Healthy',
  ],
  [
    'a turn while the sandbox starts',
    PENDING,
    running,
    {},
    'Running | False SandboxPending | True TurnRunning | False Healthy',
  ],
  [
    'a turn while being deleted',
    DELETING,
    running,
    {},
    'Terminating | False Terminating | True Terminating | False Healthy',
  ],
  [
    'a quarantined turn',
    READY,
    quarantined,
    {},
    'Degraded | True SandboxReady | False Idle | True TurnAmbiguous',
  ],
  [
    'a quarantined turn, then a turn running',
    READY,
    { ...running, turns: { ...running.turns, quarantined: quarantine } },
    {},
    'Degraded | True SandboxReady | True TurnRunning | True TurnAmbiguous',
  ],
  [
    'spec.retention cannot be used',
    READY,
    {},
    { retention: '9999999999h' },
    'Degraded | True SandboxReady | False Idle | True RetentionInvalid',
  ],
  [
    'spec.idleTimeout cannot be used',
    READY,
    {},
    { idleTimeout: '9999999999h' },
    'Degraded | True SandboxReady | False Idle | True IdleTimeoutInvalid',
  ],
  [
    'an older operator wrote only currentTurn',
    READY,
    { currentTurn: 't1' },
    {},
    'Running | True SandboxReady | True TurnRunning | False Healthy',
  ],
];

describe('conversationConditions', () => {
  it.each(rows)('%s', (_situation, verdict, facts, spec, expected) => {
    const out = conversationConditions(conversation(spec, facts), verdict, NOW);
    expect(summary(out)).toBe(expected);
  });

  it('puts every Degraded cause in the message, the most urgent reason first', () => {
    const out = conversationConditions(
      conversation({ retention: '9999999999h' }, quarantined),
      open('False', 'WarmPoolMissing'),
      NOW,
    );
    const degraded = out.conditions?.find((c) => c.type === 'Degraded');
    expect(degraded?.reason).toBe('TurnAmbiguous');
    expect(degraded?.message).toMatch(
      /^turn t0 is quarantined: the outcome of side-effecting tool call toolu_1 is unknown \(crashed\); an admin must check whether it ran and resolve it: polychrome conversation resolve ID t0 --ran \[--result FILE\] \| --did-not-run --actor A; m WarmPoolMissing; spec\.retention "9999999999h" cannot be used /u,
    );
  });

  it('names the request a paused turn waits for and how to answer it', () => {
    const out = conversationConditions(conversation({}, approval), READY, NOW);
    expect(out.conditions?.find((c) => c.type === 'Progressing')?.message).toBe(
      'turn t1 waits for approval apr_1: answer it with POST .../approvals/apr_1',
    );
  });

  it('stamps the generation, keeps a transition time while the status holds, and keeps other types', () => {
    const first = conversationConditions(
      conversation({}, running, { generation: 3 }),
      READY,
      '2026-11-30T11:00:00.000Z',
    );
    const extra = {
      type: 'example.com/Audited',
      status: 'True' as const,
      lastTransitionTime: NOW,
      reason: 'Checked',
      message: 'x',
    };
    const status = { ...approval, conditions: [...(first.conditions ?? []), extra] };
    const next = conversationConditions(conversation({}, status, { generation: 4 }), READY, NOW);
    const progressing = next.conditions?.find((c) => c.type === 'Progressing');
    expect(progressing).toMatchObject({
      reason: 'AwaitingApproval',
      observedGeneration: 4,
      lastTransitionTime: '2026-11-30T11:00:00.000Z',
    });
    expect(next.conditions?.at(-1)).toEqual(extra);
  });

  it('reads the verdict back from the Ready condition the reconciler stored', () => {
    const stored = conversationConditions(conversation(), CLOSED, NOW);
    expect(storedVerdict(stored)).toEqual({ lifecycle: 'closed', ready: CLOSED.ready });
    expect(storedVerdict(conversationConditions(conversation(), DELETING, NOW)).lifecycle).toBe(
      'deleting',
    );
    expect(storedVerdict(conversationConditions(conversation(), READY, NOW))).toEqual(READY);
  });
});
