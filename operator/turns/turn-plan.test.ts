import { describe, expect, it } from '@jest/globals';
import { approvalArgsSha256 } from '../../common/approval-bytes';
import type { AppError } from '../../common/errors';
import { payloadCodecs, type EventKind, type EventPayloads } from '../../common/event-kinds';
import { requestIds } from '../../common/request-ids';
import type { JournalEntry } from '../../common/state-journal';
import {
  ApprovalDecision,
  ResolveDecision,
  ToolEffect,
  type ApprovalRequest,
} from '../../proto/gen/polychrome/events/v1/events';
import type { Step } from '../../proto/gen/polychrome/harness/v1/harness';
import { ConversationPhase } from '../api/v1alpha1/conditions';
import { DEFAULT_HISTORY_TOKENS, Visibility } from '../api/v1alpha1/conversation-values';
import { type Conversation } from '../api/v1alpha1/conversation-types';
import { conversation as conversationFixture, UID } from '../controller/snapshot-fixtures';
import { foldJournal } from './journal-view';
import { oldestOrphan, turnState } from './turn-state';
import { recordedSteps } from './turn-projections';
import { type JournalView, type TurnView } from './journal-view-types';
import {
  approvalAnswerBatch,
  planApprovalAnswer,
  planCancel,
  planQuestionAnswer,
} from './plan-answers';
import { authorizeApproval, authorizeUse } from './plan-access';
import { checkStep, turnStartOf } from './plan-harness-checks';
import { FAILED_TURN_TEXT, type PlannedEvent } from './plan-common';
import { EXPIRY_ANSWERER, expiryBatch } from './plan-expiry';
import { planMessage, type MessageInput } from './plan-message';
import { planAcceptRollback } from './plan-accept-rollback';
import { planResolve, UNKNOWN_RESULT_TEXT, type ResolveInput } from './plan-resolve';
import { planSettle, type HarnessEnd } from './plan-settle';
import type { Caller, ResolveTurn } from './turn-service';

// ---- fixtures: real payloads, encoded and folded as the coordinator's views are ----

const OWNER = 'web:owner';
const ADMIN = 'web:admin';
const ARGS = '{"amount":5}';
const LEASE = { holder: 'replica-b', fencingToken: 7 };
const NOW_MS = 5_000;
/** Approval time to live in these tables: approvals requested at 0 expire at 60 s. */
const TTL = 60_000;
const SCOPE = { conversation: UID, expiresAtMs: NOW_MS + TTL, approvalId: 'apv_1' };

function caller(identity: string, roles: string[], more: string[] = []): Caller {
  return {
    identity,
    identities: [identity, ...more],
    personaId: `p-${identity}`,
    roles,
    sessionId: 's',
  };
}
const owner = caller(OWNER, ['member']);
const admin = caller(ADMIN, ['admin']);
const edge = caller('bot:edge', ['edge']);
const stranger = caller('web:stranger', ['member']);

function conv(
  over: Partial<Conversation['spec']> = {},
  phase?: NonNullable<Conversation['status']>['phase'],
): Conversation {
  return conversationFixture(
    { owner: OWNER, tools: { builtin: ['refund'], requireApproval: ['refund'] }, ...over },
    phase === undefined ? undefined : { phase },
  );
}

type E = { kind: string; payload: Uint8Array };
function ev<K extends EventKind>(kind: K, payload: Partial<EventPayloads[K]>): E {
  const codec = payloadCodecs[kind];
  return { kind, payload: codec.encode(codec.fromPartial(payload)).finish() };
}
function view(events: E[]): JournalView {
  return foldJournal(events.map((e, position): JournalEntry => ({ position, ...e })));
}
const attribution = { caller: OWNER, participants: [OWNER], persona: 'p', session: '' };
const message = (turnId: string, text = 'hi', key = `k-${turnId}`): E =>
  ev('message_received', { turnId, idempotencyKey: key, text, attribution, receivedAtMs: 1 });
const dispatched = (turnId: string, attempt = 1): E =>
  ev('turn_dispatched', { turnId, attempt, leaseHolder: 'a', fencingToken: 1, attribution });
const complete = (turnId: string): E => ev('turn_complete', { turnId, text: 'done' });
const approvalRequest = (turnId: string, toolCallId: string, requiredApprover = ''): E =>
  ev('approval_request', requestOf(turnId, toolCallId, requiredApprover));
function requestOf(turnId: string, toolCallId: string, requiredApprover = ''): ApprovalRequest {
  return {
    turnId,
    requestId: requestIds.approvalRequestId(turnId, toolCallId),
    toolCallId,
    toolName: 'refund',
    argsJson: ARGS,
    argsSha256: Buffer.from(approvalArgsSha256(ARGS)),
    reason: 'moves money',
    requiredApprover,
    requestedAtMs: 0,
  };
}
const approvalResponse = (turnId: string, toolCallId: string, decision: ApprovalDecision): E =>
  ev('approval_response', {
    turnId,
    requestId: requestIds.approvalRequestId(turnId, toolCallId),
    toolName: 'refund',
    argsSha256: Buffer.from(approvalArgsSha256(ARGS)),
    decision,
    answeredBy: ADMIN,
  });

function messageInput(over: Partial<MessageInput> & { events?: E[] } = {}): MessageInput {
  const { events = [], ...rest } = over;
  return {
    view: view(events),
    conversation: conv(),
    caller: owner,
    request: { conversationId: UID, text: 'hi', idempotencyKey: 'k-new' },
    turnId: 'new',
    lease: LEASE,
    nowMs: NOW_MS,
    approvalTtlMs: TTL,
    deploymentHistoryTokens: DEFAULT_HISTORY_TOKENS,
    ...rest,
  };
}

function refusal(result: { kind: string; error?: AppError }): { code: string; message: string } {
  expect(result.kind).toBe('refuse');
  const error = result.error;
  if (error === undefined) throw new Error('no error');
  return { code: error.code, message: error.message };
}

const kinds = (events: readonly PlannedEvent[]): string[] => events.map((e) => e.kind);
const turnOf = (v: JournalView, id: string): TurnView => {
  const turn = v.turnsById.get(id);
  if (turn === undefined) throw new Error(`no turn ${id}`);
  return turn;
};

// ---- who may use a conversation ----

/** A caller of the Kubernetes door: RBAC allowed `verb` on `subresource` of `conversationId`. */
function kubeCaller(conversationId: string, subresource = 'messages', verb = 'create'): Caller {
  return {
    identity: 'kubernetes:alice',
    identities: ['kubernetes:alice'],
    personaId: '',
    roles: [],
    sessionId: '',
    kubernetes: { conversationId, subresource, verb, groups: [] },
  };
}

describe('authorizeUse', () => {
  const shared = conv({ visibility: Visibility.Shared, participants: ['web:friend'] });
  it.each([
    ['the owner', owner, conv(), undefined],
    ['an admin', admin, conv(), undefined],
    ['a participant of a shared one', caller('web:friend', ['member']), shared, undefined],
    [
      'a participant of a private one',
      caller('web:friend', ['member']),
      conv({ participants: ['web:friend'] }),
      'permission_denied',
    ],
    ['a stranger', stranger, conv(), 'permission_denied'],
    ['an edge that is not a participant', edge, conv(), 'permission_denied'],
    ['a Kubernetes caller RBAC allowed on it', kubeCaller(UID), conv(), undefined],
    [
      'a Kubernetes caller RBAC allowed on another one',
      kubeCaller('0b6f1c2d-3e4f-4a5b-8c7d-9e0f1a2b3c4d'),
      conv(),
      'permission_denied',
    ],
  ])('%s', (_name, who, c, code) => {
    expect(authorizeUse(who, UID, c)?.error.code).toBe(code);
  });

  it('an unknown conversation is not_found, whoever asks', () => {
    expect(authorizeUse(admin, UID, undefined)?.error.code).toBe('not_found');
  });
});

// ---- a new message ----

describe('planMessage', () => {
  it('opens a new turn with batch one at the head, under the claimed lease', () => {
    const step = planMessage(
      messageInput({ events: [message('t0'), dispatched('t0'), complete('t0')] }),
    );
    expect(step.kind).toBe('dispatch');
    if (step.kind !== 'dispatch') return;
    expect(kinds(step.events)).toEqual(['message_received', 'turn_dispatched']);
    expect(step.events[1]).toEqual({
      kind: 'turn_dispatched',
      payload: {
        turnId: 'new',
        attempt: 1,
        leaseHolder: 'replica-b',
        fencingToken: 7,
        // The session the caller's token names: the journal says which token acted.
        attribution: { caller: OWNER, participants: [OWNER], persona: `p-${OWNER}`, session: 's' },
        dispatchedAtMs: NOW_MS,
        messagePosition: 3,
        // The whole history fits the budget: no window is recorded.
        historyFrom: 0,
      },
    });
  });

  it('records the history window in batch one: the agent budget over the deployment one', () => {
    // Each earlier turn costs 1 + 4 (the question) and 600 / 4 + 4 (the reply) tokens: 159.
    const long = (turnId: string): E[] => [
      message(turnId, 'hi!?'),
      dispatched(turnId),
      ev('turn_complete', { turnId, text: 'x'.repeat(600) }),
    ];
    const events = [...long('a'), ...long('b'), ...long('c')];
    const historyFrom = (input: MessageInput): number | undefined => {
      const step = planMessage(input);
      if (step.kind !== 'dispatch') throw new Error(`expected dispatch, got ${step.kind}`);
      const dispatch = step.events.find((e) => e.kind === 'turn_dispatched');
      return dispatch?.kind === 'turn_dispatched' ? dispatch.payload.historyFrom : undefined;
    };
    expect(historyFrom(messageInput({ events }))).toBe(0);
    expect(historyFrom(messageInput({ events, deploymentHistoryTokens: 400 }))).toBe(3);
    const agent = { ...conv().spec.agent, historyTokens: 300 };
    const own = conv({ agent });
    expect(historyFrom(messageInput({ events, conversation: own }))).toBe(6);
    expect(
      historyFrom(messageInput({ events, deploymentHistoryTokens: 400, conversation: own })),
    ).toBe(6);
  });

  it('records the reopening of a Closed conversation in batch one', () => {
    const step = planMessage(messageInput({ conversation: conv({}, ConversationPhase.Closed) }));
    expect(step.kind === 'dispatch' && kinds(step.events)).toEqual([
      'message_received',
      'conversation_reopened',
      'turn_dispatched',
    ]);
  });

  it('an exact retry gets the same turn; another text under the key is a conflict', () => {
    const events = [message('new', 'hi'), dispatched('new'), complete('new')];
    const again = planMessage(messageInput({ events }));
    expect(again.kind === 'reply' && again.turn.turnId).toBe('new');
    const other = planMessage(
      messageInput({
        events,
        request: { conversationId: UID, text: 'other', idempotencyKey: 'k-new' },
      }),
    );
    expect(refusal(other).code).toBe('conflict');
    expect(refusal(other).message).toContain('was used for another message');
  });

  it('recovers the oldest orphan first, under its id, with the next attempt and its own message', () => {
    const events = [
      message('old'),
      dispatched('old', 1),
      message('older-not'),
      dispatched('older-not', 2),
    ];
    const step = planMessage(messageInput({ events }));
    expect(step.kind).toBe('recover');
    if (step.kind !== 'recover') return;
    expect(step.turn.turnId).toBe('old');
    expect(step.events).toEqual([
      {
        kind: 'turn_dispatched',
        payload: expect.objectContaining({
          turnId: 'old',
          attempt: 2,
          fencingToken: 7,
          messagePosition: 0,
          resumed: true,
        }),
      },
    ]);
  });

  it('a retry of an orphaned turn recovers it before answering', () => {
    const step = planMessage(messageInput({ events: [message('new'), dispatched('new')] }));
    expect(step.kind === 'recover' && step.turn.turnId).toBe('new');
  });

  it('a paused turn blocks a new message with a 409 that names it', () => {
    const events = [message('p'), dispatched('p'), approvalRequest('p', 'c1')];
    const { code, message: text } = refusal(planMessage(messageInput({ events })));
    expect(code).toBe('conflict');
    expect(text).toBe('turn p waits for an approval; answer it before sending a new message');
  });
});

describe('directives only narrow policy, and only edges send them', () => {
  const withDirective = (who: Caller, directive: object, approverIsAdmin?: boolean): MessageInput =>
    messageInput({
      caller: who,
      conversation: conv({ visibility: Visibility.Shared, participants: [edge.identity] }),
      request: { conversationId: UID, text: 'hi', idempotencyKey: 'k-new', directive },
      ...(approverIsAdmin === undefined ? {} : { approverIsAdmin }),
    });

  it('a member owner who names themselves approver gets 403', () => {
    const { code, message: text } = refusal(
      planMessage(withDirective(owner, { requiredApprover: OWNER }, false)),
    );
    expect(code).toBe('permission_denied');
    expect(text).toBe(
      `${OWNER} may not send a directive: only a caller with the edge role may; send the message without "directive"`,
    );
  });

  it('a member may not even lower the step budget', () => {
    expect(refusal(planMessage(withDirective(owner, { maxSteps: 2 }))).code).toBe(
      'permission_denied',
    );
  });

  it('even an admin without the edge role may not send one', () => {
    expect(refusal(planMessage(withDirective(admin, { maxSteps: 2 }))).code).toBe(
      'permission_denied',
    );
  });

  it('an edge may not name an approver who is not an admin (itself, or nobody real)', () => {
    const { code, message: text } = refusal(
      planMessage(withDirective(edge, { requiredApprover: edge.identity }, false)),
    );
    expect(code).toBe('permission_denied');
    expect(text).toContain('directive.requiredApprover bot:edge is not an admin');
  });

  it('an edge that names an admin, and lowers the budget, gets both recorded', () => {
    const step = planMessage(withDirective(edge, { requiredApprover: ADMIN, maxSteps: 3 }, true));
    expect(step.kind).toBe('dispatch');
    if (step.kind !== 'dispatch') return;
    expect(step.events[1]).toEqual({
      kind: 'ingress_directive',
      payload: { turnId: 'new', maxSteps: 3, requiredApprover: ADMIN },
    });
  });

  it('a refused directive is refused before an exact retry would be answered', () => {
    const input = withDirective(owner, { maxSteps: 1 });
    const step = planMessage({
      ...input,
      view: view([message('new'), dispatched('new'), complete('new')]),
    });
    expect(refusal(step).code).toBe('permission_denied');
  });
});

// ---- answers ----

describe('who may answer an approval', () => {
  const paused = (approver = '') =>
    view([message('t'), dispatched('t'), approvalRequest('t', 'c1', approver)]);
  const request = (approver = '') => requestOf('t', 'c1', approver);

  it.each([
    ['an admin, none named', admin, '', undefined],
    ['the owner, none named', owner, '', 'permission_denied'],
    ['the named admin', admin, ADMIN, undefined],
    [
      'another admin than the named one',
      caller('web:admin2', ['admin']),
      ADMIN,
      'permission_denied',
    ],
    [
      'the named identity without the admin role any more',
      caller(ADMIN, ['member']),
      ADMIN,
      'permission_denied',
    ],
  ])('%s', (_name, who, approver, code) => {
    const v = paused(approver);
    expect(authorizeApproval(who, turnOf(v, 't'), request(approver), UID)?.error.code).toBe(code);
  });

  // The Kubernetes door: only `create conversations/approvals` of this very conversation
  // stands in for the admin role (polychrome-conversation-admin); an editor's grants do not.
  it.each([
    ['create approvals on it', kubeCaller(UID, 'approvals', 'create'), '', undefined],
    ['create messages on it (an editor)', kubeCaller(UID, 'messages'), '', 'permission_denied'],
    ['create questions on it', kubeCaller(UID, 'questions'), '', 'permission_denied'],
    ['delete approvals on it', kubeCaller(UID, 'approvals', 'delete'), '', 'permission_denied'],
    ['get approvals on it', kubeCaller(UID, 'approvals', 'get'), '', 'permission_denied'],
    [
      'create approvals on another conversation',
      kubeCaller('00000000-0000-4000-8000-000000000000', 'approvals'),
      '',
      'permission_denied',
    ],
    [
      'create approvals, but the card names another approver',
      kubeCaller(UID, 'approvals'),
      ADMIN,
      'permission_denied',
    ],
  ])('a Kubernetes caller with %s', (_name, who, approver, code) => {
    const v = paused(approver);
    expect(authorizeApproval(who, turnOf(v, 't'), request(approver), UID)?.error.code).toBe(code);
    const plan = planApprovalAnswer({
      view: v,
      conversation: conv(),
      caller: who,
      requestId: request(approver).requestId,
      lease: LEASE,
      nowMs: NOW_MS,
      decision: 'approve',
      approvalTtlMs: TTL,
      allowSelfApproval: false,
    });
    expect(plan.kind === 'refuse' ? plan.error.code : undefined).toBe(code);
  });

  describe('four eyes: the requester (the turn’s message_received attribution)', () => {
    const byAdmin = (attribution: { caller: string; persona: string }) =>
      view([
        ev('message_received', {
          turnId: 't',
          idempotencyKey: 'k-t',
          text: 'hi',
          attribution: { ...attribution, participants: [OWNER], session: '' },
          receivedAtMs: 1,
        }),
        dispatched('t'),
        approvalRequest('t', 'c1'),
      ]);
    const answer = (
      v: JournalView,
      who: Caller,
      decision: 'approve' | 'deny',
      allowSelfApproval = false,
    ) =>
      planApprovalAnswer({
        view: v,
        conversation: conv(),
        caller: who,
        requestId: request().requestId,
        lease: LEASE,
        nowMs: NOW_MS,
        decision,
        approvalTtlMs: TTL,
        allowSelfApproval,
      });
    const asAdmin = byAdmin({ caller: ADMIN, persona: `p-${ADMIN}` });
    const kubeAdmin = { ...kubeCaller(UID, 'approvals'), identity: 'kubernetes:dave' };
    const asKube = byAdmin({ caller: 'kubernetes:dave', persona: '' });

    it.each([
      ['the admin who sent it', asAdmin, admin, 'approve', false, 'refused'],
      [
        'the same persona under another identity',
        asAdmin,
        { ...admin, identity: 'slack:T1:U1', identities: ['slack:T1:U1'] },
        'approve',
        false,
        'refused',
      ],
      [
        'a persona that links the sender’s identity',
        asAdmin,
        caller('web:other', ['admin'], [ADMIN]),
        'approve',
        false,
        'refused',
      ],
      [
        'the Kubernetes user who sent it',
        asKube,
        { ...kubeAdmin, identities: ['kubernetes:dave'] },
        'approve',
        false,
        'refused',
      ],
      ['another admin', asAdmin, caller('web:admin2', ['admin']), 'approve', false, 'answer'],
      ['the sender denying it (a denial widens nothing)', asAdmin, admin, 'deny', false, 'answer'],
      ['the sender, with self-approval allowed', asAdmin, admin, 'approve', true, 'self'],
    ] as const)('%s', (_name, v, who, decision, allow, expected) => {
      const plan = answer(v, who, decision, allow);
      if (expected === 'refused') {
        expect(refusal(plan).code).toBe('permission_denied');
        expect(refusal(plan).message).toBe(
          `${who.identity} may not approve ${request().requestId} (refund): their own message started turn t, and an approval needs a second person; ask another admin to approve it (you may deny it or, as an admin, cancel it), or, on a single-person install, run the control plane with POLYCHROME_ALLOW_SELF_APPROVAL=true`,
        );
        return;
      }
      expect(plan.kind).toBe('answer');
      expect(plan.kind === 'answer' ? plan.selfApproval : undefined).toBe(expected === 'self');
    });

    it('records a self-approval in the approval_response', () => {
      const plan = answer(asAdmin, admin, 'approve', true);
      if (plan.kind !== 'answer') throw new Error(`expected an answer, got ${plan.kind}`);
      const input = {
        view: asAdmin,
        conversation: conv(),
        caller: admin,
        requestId: request().requestId,
        lease: LEASE,
        nowMs: NOW_MS,
        deploymentHistoryTokens: DEFAULT_HISTORY_TOKENS,
      };
      const [response] = approvalAnswerBatch(
        { ...input, selfApproval: plan.selfApproval },
        plan.turn,
        plan.sign,
        { keyId: 'k', signature: new Uint8Array(64), scope: SCOPE },
      );
      if (response?.kind !== 'approval_response') throw new Error('expected an approval_response');
      expect([response.payload.answeredBy, response.payload.selfApproval]).toEqual([ADMIN, true]);
    });
  });

  it('an answer signs the pending call and dispatches the next attempt', () => {
    const plan = planApprovalAnswer({
      view: paused(),
      conversation: conv(),
      caller: admin,
      requestId: request().requestId,
      lease: LEASE,
      nowMs: NOW_MS,
      decision: 'deny',
      approvalTtlMs: TTL,
      allowSelfApproval: false,
    });
    expect(plan.kind).toBe('answer');
    if (plan.kind !== 'answer') return;
    expect(plan.sign).toEqual({
      requestId: request().requestId,
      toolName: 'refund',
      argsSha256: approvalArgsSha256(ARGS),
      decision: 'denied',
      turnId: 't',
    });
  });

  it('an answered or unknown request is refused', () => {
    const answered = view([
      message('t'),
      dispatched('t'),
      approvalRequest('t', 'c1'),
      approvalResponse('t', 'c1', ApprovalDecision.APPROVAL_DECISION_APPROVED),
      dispatched('t', 2),
    ]);
    const base = {
      conversation: conv(),
      caller: admin,
      lease: LEASE,
      nowMs: NOW_MS,
      decision: 'approve' as const,
      approvalTtlMs: TTL,
      allowSelfApproval: false,
    };
    expect(
      refusal(planApprovalAnswer({ ...base, view: answered, requestId: request().requestId })).code,
    ).toBe('conflict');
    expect(
      refusal(planApprovalAnswer({ ...base, view: answered, requestId: 'apr_nope' })).code,
    ).toBe('not_found');
  });

  /** `who` answers the question a paused turn asked. */
  const answerQuestion = (who: Caller) => {
    const qid = requestIds.questionRequestId('t', 'c9');
    const v = view([
      message('t'),
      dispatched('t'),
      ev('question_request', { turnId: 't', requestId: qid, toolCallId: 'c9', question: 'which?' }),
    ]);
    return planQuestionAnswer({
      view: v,
      conversation: conv(),
      caller: who,
      requestId: qid,
      answer: 'that',
      deploymentHistoryTokens: DEFAULT_HISTORY_TOKENS,
      lease: LEASE,
      nowMs: NOW_MS,
    });
  };

  it('a question is answered with the next dispatch in the same batch', () => {
    const plan = answerQuestion(owner);
    expect(plan.kind === 'answer' && kinds(plan.events)).toEqual([
      'question_response',
      'turn_dispatched',
    ]);
  });

  it.each([
    ['create questions on it', kubeCaller(UID, 'questions'), undefined],
    ['create messages on it', kubeCaller(UID, 'messages'), 'permission_denied'],
    ['create approvals on it', kubeCaller(UID, 'approvals'), 'permission_denied'],
    ['delete questions on it', kubeCaller(UID, 'questions', 'delete'), 'permission_denied'],
  ])('a Kubernetes caller with %s answers a question', (_name, who, code) => {
    const plan = answerQuestion(who);
    expect(plan.kind === 'refuse' ? plan.error.code : undefined).toBe(code);
  });
});

// ---- what the harness sends ----

describe('the harness cannot forge the record', () => {
  const running = view([message('t'), dispatched('t')]);
  const d = (v = running, c = conv()) => ({ turn: turnOf(v, 't'), conversation: c });
  const toolCall = (over: object = {}): Step => ({
    sequence: 1,
    commitWithResult: false,
    step: {
      $case: 'toolCall',
      value: {
        turnId: 't',
        step: 1,
        toolCallId: 'c1',
        toolName: 'lookup',
        argsJson: ARGS,
        effect: ToolEffect.TOOL_EFFECT_PURE,
        approvalRequestId: '',
        agent: '',
        thread: '',
        depth: 0,
        ...over,
      },
    },
  });

  it('accepts a plain tool call of this turn', () => {
    expect(checkStep(d(), toolCall())).toBeUndefined();
  });

  it.each([
    [
      'a step of another turn',
      toolCall({ turnId: 'other' }),
      'names turn other, but turn t was dispatched',
    ],
    [
      'a gated tool run without approval',
      toolCall({ toolName: 'refund' }),
      'which needs approval under spec.tools.requireApproval, without one',
    ],
    [
      'a claimed approval that was never given',
      toolCall({ toolName: 'refund', approvalRequestId: requestIds.approvalRequestId('t', 'c1') }),
      'but no such approval was given',
    ],
    [
      'an approval id that is not derived from the call',
      toolCall({ toolName: 'refund', approvalRequestId: 'apr_0000' }),
      'but its approval id is',
    ],
  ])('refuses %s', (_name, step, reason) => {
    expect(checkStep(d(), step)).toContain(reason);
  });

  it('refuses a handoff step: this turn was dispatched with no agent to hand off to', () => {
    const handoff: Step = {
      sequence: 1,
      commitWithResult: false,
      step: {
        $case: 'agentHandoff',
        value: {
          turnId: 't',
          step: 1,
          toolCallId: 'h1',
          fromAgent: 'triage',
          toAgent: 'billing',
          reason: '',
        },
      },
    };
    expect(checkStep(d(), handoff)).toBe(
      'agent_handoff h1 moves turn t from triage to billing, but this turn was dispatched with no agent to hand off to',
    );
  });

  it('applies the harness’s rule: a harness that runs mcpserver/sometool unpaused under an mcpserver/* gate is caught', () => {
    const gatedServer = conv({
      tools: { requireApproval: ['mcpserver/*', 'other/exact_tool'] },
    });
    const unpaused = (toolName: string) =>
      checkStep(d(running, gatedServer), toolCall({ toolName, toolCallId: 'c1' }));
    expect(unpaused('mcpserver/sometool')).toBe(
      'tool_call c1 runs mcpserver/sometool, which needs approval under spec.tools.requireApproval, without one',
    );
    expect(unpaused('mcpserver/a/b')).toContain('which needs approval');
    expect(unpaused('other/exact_tool')).toContain('which needs approval');
    // What the rule does not gate runs without a pause.
    expect(unpaused('other/read')).toBeUndefined();
    expect(unpaused('mcpserverx/sometool')).toBeUndefined();
  });

  it('tells the harness the agent’s name (spec.agent.name), empty when none is set', () => {
    const named = conv({ agent: { name: 'support' } });
    expect(turnStartOf(named, running, turnOf(running, 't'), 1, {}).agent?.name).toBe('support');
    expect(turnStartOf(conv(), running, turnOf(running, 't'), 1, {}).agent?.name).toBe('');
  });

  it('tells the harness a gated builtin needs approval, by the same rule', () => {
    const start = turnStartOf(conv(), running, turnOf(running, 't'), 1, { deploymentMaxSteps: 8 });
    expect(start.tools.map((t) => [t.name, t.needsApproval])).toContainEqual(['refund', true]);
  });

  it('an approval binds the arguments: the approved call with other arguments is refused', () => {
    const approved = view([
      message('t'),
      dispatched('t'),
      approvalRequest('t', 'c1'),
      approvalResponse('t', 'c1', ApprovalDecision.APPROVAL_DECISION_APPROVED),
      dispatched('t', 2),
    ]);
    const aid = requestIds.approvalRequestId('t', 'c1');
    expect(
      checkStep(d(approved), toolCall({ toolName: 'refund', approvalRequestId: aid })),
    ).toBeUndefined();
    expect(
      checkStep(
        d(approved),
        toolCall({ toolName: 'refund', approvalRequestId: aid, argsJson: '{"amount":5000}' }),
      ),
    ).toContain('no such approval was given');
  });

  it('a denied result needs a recorded denial', () => {
    const denied: Step = {
      sequence: 2,
      commitWithResult: false,
      step: {
        $case: 'toolResult',
        value: {
          turnId: 't',
          toolCallId: 'c1',
          content: 'no',
          isError: false,
          denied: true,
          thread: '',
          delegate: '',
        },
      },
    };
    expect(checkStep(d(), denied)).toContain('no denial was given');
    const withDenial = view([
      message('t'),
      dispatched('t'),
      approvalRequest('t', 'c1'),
      approvalResponse('t', 'c1', ApprovalDecision.APPROVAL_DECISION_DENIED),
      dispatched('t', 2),
    ]);
    expect(checkStep(d(withDenial), denied)).toBeUndefined();
  });

  const settle = (end: HarnessEnd, attempt = 1, v = running, c = conv()) =>
    planSettle({ dispatched: d(v, c), end, attempt, maxAttempts: 3, nowMs: NOW_MS });
  const pausedWith = (request: ApprovalRequest): HarnessEnd => ({
    kind: 'paused',
    request: { $case: 'approvalRequest', value: request },
  });

  it('commits an honest approval request and waits for it', () => {
    const plan = settle(pausedWith(requestOf('t', 'c1')));
    expect(plan.kind === 'commit' && kinds(plan.events)).toEqual(['approval_request']);
    expect(plan.kind === 'commit' && plan.status.kind).toBe('awaiting_approval');
  });

  it.each([
    [
      'names itself (or anyone) the approver',
      { requiredApprover: 'web:attacker' },
      'names required approver web:attacker',
    ],
    ['uses a request id of its own', { requestId: 'apr_mine' }, 'should have id'],
    [
      'shows other arguments than it hashed',
      { argsJson: '{"amount":1}' },
      'args_sha256 is not the SHA-256',
    ],
    ['names another turn', { turnId: 'other' }, 'names turn other'],
  ])('quarantines an approval request that %s, committing none of it', (_name, over, reason) => {
    const plan = settle(pausedWith({ ...requestOf('t', 'c1'), ...over }));
    expect(plan.kind).toBe('commit');
    if (plan.kind !== 'commit') return;
    expect(kinds(plan.events)).toEqual(['turn_ambiguous']);
    expect(plan.status.kind).toBe('ambiguous');
    const payload = plan.events[0]?.payload as { reason: string };
    expect(payload.reason).toContain('nothing of it was committed');
    expect(payload.reason).toContain(reason);
  });

  it('keeps the directive’s approver when the harness copies it', () => {
    const v = view([
      message('t'),
      ev('ingress_directive', { turnId: 't', requiredApprover: ADMIN }),
      dispatched('t'),
    ]);
    const plan = settle(pausedWith(requestOf('t', 'c1', ADMIN)), 1, v);
    expect(plan.kind === 'commit' && kinds(plan.events)).toEqual(['approval_request']);
  });

  it('quarantines a handoff to an agent that is not a target, and a result for another turn', () => {
    const handoff = settle({
      kind: 'result',
      carried: [],
      result: {
        outcome: {
          $case: 'handoff',
          value: { turnId: 't', toolCallId: 'c', targetAgent: 'evil', reason: '' },
        },
      },
    });
    expect(handoff.kind === 'commit' && handoff.status.kind).toBe('ambiguous');
    const other = settle({
      kind: 'result',
      carried: [],
      result: {
        outcome: {
          $case: 'complete',
          value: { turnId: 'other', text: 'x', steps: 1, completedAtMs: 1, fallback: false },
        },
      },
    });
    expect(other.kind === 'commit' && other.status.kind).toBe('ambiguous');
  });

  it('a forged step reported by the shell quarantines the turn with the reason', () => {
    const plan = settle({
      kind: 'forged',
      reason: 'tool_call c1 claims approval',
      toolCallId: 'c1',
    });
    expect(plan.kind === 'commit' && plan.events[0]).toEqual({
      kind: 'turn_ambiguous',
      payload: {
        turnId: 't',
        toolCallId: 'c1',
        reason:
          'the harness sent what this turn cannot have produced, so nothing of it was committed: tool_call c1 claims approval',
        detectedAtMs: NOW_MS,
      },
    });
  });
});

describe('settling a turn that failed', () => {
  const running = view([message('t'), dispatched('t')]);
  const failed: HarnessEnd = { kind: 'failed', error: new Error('harness gone'), retryable: true };
  const settle = (end: HarnessEnd, attempt: number, v = running) =>
    planSettle({
      dispatched: { turn: turnOf(v, 't'), conversation: conv() },
      end,
      attempt,
      maxAttempts: 3,
      nowMs: NOW_MS,
    });

  it('leaves an orphan before the last attempt, and for a failure that is not retryable', () => {
    expect(settle(failed, 1).kind).toBe('orphan');
    expect(settle({ ...failed, retryable: false }, 3).kind).toBe('orphan');
  });

  it('settles with the fallback on the last attempt', () => {
    const plan = settle(failed, 3);
    expect(plan.kind === 'commit' && plan.events[0]).toEqual({
      kind: 'turn_complete',
      payload: {
        turnId: 't',
        text: FAILED_TURN_TEXT,
        steps: 0,
        completedAtMs: NOW_MS,
        fallback: true,
      },
    });
  });

  it('quarantines when the last committed step is a side effect', () => {
    const v = view([
      message('t'),
      dispatched('t'),
      ev('tool_call', {
        turnId: 't',
        toolCallId: 'c1',
        toolName: 'pay',
        argsJson: ARGS,
        effect: ToolEffect.TOOL_EFFECT_SIDE_EFFECT,
      }),
    ]);
    const plan = settle(failed, 3, v);
    expect(plan.kind === 'commit' && plan.status).toEqual(
      expect.objectContaining({ kind: 'ambiguous', toolCallId: 'c1' }),
    );
  });
});

describe('nothing can be wedged: cancel and expiry', () => {
  // Requested at 0 (no requested_at_ms: the dispatch's time, 0 here); TTL 60 s.
  const paused = (extra: E[] = []) =>
    view([message('t'), dispatched('t'), approvalRequest('t', 'c1'), ...extra]);
  const requestId = requestIds.approvalRequestId('t', 'c1');
  const qid = requestIds.questionRequestId('t', 'c9');
  const question = view([
    message('t'),
    dispatched('t'),
    ev('question_request', { turnId: 't', requestId: qid, toolCallId: 'c9', question: 'which?' }),
  ]);
  const base = { conversation: conv(), lease: LEASE, nowMs: NOW_MS };

  it.each([
    ['the owner', owner, 'permission_denied'],
    ['a participant member', caller('web:bob', ['member']), 'permission_denied'],
    ['an edge', caller('edge:web', ['edge']), 'permission_denied'],
    [
      'the required approver without the admin role',
      caller(ADMIN, ['member']),
      'permission_denied',
    ],
    ['an admin', admin, undefined],
    [
      'a Kubernetes caller with delete approvals on it',
      kubeCaller(UID, 'approvals', 'delete'),
      undefined,
    ],
    [
      'a Kubernetes caller with create approvals on it (POST decision cancel)',
      kubeCaller(UID, 'approvals', 'create'),
      'permission_denied',
    ],
    [
      'a Kubernetes caller with delete questions on it',
      kubeCaller(UID, 'questions', 'delete'),
      'permission_denied',
    ],
    [
      'a Kubernetes caller with delete approvals on another conversation',
      kubeCaller('00000000-0000-4000-8000-000000000000', 'approvals', 'delete'),
      'permission_denied',
    ],
  ])('cancel of an approval by %s', (_name, who, code) => {
    const plan = planCancel({ ...base, view: paused(), caller: who, requestId, type: 'approval' });
    expect(plan.kind === 'refuse' ? plan.error.code : undefined).toBe(code);
  });

  it('a cancel records who and when, and settles the turn with a reply that says so', () => {
    const plan = planCancel({
      ...base,
      view: paused(),
      caller: admin,
      requestId,
      type: 'approval',
      comment: 'stale',
    });
    expect(plan.kind).toBe('cancel');
    if (plan.kind !== 'cancel') return;
    expect(plan.events).toEqual([
      {
        kind: 'request_cancelled',
        payload: {
          turnId: 't',
          requestId,
          cancelledBy: ADMIN,
          cancelledAtMs: NOW_MS,
          comment: 'stale',
          session: 's',
        },
      },
      {
        kind: 'turn_complete',
        payload: {
          turnId: 't',
          text: `The approval ${requestId} for refund was cancelled by ${ADMIN}; the call did not run. Comment: stale`,
          steps: 0,
          completedAtMs: NOW_MS,
          fallback: false,
        },
      },
    ]);
    // Nothing is dispatched: the harness is not called again, so the call never runs.
    expect(plan.events.map((e) => e.kind)).not.toContain('turn_dispatched');
  });

  it('a question is cancelled the same way; a cancelled request is refused with who cancelled it', () => {
    const plan = planCancel({
      ...base,
      view: question,
      caller: admin,
      requestId: qid,
      type: 'question',
    });
    expect(plan.kind === 'cancel' ? plan.events.at(-1)?.payload : undefined).toMatchObject({
      text: `The question ${qid} was cancelled by ${ADMIN}.`,
    });
    const after = paused([
      ev('request_cancelled', { turnId: 't', requestId, cancelledBy: ADMIN, cancelledAtMs: 1 }),
      ev('turn_complete', { turnId: 't', text: 'cancelled' }),
    ]);
    const answer = planApprovalAnswer({
      ...base,
      view: after,
      caller: admin,
      requestId,
      decision: 'approve',
      approvalTtlMs: TTL,
      allowSelfApproval: false,
    });
    expect(refusal(answer)).toEqual({
      code: 'conflict',
      message: `approval ${requestId} was cancelled by ${ADMIN} at 1970-01-01T00:00:00.001Z; it can no longer be answered`,
    });
  });

  it.each([
    ['before the deadline', TTL - 1, 'answer'],
    ['at the deadline', TTL, 'expire'],
    ['after it', TTL + 1, 'expire'],
  ])('an answer %s', (_name, nowMs, kind) => {
    const plan = planApprovalAnswer({
      ...base,
      nowMs,
      view: paused(),
      caller: admin,
      requestId,
      decision: 'approve',
      approvalTtlMs: TTL,
      allowSelfApproval: false,
    });
    expect(plan.kind).toBe(kind);
    if (plan.kind === 'expire') {
      expect(plan.error.code).toBe('conflict');
      expect(plan.error.message).toMatch(/expired at .*, unanswered 1m after it was requested/);
    }
  });

  it('an owner answering after the deadline is refused as before, and nothing expires on their say', () => {
    const plan = planApprovalAnswer({
      ...base,
      nowMs: TTL + 1,
      view: paused(),
      caller: owner,
      requestId,
      decision: 'approve',
      approvalTtlMs: TTL,
      allowSelfApproval: false,
    });
    expect(refusal(plan).code).toBe('permission_denied');
  });

  it('a posted message expires a due approval first; before the deadline it is blocked', () => {
    const early = planMessage(
      messageInput({ events: [message('t'), dispatched('t'), approvalRequest('t', 'c1')] }),
    );
    expect(refusal(early).code).toBe('conflict');
    const late = planMessage(
      messageInput({
        nowMs: TTL,
        events: [message('t'), dispatched('t'), approvalRequest('t', 'c1')],
      }),
    );
    expect(late.kind).toBe('expire');
  });

  it('the expiry batch: approval_expired, a signed denial the harness can verify, the next dispatch', () => {
    const v = paused();
    const plan = planMessage(messageInput({ nowMs: TTL + 5, view: v }));
    if (plan.kind !== 'expire') throw new Error(`expected expire, got ${plan.kind}`);
    const events = expiryBatch(
      plan.due,
      { keyId: 'kid', signature: new Uint8Array(64), scope: SCOPE },
      LEASE,
      TTL + 5,
      TTL,
      { historyFrom: 0, summaryPosition: 0 },
    );
    expect(events.map((e) => e.kind)).toEqual([
      'approval_expired',
      'approval_response',
      'turn_dispatched',
    ]);
    expect(events[0]?.payload).toEqual({
      turnId: 't',
      requestId,
      requestedAtMs: 0,
      expiredAtMs: TTL + 5,
      ttlMs: TTL,
    });
    expect(events[1]?.payload).toMatchObject({
      requestId,
      toolName: 'refund',
      decision: ApprovalDecision.APPROVAL_DECISION_DENIED,
      answeredBy: EXPIRY_ANSWERER,
      keyId: 'kid',
      conversation: SCOPE.conversation,
      expiresAtMs: SCOPE.expiresAtMs,
      approvalId: SCOPE.approvalId,
      comment: `approval ${requestId} expired unanswered 1m after it was requested, so the call counts as denied`,
    });
    expect(events[2]?.payload).toMatchObject({ turnId: 't', attempt: 2, fencingToken: 7 });
  });

  it('a request committed with requested_at_ms counts from then, not from its dispatch', () => {
    const v = view([
      message('t'),
      dispatched('t'),
      ev('approval_request', { ...requestOf('t', 'c1'), requestedAtMs: 30_000 }),
    ]);
    expect(planMessage(messageInput({ nowMs: TTL + 1, view: v })).kind).toBe('refuse');
    expect(planMessage(messageInput({ nowMs: TTL + 30_000, view: v })).kind).toBe('expire');
  });

  it('a settled pause stamps the request with the control plane clock, not the harness one', () => {
    const v = view([message('t'), dispatched('t')]);
    const plan = planSettle({
      dispatched: { turn: turnOf(v, 't'), conversation: conv() },
      end: {
        kind: 'paused',
        request: { $case: 'approvalRequest', value: { ...requestOf('t', 'c1'), requestedAtMs: 1 } },
      },
      attempt: 1,
      maxAttempts: 3,
      nowMs: NOW_MS,
    });
    expect(plan.kind === 'commit' ? plan.events[0]?.payload : undefined).toMatchObject({
      requestedAtMs: NOW_MS,
    });
  });
});

describe('an admin resolves a quarantined turn (docs/turns.md, "Resolving a quarantined turn")', () => {
  const pay = ev('tool_call', {
    turnId: 't',
    step: 1,
    toolCallId: 'c1',
    toolName: 'pay',
    argsJson: ARGS,
    effect: ToolEffect.TOOL_EFFECT_SIDE_EFFECT,
  });
  const modelCall = ev('model_call', { turnId: 't', step: 1, model: 'm' });
  const ambiguous = (toolCallId = 'c1'): E =>
    ev('turn_ambiguous', { turnId: 't', toolCallId, reason: 'lost', detectedAtMs: 4 });
  const quarantined: E[] = [message('t'), dispatched('t'), modelCall, pay, ambiguous()];
  const didNotRun = { kind: 'did_not_run' } as const;
  const ranWith = (result: string | undefined) => ({ kind: 'ran', result }) as const;
  function input(
    over: { events?: E[]; who?: Caller; actor?: string; turnId?: string } = {},
    decision: ResolveTurn['decision'] = didNotRun,
  ): ResolveInput {
    return {
      view: view(over.events ?? quarantined),
      conversation: conv(),
      caller: over.who ?? admin,
      request: {
        conversationId: UID,
        turnId: over.turnId ?? 't',
        actor: over.actor ?? over.who?.identity ?? ADMIN,
        decision,
      },
      nowMs: NOW_MS,
    };
  }
  /** The journal after the plan's batch is committed. */
  function after(events: E[], plan: ReturnType<typeof planResolve>): JournalView {
    if (plan.kind !== 'resolve') throw new Error(`refused: ${plan.error.message}`);
    return view([...events, ...plan.events.map((e) => ev(e.kind, e.payload as never))]);
  }

  it.each([
    ['the owner', owner],
    ['a participant member', caller('web:bob', ['member'])],
    ['an edge', edge],
    ['a stranger', stranger],
  ])('refuses %s with 403', (_name, who) => {
    expect(refusal(planResolve(input({ who }))).code).toBe('permission_denied');
  });

  it('refuses an admin acting as an identity that is not theirs (403)', () => {
    const plan = planResolve(input({ actor: OWNER }));
    expect(refusal(plan)).toEqual({
      code: 'permission_denied',
      message: expect.stringContaining(`actor ${OWNER} is not one of your identities`),
    });
  });

  it('refuses a conversation that does not exist (404) and a Kubernetes grant for another one', () => {
    expect(refusal(planResolve({ ...input(), conversation: undefined })).code).toBe('not_found');
    const kube: Caller = {
      ...caller('kube:alice', []),
      kubernetes: {
        conversationId: 'other-uid',
        subresource: 'resolve',
        verb: 'create',
        groups: [],
      },
    };
    expect(refusal(planResolve(input({ who: kube }))).code).toBe('permission_denied');
    const allowed: Caller = {
      ...kube,
      kubernetes: { conversationId: UID, subresource: 'resolve', verb: 'create', groups: [] },
    };
    expect(planResolve(input({ who: allowed })).kind).toBe('resolve');
  });

  it.each([
    ['an unknown turn', { turnId: 'nope' }, 'unknown'],
    ['a complete turn', { events: [message('t'), dispatched('t'), complete('t')] }, 'complete'],
    ['an orphan', { events: [message('t'), dispatched('t'), modelCall, pay] }, 'orphan'],
    [
      'a paused turn',
      { events: [message('t'), dispatched('t'), approvalRequest('t', 'c1')] },
      'awaiting_approval',
    ],
  ])('refuses %s with 409 naming its state', (_name, over, state) => {
    const plan = planResolve(input(over));
    expect(plan.kind === 'refuse' && plan.error.details).toEqual(
      expect.objectContaining({ state }),
    );
    expect(refusal(plan).code).toBe('conflict');
  });

  it('refuses a turn already resolved (409), naming the earlier decision and actor', () => {
    const first = planResolve(input());
    const resolved = after(quarantined, first);
    const again = planResolve({ ...input(), view: resolved });
    expect(refusal(again)).toEqual({
      code: 'conflict',
      message: expect.stringContaining(`already resolved (did_not_run, by ${ADMIN}); it is orphan`),
    });
  });

  it('refuses "ran" when no side-effecting call waits for its result (409)', () => {
    const forged = [message('t'), dispatched('t'), modelCall, ambiguous('')];
    expect(refusal(planResolve(input({ events: forged }, ranWith('ok')))).message).toContain(
      'has no side-effecting tool call waiting for its result',
    );
    // A pure call is run again anyway; and a call with a result is not in doubt.
    const pure = [
      message('t'),
      dispatched('t'),
      modelCall,
      ev('tool_call', { turnId: 't', toolCallId: 'c1', effect: ToolEffect.TOOL_EFFECT_PURE }),
      ambiguous(),
    ];
    expect(refusal(planResolve(input({ events: pure }, ranWith('ok')))).code).toBe('conflict');
    const answered = [
      ...quarantined.slice(0, 4),
      ev('tool_result', { turnId: 't', toolCallId: 'c1', content: 'x' }),
      ambiguous(),
    ];
    expect(refusal(planResolve(input({ events: answered }, ranWith('ok')))).code).toBe('conflict');
    // did_not_run retries any quarantined turn.
    expect(planResolve(input({ events: forged })).kind).toBe('resolve');
  });

  it('did_not_run: one turn_resolved; the turn is an orphan whose harness steps leave the call out', () => {
    const plan = planResolve(input());
    expect(plan.kind === 'resolve' && plan.events).toEqual([
      {
        kind: 'turn_resolved',
        payload: {
          turnId: 't',
          decision: ResolveDecision.RESOLVE_DECISION_DID_NOT_RUN,
          toolCallId: 'c1',
          result: '',
          resultUnknown: false,
          actor: ADMIN,
          caller: ADMIN,
          session: 's',
          resolvedAtMs: NOW_MS,
          quarantinePosition: 4,
        },
      },
    ]);
    expect(plan.kind === 'resolve' && plan.status).toEqual({ kind: 'resolved', turnId: 't' });
    const resolved = after(quarantined, plan);
    const turn = resolved.turnsById.get('t')!;
    expect(turnState(turn)).toBe('orphan');
    expect(oldestOrphan(resolved)?.turnId).toBe('t');
    expect(recordedSteps(turn).map((s) => s.step?.$case)).toEqual(['modelCall']);
    // The journal keeps the call: nothing committed changes.
    expect(turn.steps.map((s) => s.kind)).toEqual(['model_call', 'tool_call']);
    expect(resolved.anomalies).toEqual([]);
  });

  it("ran with a result: the result becomes the call's tool_result, and the harness resumes past it", () => {
    const plan = planResolve(input({}, ranWith('refund 42 sent')));
    expect(plan.kind === 'resolve' && kinds(plan.events)).toEqual(['turn_resolved', 'tool_result']);
    expect(plan.kind === 'resolve' && plan.events[1]?.payload).toEqual({
      turnId: 't',
      toolCallId: 'c1',
      content: 'refund 42 sent',
      isError: false,
      denied: false,
      thread: '',
    });
    const turn = after(quarantined, plan).turnsById.get('t')!;
    expect(turnState(turn)).toBe('orphan');
    expect(recordedSteps(turn).map((s) => s.step?.$case)).toEqual([
      'modelCall',
      'toolCall',
      'toolResult',
    ]);
  });

  it("ran, for a delegate's call: the result goes to the thread the call ran on", () => {
    const inThread = ev('tool_call', {
      ...payloadCodecs.tool_call.decode(pay.payload),
      agent: 'researcher',
      thread: 'd1',
      depth: 1,
    });
    const events = [message('t'), dispatched('t'), modelCall, inThread, ambiguous()];
    const plan = planResolve(input({ events }, ranWith('refund 42 sent')));
    expect(plan.kind === 'resolve' && plan.events[1]?.payload).toMatchObject({
      toolCallId: 'c1',
      thread: 'd1',
    });
  });

  it('ran with the result unknown: an error tool_result that says so, and the flag', () => {
    const plan = planResolve(input({}, ranWith(undefined)));
    if (plan.kind !== 'resolve') throw new Error('refused');
    expect(plan.events[0]?.payload).toEqual(
      expect.objectContaining({
        decision: ResolveDecision.RESOLVE_DECISION_RAN,
        result: '',
        resultUnknown: true,
      }),
    );
    expect(plan.events[1]?.payload).toEqual(
      expect.objectContaining({ toolCallId: 'c1', content: UNKNOWN_RESULT_TEXT, isError: true }),
    );
  });

  it('a quarantine after a resolution can be resolved again; a turn_resolved of a settled turn is an anomaly', () => {
    const first = after(quarantined, planResolve(input()));
    // The retry commits the call again and is quarantined again.
    const requarantined = [
      ...quarantined,
      ev('turn_resolved', {
        turnId: 't',
        decision: ResolveDecision.RESOLVE_DECISION_DID_NOT_RUN,
        toolCallId: 'c1',
        actor: ADMIN,
      }),
      dispatched('t', 2),
      pay,
      ambiguous(),
    ];
    expect(first.head).toBe(6);
    const v = view(requarantined);
    expect(turnState(v.turnsById.get('t')!)).toBe('ambiguous');
    expect(planResolve({ ...input(), view: v }).kind).toBe('resolve');
    const stray = view([
      message('t'),
      dispatched('t'),
      complete('t'),
      ev('turn_resolved', { turnId: 't', actor: ADMIN }),
    ]);
    expect(turnState(stray.turnsById.get('t')!)).toBe('complete');
    expect(stray.anomalies.map((a) => a.problem)).toEqual(['not_quarantined']);
  });
});

describe('accepting a rolled-back journal', () => {
  const ROOT = 'ab'.repeat(32);
  // status.journal still names the lost checkpoint (head 31) while the journal holds 10.
  const rolled = conversationFixture(
    { owner: OWNER },
    {
      journal: { head: 31, lastSignedRoot: ROOT, keyId: 'k1' },
    },
  );
  const verdict = {
    kind: 'rolled_back',
    rollback: { checkpointHead: 31, checkpointRoot: ROOT, journalHead: 10 },
  } as const;
  const request = { conversationId: UID, head: 10, reason: 'restored', actor: ADMIN };
  const journalOf = (...events: E[]): JournalView =>
    view([...Array.from({ length: 10 - events.length }, () => message('t')), ...events]);

  it('records the decision once the admin names the head the journal holds', () => {
    const plan = planAcceptRollback({
      view: journalOf(),
      conversation: rolled,
      caller: admin,
      request,
      verdict,
      nowMs: NOW_MS,
    });
    expect(plan.kind).toBe('accept');
  });

  it('refuses a second decision on the same checkpoint while the status has not caught up', () => {
    const decided = journalOf(
      ev('rollback_accepted', {
        checkpointHead: 31,
        checkpointRoot: Buffer.from(ROOT, 'hex'),
        journalHead: 8,
      }),
      ev('signed_root', { leafCount: 9 }),
    );
    const plan = planAcceptRollback({
      view: decided,
      conversation: rolled,
      caller: admin,
      request,
      verdict,
      nowMs: NOW_MS,
    });
    expect(refusal(plan)).toMatchObject({ code: 'conflict' });
    expect(refusal(plan).message).toContain('is already accepted in its journal');
  });
});
