import { describe, expect, it } from '@jest/globals';
import { createHash } from 'node:crypto';
import type { AppError } from '../../common/errors';
import { payloadCodecs, type EventKind, type EventPayloads } from '../../common/event-kinds';
import type { JournalEntry } from '../../common/state-journal';
import type { Step } from '../../proto/gen/polychrome/harness/v1/harness';
import type { Agent } from '../api/v1alpha1/agent-resource';
import type { ModelConfig } from '../api/v1alpha1/model-config-resource';
import { DEFAULT_HISTORY_TOKENS } from '../api/v1alpha1/conversation-values';
import { conversation, UID } from '../controller/snapshot-fixtures';
import { recorded, resolveRoster, rosterFromJson, type RecordedRoster } from './agent-roster';
import type { AgentDirectory } from '../controller/agent-resource-reads';
import { foldJournal } from './journal-view';
import type { JournalView } from './journal-view-types';
import { settledWithAgent, startingAgent, turnRoster } from './plan-agents';
import type { PlannedEvent } from './plan-common';
import { dispatchEvent } from './plan-common';
import { checkStep, turnStartOf } from './plan-harness-checks';
import { planMessage, type MessageInput } from './plan-message';
import type { Caller } from './turn-service';

// ---- fixtures: Agents and ModelConfigs as the watches hold them; journals folded for real ----

const NS = 'team';
const OWNER = 'web:owner';
const LEASE = { holder: 'replica-a', fencingToken: 3 };

function agent(name: string, spec: Partial<Agent['spec']> = {}): Agent {
  return {
    apiVersion: 'polychrome.dev/v1alpha1',
    kind: 'Agent',
    metadata: { name, namespace: NS },
    spec: { modelRef: { name: 'claude' }, systemPrompt: `You are ${name}.`, ...spec },
  };
}

const claude: ModelConfig = {
  apiVersion: 'polychrome.dev/v1alpha1',
  kind: 'ModelConfig',
  metadata: { name: 'claude', namespace: NS },
  spec: {
    provider: 'anthropic',
    model: 'claude-sonnet-5-5',
    baseUrl: 'http://gateway.models:8080',
    secretKeyRef: { name: 'anthropic', key: 'api-key' },
  },
};

function directory(agents: Agent[], configs: ModelConfig[] = [claude]): AgentDirectory {
  return {
    agent: (name) => agents.find((a) => a.metadata.name === name),
    modelConfig: (name) => configs.find((c) => c.metadata.name === name),
  };
}

const triage = agent('triage', {
  description: 'Sorts out what the user needs.',
  handoffs: ['billing'],
  tools: { builtin: ['lookup'] },
});
const billing = agent('billing', {
  description: 'Refunds and invoices.',
  handoffs: ['triage'],
  tools: { builtin: ['refund'], requireApproval: ['refund'] },
  maxSteps: 5,
});
const crew = directory([triage, billing]);
const convo = conversation({ owner: OWNER, agentRef: { name: 'triage' } });

const owner: Caller = {
  identity: OWNER,
  identities: [OWNER],
  personaId: 'p-owner',
  roles: ['member'],
  sessionId: 's',
};

function encoded(events: readonly PlannedEvent[]): { kind: string; payload: Uint8Array }[] {
  return events.map(({ kind, payload }) => {
    const codec = payloadCodecs[kind];
    const message = codec.fromPartial(payload as never);
    return { kind, payload: codec.encode(message as never).finish() };
  });
}

function fold(events: readonly { kind: string; payload: Uint8Array }[]): JournalView {
  return foldJournal(events.map((e, position): JournalEntry => ({ position, ...e })));
}

function ev<K extends EventKind>(kind: K, payload: Partial<EventPayloads[K]>) {
  const codec = payloadCodecs[kind];
  return { kind, payload: codec.encode(codec.fromPartial(payload)).finish() };
}

function message(
  journal: { kind: string; payload: Uint8Array }[],
  turnId: string,
  roster: MessageInput['roster'],
) {
  return planMessage({
    view: fold(journal),
    conversation: convo,
    caller: owner,
    request: { conversationId: UID, text: 'hello', idempotencyKey: `k-${turnId}` },
    turnId,
    lease: LEASE,
    nowMs: 1_000,
    approvalTtlMs: 60_000,
    deploymentHistoryTokens: DEFAULT_HISTORY_TOKENS,
    ...(roster === undefined ? {} : { roster }),
  });
}

/** Batch one of `turnId` appended to `journal`, under `roster`. */
function dispatch(
  journal: { kind: string; payload: Uint8Array }[],
  turnId: string,
  roster: RecordedRoster,
): { kind: string; payload: Uint8Array }[] {
  const step = message(journal, turnId, roster);
  if (step.kind !== 'dispatch') throw new Error(`expected a dispatch, got ${step.kind}`);
  return [...journal, ...encoded(step.events)];
}

const modelCall = (turnId: string, agentName: string) =>
  ev('model_call', { turnId, step: 1, agent: agentName, model: 'claude-sonnet-5-5' });
const handoff = (turnId: string, from: string, to: string) =>
  ev('agent_handoff', { turnId, step: 1, toolCallId: 'h1', fromAgent: from, toAgent: to });
const complete = (turnId: string) => ev('turn_complete', { turnId, text: 'done' });

// ---- the roster ----

describe('resolveRoster: the entry Agent and every Agent it can hand off to', () => {
  it('takes the closure through handoffs, a cycle once, each agent with its ModelConfig', () => {
    const { roster } = resolveRoster('triage', crew, NS, ['lookup']);
    expect(roster.entry).toBe('triage');
    expect(roster.agents.map((a) => a.name)).toEqual(['billing', 'triage']);
    const billingAgent = roster.agents[0];
    expect(billingAgent?.model).toEqual({
      modelConfig: 'claude',
      provider: 'anthropic',
      model: 'claude-sonnet-5-5',
      baseUrl: 'http://gateway.models:8080',
      secretKeyRef: { name: 'anthropic', key: 'api-key' },
    });
    // The Conversation's rules gate every agent, beside the agent's own.
    expect(billingAgent?.requireApproval).toEqual(['lookup', 'refund']);
    expect(billingAgent?.maxSteps).toBe(5);
    expect(roster.agents[1]?.maxSteps).toBe(8);
  });

  it('is content-addressed: the same Agents give the same bytes, any change new ones', () => {
    const a = resolveRoster('triage', crew, NS);
    const b = resolveRoster('triage', directory([billing, triage]), NS);
    expect(b.sha256).toBe(a.sha256);
    const changed = agent('billing', { ...billing.spec, systemPrompt: 'Be terse.' });
    const c = resolveRoster('triage', directory([triage, changed]), NS);
    expect(c.sha256).not.toBe(a.sha256);
    expect(rosterFromJson(a.json, a.sha256).roster).toEqual(a.roster);
  });

  it.each([
    [
      'the entry Agent is missing',
      directory([billing]),
      'spec.agentRef names Agent triage, which does not exist in namespace team',
    ],
    [
      'a handoff target is missing',
      directory([triage]),
      "Agent triage hands off to Agent billing, which does not exist in namespace team; create it or remove it from triage's spec.handoffs",
    ],
    [
      'a ModelConfig is missing',
      directory([triage, billing], []),
      'names ModelConfig claude in spec.modelRef, which does not exist in namespace team',
    ],
  ])('refuses when %s, naming what to do', (_what, dir, text) => {
    expect(() => resolveRoster('triage', dir, NS)).toThrow(text);
  });

  it('refuses a roster whose bytes do not match its digest, or are not a roster', () => {
    const { json, sha256 } = resolveRoster('triage', crew, NS);
    expect(() => rosterFromJson(json.replace('Refunds', 'Refund'), sha256)).toThrow(
      /whose SHA-256 is/,
    );
    const forged = recorded({ entry: 'nobody', agents: [] });
    expect(() => rosterFromJson(forged.json, forged.sha256)).toThrow(/not a roster/);
  });
});

// ---- dispatch ----

describe('a turn of a Conversation that names an Agent', () => {
  const roster = resolveRoster('triage', crew, NS);

  it('records its roster once, before the dispatch that names it', () => {
    const first = message([], 't1', roster);
    expect(first.kind).toBe('dispatch');
    if (first.kind !== 'dispatch') return;
    expect(first.events.map((e) => e.kind)).toEqual([
      'message_received',
      'agent_roster',
      'turn_dispatched',
    ]);
    let journal = [...encoded(first.events), modelCall('t1', 'triage'), complete('t1')];
    const second = message(journal, 't2', roster);
    if (second.kind !== 'dispatch') throw new Error('no dispatch');
    expect(second.events.map((e) => e.kind)).toEqual(['message_received', 'turn_dispatched']);
    journal = [...journal, ...encoded(second.events)];
    const view = fold(journal);
    const t2 = view.turnsById.get('t2');
    if (t2 === undefined) throw new Error('no t2');
    expect(t2.dispatches[0]?.agentRosterSha256).toBe(roster.sha256);
    expect(turnRoster(view, t2)).toEqual(roster.roster);
  });

  it('keeps its first roster on every attempt, so a changed Agent affects later turns only', () => {
    const journal = dispatch([], 't1', roster);
    const view = fold(journal);
    const t1 = view.turnsById.get('t1');
    if (t1 === undefined) throw new Error('no t1');
    const again = dispatchEvent(t1, LEASE, undefined, 2_000, {
      historyFrom: 0,
      summaryPosition: 0,
    });
    expect(again.kind).toBe('turn_dispatched');
    const retried = fold([...journal, ...encoded([again])]).turnsById.get('t1');
    expect(retried?.dispatches.map((d) => d.agentRosterSha256)).toEqual([
      roster.sha256,
      roster.sha256,
    ]);
    // An Agent changed meanwhile: the next turn records the new roster.
    const changed = resolveRoster(
      'triage',
      directory([triage, agent('billing', { ...billing.spec, maxSteps: 2 })]),
      NS,
    );
    const next = message([...journal, complete('t1')], 't2', changed);
    if (next.kind !== 'dispatch') throw new Error('no dispatch');
    expect(next.events.map((e) => e.kind)).toContain('agent_roster');
  });

  it('is refused with the resolution error when the Agents cannot be resolved', () => {
    const refused = { refused: resolutionError() };
    const step = message([], 't1', refused);
    expect(step.kind).toBe('refuse');
    expect((step as { error: AppError }).error.message).toMatch(/does not exist in namespace team/);
  });

  it('starts with the entry, then with whom the last completed turn handed to', () => {
    let journal = dispatch([], 't1', roster);
    const firstView = fold(journal);
    const t1 = firstView.turnsById.get('t1');
    if (t1 === undefined) throw new Error('no t1');
    expect(startingAgent(firstView, t1, roster.roster).name).toBe('triage');
    journal = [
      ...journal,
      modelCall('t1', 'triage'),
      handoff('t1', 'triage', 'billing'),
      modelCall('t1', 'billing'),
      complete('t1'),
    ];
    const settled = fold(journal);
    expect(settledWithAgent({ kind: 'settled', turnId: 't1' }, settled, 't1')).toEqual({
      kind: 'settled',
      turnId: 't1',
      agent: 'billing',
    });
    journal = dispatch(journal, 't2', roster);
    const view = fold(journal);
    const t2 = view.turnsById.get('t2');
    if (t2 === undefined) throw new Error('no t2');
    const start = turnStartOf(convo, view, t2, 1, {});
    // An Agent's model calls are the control plane's: the key stays out of the sandbox.
    expect(start.agent).toEqual({
      model: 'claude-sonnet-5-5',
      systemPrompt: 'You are billing.',
      name: 'billing',
      relayModelCalls: true,
      provider: 'anthropic',
      maxTokens: 0,
    });
    expect(start.budget?.conversationMaxSteps).toBe(5);
    expect(start.tools.map((t) => [t.name, t.needsApproval])).toEqual([
      ['refund', true],
      ['__ask_user', false],
      ['__handoff_to', false],
    ]);
    expect(start.agents.map((a) => [a.name, a.description, a.handoffs])).toEqual([
      ['billing', 'Refunds and invoices.', ['triage']],
      ['triage', 'Sorts out what the user needs.', ['billing']],
    ]);
  });
});

// ---- what the harness sends ----

describe('the harness cannot make up agents', () => {
  const roster = resolveRoster('triage', crew, NS);
  const journal = dispatch([], 't1', roster);
  const view = fold(journal);
  const turn = view.turnsById.get('t1');
  if (turn === undefined) throw new Error('no t1');
  const facts = { turn, conversation: convo, roster: roster.roster };
  const step = (content: Step['step']): Step => ({
    sequence: 1,
    step: content,
    commitWithResult: false,
  });
  const handoffStep = (from: string, to: string): Step =>
    step({
      $case: 'agentHandoff',
      value: { turnId: 't1', step: 1, toolCallId: 'h1', fromAgent: from, toAgent: to, reason: '' },
    });

  it('accepts a handoff its Agent allows', () => {
    expect(checkStep(facts, handoffStep('triage', 'billing'))).toBeUndefined();
  });

  it.each([
    ['to an agent not in the roster', 'triage', 'sales', /the turn's agents are billing, triage/],
    ['from an agent not in the roster', 'sales', 'billing', /the turn's agents are/],
  ])('refuses a handoff %s', (_what, from, to, reason) => {
    expect(checkStep(facts, handoffStep(from, to))).toMatch(reason);
  });

  it('refuses a handoff the Agent does not list, and any handoff of an inline agent', () => {
    const narrow = resolveRoster(
      'triage',
      directory([triage, agent('billing', { ...billing.spec, handoffs: [] })]),
      NS,
    );
    expect(checkStep({ ...facts, roster: narrow.roster }, handoffStep('billing', 'triage'))).toBe(
      'agent_handoff h1 moves turn t1 from billing to triage, but billing may hand off only to nobody',
    );
    const { roster: _dropped, ...inline } = facts;
    expect(checkStep(inline, handoffStep('triage', 'billing'))).toMatch(
      /dispatched with no agent to hand off to/,
    );
  });

  it('refuses a model call under an agent the turn was not given', () => {
    const call = step({
      $case: 'modelCall',
      value: { ...payloadCodecs.model_call.fromPartial({ turnId: 't1', step: 1, agent: 'root' }) },
    });
    expect(checkStep(facts, call)).toMatch(
      /names agent root, which is not among the turn's agents/,
    );
  });

  it("holds each agent's approval rules: billing's refund needs an approval", () => {
    const refund = (agentName: string): Step =>
      step({
        $case: 'toolCall',
        value: payloadCodecs.tool_call.fromPartial({
          turnId: 't1',
          step: 1,
          toolCallId: 'c1',
          toolName: 'refund',
          argsJson: '{}',
          agent: agentName,
        }),
      });
    expect(checkStep(facts, refund('billing'))).toMatch(
      /runs refund, which needs approval under agent billing's rules, without one/,
    );
    expect(checkStep(facts, refund('triage'))).toBeUndefined();
  });
});

function resolutionError(): AppError {
  try {
    resolveRoster('triage', directory([]), NS);
  } catch (error) {
    return error as AppError;
  }
  throw new Error('resolved');
}

// ---- delegation (docs/turns.md, "Delegation") ----

describe('delegation on the control plane: the roster and the checks on a thread', () => {
  const lead = agent('lead', { delegates: ['researcher'] });
  const researcher = agent('researcher', { delegates: ['checker'] });
  const checker = agent('checker');
  const team = directory([lead, researcher, checker]);

  it('takes the closure through delegates too, each listing whom it may ask', () => {
    const { roster } = resolveRoster('lead', team, NS);
    expect(roster.agents.map((a) => [a.name, a.delegates])).toEqual([
      ['checker', undefined],
      ['lead', ['researcher']],
      ['researcher', ['checker']],
    ]);
    expect(() => resolveRoster('lead', directory([lead]), NS)).toThrow(
      "Agent lead delegates to Agent researcher, which does not exist in namespace team; create it or remove it from lead's spec.delegates",
    );
  });

  it('leaves a roster without delegation byte for byte as before', () => {
    expect(resolveRoster('triage', crew, NS).json).not.toContain('delegates');
  });

  it('offers __delegate_to by reference to an agent with delegates, and lists them', () => {
    const roster = resolveRoster('lead', team, NS);
    const start = turnStartOf(
      convoOf('lead'),
      fold(dispatch([], 't1', roster)),
      turnOf('t1', roster),
      1,
      {},
    );
    const byName = new Map(start.agents.map((a) => [a.name, a]));
    expect(byName.get('lead')?.delegates).toEqual(['researcher']);
    expect(byName.get('lead')?.tools.map((t) => t.name)).toContain('__delegate_to');
    expect(byName.get('checker')?.tools.map((t) => t.name)).not.toContain('__delegate_to');
  });
});

// ---- lineage: what a thread's steps may claim (docs/turns.md, "Delegation") ----

describe("the control plane recomputes every thread step's lineage from its opening call", () => {
  // lead -> researcher -> checker -> researcher (the machine refuses that cycle; the control
  // plane checks only the Agents' lists and the depth).
  const chain = directory([
    agent('lead', { delegates: ['researcher'] }),
    agent('researcher', { delegates: ['checker'] }),
    agent('checker', { delegates: ['researcher'] }),
  ]);
  const roster = resolveRoster('lead', chain, NS);
  const opener = (id: string, from: string, to: string, thread = '', depth = 0) =>
    ev('tool_call', {
      turnId: 't1',
      step: 1,
      toolCallId: id,
      toolName: '__delegate_to',
      argsJson: JSON.stringify({ agent: to, task: 'look' }),
      agent: from,
      thread,
      depth,
    });
  /** d1: lead asked researcher; d2: researcher asked checker; d3: checker asked researcher. */
  const opened = [
    opener('d1', 'lead', 'researcher'),
    opener('d2', 'researcher', 'checker', 'd1', 1),
    opener('d3', 'checker', 'researcher', 'd2', 2),
  ];
  const factsAfter = (...steps: ReturnType<typeof ev>[]) => {
    const turn = fold([...dispatch([], 't1', roster), ...steps]).turnsById.get('t1');
    if (turn === undefined) throw new Error('no t1');
    return { turn, conversation: convoOf('lead'), roster: roster.roster };
  };
  const facts = factsAfter(...opened);
  const stepOf = (value: Step['step']): Step => ({
    sequence: 1,
    commitWithResult: false,
    step: value,
  });
  const delegation = (id: string, from: string, to: string, thread = '', depth = 0): Step =>
    stepOf({
      $case: 'toolCall',
      value: payloadCodecs.tool_call.fromPartial({
        turnId: 't1',
        step: 1,
        toolCallId: id,
        toolName: '__delegate_to',
        argsJson: JSON.stringify({ agent: to, task: 'look' }),
        agent: from,
        thread,
        depth,
      }),
    });
  const call = (agentName: string, thread: string, depth: number): Step =>
    stepOf({
      $case: 'modelCall',
      value: payloadCodecs.model_call.fromPartial({
        turnId: 't1',
        step: 1,
        agent: agentName,
        thread,
        depth,
      }),
    });
  const result = (toolCallId: string, thread: string, delegate = ''): Step =>
    stepOf({
      $case: 'toolResult',
      value: payloadCodecs.tool_result.fromPartial({
        turnId: 't1',
        toolCallId,
        content: 'x',
        thread,
        delegate,
      }),
    });

  it('accepts the steps the machine commits: delegations its Agent lists, calls and results on open threads', () => {
    expect(checkStep(facts, delegation('d9', 'lead', 'researcher'))).toBeUndefined();
    expect(checkStep(facts, delegation('d9', 'researcher', 'checker', 'd1', 1))).toBeUndefined();
    expect(checkStep(facts, call('researcher', 'd1', 1))).toBeUndefined();
    expect(checkStep(facts, call('checker', 'd2', 2))).toBeUndefined();
    expect(checkStep(facts, call('researcher', 'd3', 3))).toBeUndefined();
    expect(checkStep(facts, result('d2', 'd1', 'checker'))).toBeUndefined();
    expect(checkStep(facts, result('d1', '', 'researcher'))).toBeUndefined();
  });

  it.each<[string, Step, RegExp]>([
    [
      'a delegation to an agent its Agent does not list',
      delegation('d9', 'lead', 'checker'),
      /lead may delegate only to researcher/,
    ],
    [
      'a delegation nested deeper than the limit',
      delegation('d9', 'researcher', 'checker', 'd3', 3),
      /at depth 4, deeper than 3/,
    ],
    [
      'a model call on a thread no __delegate_to opened',
      call('researcher', 'd7', 1),
      /names thread d7, which no committed __delegate_to call of the turn opened/,
    ],
    [
      "a delegate's call under the asking agent's name (its approval rules and delegates)",
      call('lead', 'd1', 1),
      /model_call of turn t1 by lead is on thread d1, which asked researcher/,
    ],
    [
      'a delegation that claims depth 0 inside a thread, to escape the limit',
      delegation('d9', 'researcher', 'checker', 'd3', 0),
      /claims depth 0 on thread d3, which is 3 deep/,
    ],
    [
      'a step outside any thread that claims a depth',
      call('lead', '', 2),
      /claims depth 2 outside any thread/,
    ],
    [
      'a result closing a thread under another delegate',
      result('d1', '', 'lead'),
      /closes the thread that asked researcher, but names delegate lead/,
    ],
    [
      'a result that names a delegate for a call that opened no thread',
      result('x1', '', 'researcher'),
      /names delegate researcher, but x1 opened no thread/,
    ],
  ])('refuses as forged %s', (_what, step, reason) => {
    expect(checkStep(facts, step)).toMatch(reason);
  });

  it('refuses a step on a thread its result already closed', () => {
    const closed = factsAfter(
      ...opened,
      ev('tool_result', { turnId: 't1', toolCallId: 'd1', content: '40', delegate: 'researcher' }),
    );
    expect(checkStep(closed, call('researcher', 'd1', 1))).toMatch(
      /is on thread d1, which its result already closed/,
    );
  });

  it('still refuses a stranger in a thread by the roster rule', () => {
    expect(checkStep(facts, call('root', 'd1', 1))).toMatch(/names agent root, which is not among/);
  });
});

function convoOf(entry: string) {
  return conversation({ owner: OWNER, agentRef: { name: entry } });
}

function turnOf(turnId: string, roster: RecordedRoster) {
  const turn = fold(dispatch([], turnId, roster)).turnsById.get(turnId);
  if (turn === undefined) throw new Error(`no ${turnId}`);
  return turn;
}

// ---- tools: a step's tool is one its agent was given (plan-agent-tools.ts) ----

describe('the control plane refuses a tool its agent was not given', () => {
  // The lead has the calculator and its own MCP server `ledger`; the researcher, whom it may
  // ask, has lookup; the checker (a delegate of the researcher) has nothing of its own. The
  // Conversation's MCP server `tickets` is every agent's.
  const team = directory([
    agent('lead', {
      delegates: ['researcher'],
      tools: {
        builtin: ['calculator'],
        mcpServers: [{ name: 'ledger', transport: 'http', url: 'http://ledger.tools:8080/mcp' }],
      },
    }),
    agent('researcher', { delegates: ['checker'], tools: { builtin: ['lookup'] } }),
    agent('checker'),
  ]);
  const roster = resolveRoster('lead', team, NS);
  const convoWithTickets = conversation({
    owner: OWNER,
    agentRef: { name: 'lead' },
    tools: { mcpServers: [{ name: 'tickets', transport: 'http', url: 'http://tickets:8080/mcp' }] },
  });
  const config = (agentName: string, tools: string[]) => {
    const configJson = JSON.stringify({
      agent: agentName,
      tools: tools.map((name) => ({ name })),
      version: 1,
    });
    return { turnId: 't1', sha256: createHash('sha256').update(configJson).digest(), configJson };
  };
  /** What the real harness records: each agent's configuration, offering what it was given. */
  const LEAD = ['calculator', '__ask_user', '__delegate_to', 'tickets/search', 'ledger/balance'];
  const RESEARCHER = ['lookup', '__ask_user', '__delegate_to', 'tickets/search', 'wiki/read'];
  /** A forged one: the lead's MCP tool in the researcher's configuration. */
  const FORGED = [...RESEARCHER, 'ledger/refund'];
  const journal = [
    ...dispatch([], 't1', roster),
    ev('agent_config', config('lead', LEAD)),
    ev('tool_call', {
      turnId: 't1',
      step: 1,
      toolCallId: 'd1',
      toolName: '__delegate_to',
      argsJson: JSON.stringify({ agent: 'researcher', task: 'look' }),
      agent: 'lead',
    }),
    ev('agent_config', config('researcher', RESEARCHER)),
  ];
  const view = fold(journal);
  const turn = view.turnsById.get('t1');
  if (turn === undefined) throw new Error('no t1');
  const facts = {
    turn,
    conversation: convoWithTickets,
    roster: roster.roster,
    agentConfigs: view.agentConfigs,
  };
  const stepOf = (value: Step['step']): Step => ({
    sequence: 1,
    commitWithResult: false,
    step: value,
  });
  const toolCall = (agentName: string, toolName: string): Step =>
    stepOf({
      $case: 'toolCall',
      value: payloadCodecs.tool_call.fromPartial({
        turnId: 't1',
        step: 1,
        toolCallId: 'c1',
        toolName,
        argsJson: '{}',
        agent: agentName,
        ...(agentName === 'lead' ? {} : { thread: 'd1', depth: 1 }),
      }),
    });
  const configStep = (agentName: string, tools: string[]): Step =>
    stepOf({ $case: 'agentConfig', value: config(agentName, tools) });

  it("keeps each agent's newest configuration in the view", () => {
    expect([...view.agentConfigs].map(([name, c]) => [name, c.toolNames])).toEqual([
      ['lead', LEAD],
      ['researcher', RESEARCHER],
    ]);
  });

  it.each<[string, Step]>([
    ["the lead's builtin", toolCall('lead', 'calculator')],
    ["a tool of the lead's own MCP server", toolCall('lead', 'ledger/balance')],
    ["the researcher's builtin, on its thread", toolCall('researcher', 'lookup')],
    [
      "a tool of the Conversation's MCP server, by a delegate",
      toolCall('researcher', 'tickets/search'),
    ],
    ['configurations that offer what the dispatch gave', configStep('researcher', RESEARCHER)],
    [
      "the lead's, with any tool its own server lists",
      configStep('lead', [...LEAD, 'ledger/refund']),
    ],
    [
      "a delegate's, with a server of the harness's own (its template's, which only it lists)",
      configStep('researcher', [...RESEARCHER, 'wiki/read']),
    ],
    ["a delegate's call to such a server's tool", toolCall('researcher', 'wiki/read')],
  ])('accepts %s', (_what, step) => {
    expect(checkStep(facts, step)).toBeUndefined();
  });

  it.each<[string, Step, string]>([
    [
      'a delegate calling a tool only the lead has (its MCP server)',
      toolCall('researcher', 'ledger/balance'),
      'tool_call c1 of turn t1 by researcher runs ledger/balance, which agent researcher was not offered (its agent_config at position 5 offers lookup, __ask_user, __delegate_to, tickets/search, wiki/read)',
    ],
    [
      'a delegate calling a builtin only the lead was granted',
      toolCall('researcher', 'calculator'),
      'tool_call c1 of turn t1 by researcher runs calculator, which agent researcher was not offered',
    ],
    [
      'a tool of no agent',
      toolCall('lead', 'shell'),
      'tool_call c1 of turn t1 by lead runs shell, which agent lead was not offered',
    ],
    [
      'a tool of an MCP server no agent has',
      toolCall('lead', 'payments/send'),
      'tool_call c1 of turn t1 by lead runs payments/send, which agent lead was not offered',
    ],
    [
      'a configuration granting a builtin the Agent does not list',
      configStep('checker', ['__ask_user', 'calculator']),
      'agent_config of turn t1 for agent checker offers calculator, which its dispatch did not give it',
    ],
    [
      'a configuration for an agent the turn was not given',
      configStep('root', ['__ask_user']),
      'agent_config of turn t1 for agent root names an agent the turn was not given',
    ],
  ])('refuses as forged %s', (_what, step, reason) => {
    expect(checkStep(facts, step)).toContain(reason);
  });

  it("refuses a delegate's call to the lead's MCP tool even when a forged configuration offers it", () => {
    // A configuration names MCP tools the control plane cannot list, so it is committed;
    // the call is refused by whose server it is.
    expect(checkStep(facts, configStep('researcher', FORGED))).toBeUndefined();
    const forged = fold([...journal, ev('agent_config', config('researcher', FORGED))]);
    const after = { ...facts, agentConfigs: forged.agentConfigs };
    expect(checkStep(after, toolCall('researcher', 'ledger/refund'))).toBe(
      "tool_call c1 of turn t1 by researcher runs ledger/refund, a tool of agent lead's own MCP server, which researcher was not given",
    );
    expect(checkStep(after, toolCall('lead', 'ledger/balance'))).toBeUndefined();
  });

  it('refuses a call by an agent with no committed configuration once the journal records them', () => {
    const checker = stepOf({
      $case: 'toolCall',
      value: payloadCodecs.tool_call.fromPartial({
        turnId: 't1',
        step: 1,
        toolCallId: 'c1',
        toolName: '__ask_user',
        argsJson: '{}',
        agent: 'checker',
      }),
    });
    expect(checkStep(facts, checker)).toBe(
      'tool_call c1 of turn t1 by checker runs __ask_user, but no agent_config of agent checker is committed, so it was offered no tool',
    );
  });

  it('checks an inline agent by its spec.tools', () => {
    const inline = conversation({ owner: OWNER, tools: { builtin: ['calculator'] } });
    const inlineView = fold([
      ...dispatch([], 't1', roster),
      ev('agent_config', config('', ['calculator', '__ask_user'])),
    ]);
    const inlineTurn = inlineView.turnsById.get('t1');
    if (inlineTurn === undefined) throw new Error('no t1');
    const inlineFacts = {
      turn: inlineTurn,
      conversation: inline,
      agentConfigs: inlineView.agentConfigs,
    };
    const byInline = (toolName: string) =>
      stepOf({
        $case: 'toolCall',
        value: payloadCodecs.tool_call.fromPartial({
          turnId: 't1',
          toolCallId: 'c1',
          toolName,
          argsJson: '{}',
        }),
      });
    expect(checkStep(inlineFacts, byInline('calculator'))).toBeUndefined();
    expect(checkStep(inlineFacts, byInline('lookup'))).toContain(
      'runs lookup, which agent (unnamed) was not offered',
    );
    expect(checkStep(inlineFacts, configStep('', ['calculator', 'lookup']))).toContain(
      'offers lookup, which its dispatch did not give it',
    );
  });

  it('does not check a journal that records no configuration (a harness from before)', () => {
    const unrecorded = { ...facts, agentConfigs: fold(dispatch([], 't1', roster)).agentConfigs };
    expect(unrecorded.agentConfigs.size).toBe(0);
    expect(checkStep(unrecorded, toolCall('lead', 'shell'))).toBeUndefined();
  });
});
