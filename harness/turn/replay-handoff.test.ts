import { describe, expect, it } from '@jest/globals';
import { encodePayload, EventKind, payloadCodecs } from '../../common/event-kinds';
import type { OutputBlock } from '../../common/model/model-port';
import { requestIds } from '../../common/request-ids';
import { nodeEd25519Signer, nodeEd25519Verifier } from '../crypto/node-ed25519';
import { decodePayload } from '../../common/event-kinds';
import type { ReplayEntry } from './journal-turns';
import { delegateToolFor, handoffTool } from './reserved-tools';
import { replayJournal } from './replay';
import { whatIf } from './what-if';
import { stepEvent } from './replay-steps';
import { createTurnMachine, type TurnEvent, type TurnInput, type TurnState } from './turn-machine';

/**
 * Replay of a turn that moved between agents (docs/turns.md, "Handoffs"): the journal is
 * what the real machine committed, and replay rebuilds every agent from the configurations
 * the turn recorded, with no model and no tool.
 */

const model = { model: 'm', maxTokens: 100 };
const lookup = {
  name: 'lookup',
  description: 'lookup',
  inputSchema: { type: 'object' },
  effect: 'pure' as const,
  needsApproval: false,
};
const input: TurnInput = {
  turnId: 'turn-1',
  history: [],
  userMessage: 'my invoice is wrong',
  system: 'You are triage.',
  tools: [lookup, handoffTool],
  model,
  agentName: 'triage',
  handoffs: ['billing', 'legal'],
  agents: [
    {
      name: 'billing',
      system: 'You are billing.',
      tools: [lookup, handoffTool],
      model,
      handoffs: ['legal'],
    },
    { name: 'legal', system: 'You are legal.', tools: [], model, handoffs: [] },
  ],
  budget: { deployment: 5 },
  recordedSteps: [],
  approvalAnswers: [],
  questionAnswers: [],
};

const handoffTo = (id: string, agent: string): OutputBlock => ({
  type: 'tool_use',
  id,
  name: '__handoff_to',
  input: { agent, reason: 'an invoice' },
});
const text = (value: string): OutputBlock => ({ type: 'text', text: value });
const delegateTo = (id: string, agent: string, task: string): OutputBlock => ({
  type: 'tool_use',
  id,
  name: '__delegate_to',
  input: { agent, task },
});

/** A model reply: to the oldest call asked, or to the call of a delegation thread. */
type Reply = OutputBlock[] | { readonly thread: string; readonly content: OutputBlock[] };

/** The journal of one turn whose model replies are `replies`, as the machine commits it. */
function journalOf(...replies: Reply[]): ReplayEntry[] {
  return journalAfter([], input, ...replies);
}

/** `earlier` followed by one turn run from `start` (its history must be what replay gives it). */
function journalAfter(
  earlier: readonly ReplayEntry[],
  start: TurnInput,
  ...replies: Reply[]
): ReplayEntry[] {
  const entries: ReplayEntry[] = [...earlier];
  const add = (kind: EventKind, payload: Uint8Array): void => {
    entries.push({ position: entries.length, kind, payload });
  };
  add(
    EventKind.MessageReceived,
    encodePayload(EventKind.MessageReceived, {
      turnId: start.turnId,
      idempotencyKey: start.turnId,
      text: start.userMessage,
      receivedAtMs: 1,
    }),
  );
  add(
    EventKind.TurnDispatched,
    encodePayload(
      EventKind.TurnDispatched,
      payloadCodecs.turn_dispatched.fromPartial({ turnId: start.turnId, attempt: 1 }),
    ),
  );
  const machine = createTurnMachine({
    ids: requestIds,
    verifier: nodeEd25519Verifier,
    approvalPublicKey: new Uint8Array(32),
  });
  let state: TurnState = machine.initialState;
  let event: TurnEvent | undefined = { type: 'turn_started', input: start };
  const pending = [...replies];
  /** The threads whose model calls wait, in the order asked ('' for the turn's own). */
  const asked: string[] = [];
  /** Tool calls running: each finishes before the next model reply. */
  const tools: string[] = [];
  while (event !== undefined) {
    const result = machine.step(state, event);
    state = result.state;
    event = undefined;
    for (const effect of result.effects) {
      if (effect.type === 'commit_step') {
        const event = stepEvent(effect.step);
        add(event.kind, event.payload());
      }
      if (effect.type === 'call_model') asked.push(effect.thread ?? '');
      if (effect.type === 'call_tool') tools.push(effect.call.toolCallId);
      if (effect.type === 'finish') {
        add(
          EventKind.TurnComplete,
          encodePayload(EventKind.TurnComplete, {
            turnId: start.turnId,
            text: effect.text,
            steps: effect.steps,
            completedAtMs: 3,
            fallback: effect.fallback,
          }),
        );
        asked.length = 0;
        tools.length = 0;
      }
    }
    const tool = tools.shift();
    if (tool !== undefined) {
      event = {
        type: 'tool_finished',
        toolCallId: tool,
        outcome: { content: '40', isError: false },
      };
      continue;
    }
    if (asked.length === 0) break;
    const reply = pending.shift() ?? [text('done')];
    const [content, thread] = Array.isArray(reply)
      ? [reply, asked[0]!]
      : [reply.content, reply.thread];
    if (!asked.includes(thread)) throw new Error(`no model call of thread ${thread} waits`);
    asked.splice(asked.indexOf(thread), 1);
    event = {
      type: 'model_responded',
      response: {
        model: 'm',
        content,
        stopReason: content.some((b) => b.type === 'tool_use') ? 'tool_use' : 'end_turn',
        usage: { inputTokens: 1, outputTokens: 1 },
      },
      startedAtMs: 1,
      finishedAtMs: 2,
      ...(thread === '' ? {} : { thread }),
    };
  }
  return entries;
}

const replay = (entries: readonly ReplayEntry[]) =>
  replayJournal(entries, {
    ids: requestIds,
    verifier: nodeEd25519Verifier,
    approvalPublicKey: new Uint8Array(32),
  });

describe('replay of a turn handed from one agent to another', () => {
  const moved = journalOf([handoffTo('h1', 'billing')], [text('Your invoice is fixed.')]);

  it('records the handoff as a step and replays the turn ok', () => {
    expect(moved.map((e) => e.kind)).toEqual([
      'message_received',
      'turn_dispatched',
      'agent_config',
      'model_call',
      'tool_result',
      'agent_handoff',
      'agent_config',
      'model_call',
      'turn_complete',
    ]);
    const result = replay(moved);
    expect(result.divergence).toBeUndefined();
    expect(result.turns.map((t) => [t.status, t.mode, t.ok])).toEqual([['complete', 'full', true]]);
  });

  it('finds a handoff rewritten to another agent', () => {
    const tampered = moved.map((e) => {
      if (e.kind !== 'agent_handoff') return e;
      const payload = decodePayload('agent_handoff', e.payload);
      return { ...e, payload: encodePayload('agent_handoff', { ...payload, toAgent: 'legal' }) };
    });
    const result = replay(tampered);
    expect(result.ok).toBe(false);
    expect(result.divergence?.expected).toContain('"toAgent":"billing"');
    expect(result.divergence?.found).toContain('agent_handoff');
  });

  it('finds a target answer recorded as another agent', () => {
    let seen = 0;
    const tampered = moved.map((e) => {
      if (e.kind !== 'model_call' || seen++ !== 1) return e;
      const payload = decodePayload('model_call', e.payload);
      return { ...e, payload: encodePayload('model_call', { ...payload, agent: 'triage' }) };
    });
    const result = replay(tampered);
    expect(result.ok).toBe(false);
    expect(result.divergence?.expected).toContain('"agent":"billing"');
  });

  it('replays a refused handoff: the refusal is decided again from the recorded configuration', () => {
    const refused = journalOf([handoffTo('h1', 'sales')], [text('I will answer myself.')]);
    expect(refused.filter((e) => e.kind === 'agent_handoff')).toEqual([]);
    const result = replay(refused);
    expect(result.divergence).toBeUndefined();
    expect(result.ok).toBe(true);
  });

  it('finds a refusal rewritten into an accepted handoff', () => {
    const refused = journalOf([handoffTo('h1', 'sales')], [text('I will answer myself.')]);
    const tampered = refused.map((e) => {
      if (e.kind !== 'tool_result') return e;
      const payload = decodePayload('tool_result', e.payload);
      return {
        ...e,
        payload: encodePayload('tool_result', { ...payload, content: 'ok', isError: false }),
      };
    });
    expect(replay(tampered).ok).toBe(false);
  });
});

describe('what-if changes a handoff target', () => {
  // triage -> billing -> legal: every agent's configuration is in the journal.
  const chain = journalOf(
    [handoffTo('h1', 'billing')],
    [handoffTo('h2', 'legal')],
    [text('Legal says no.')],
  );
  const run = (toolCallId: string, agent: string) =>
    whatIf(
      chain,
      { kind: 'handoff', toolCallId, agent },
      {
        ids: requestIds,
        verifier: nodeEd25519Verifier,
        approvalPublicKey: new Uint8Array(32),
        resigner: nodeEd25519Signer(new Uint8Array(32).fill(9)),
      },
    );

  it('moves the turn to another recorded agent: the run departs at the handoff', () => {
    expect(replay(chain).ok).toBe(true);
    const report = run('h1', 'legal');
    // The first departure is the handing-off call's result, which names the new target.
    expect(report.divergence?.expected).toContain('Handed off to legal by triage.');
    expect(report.divergence?.found).toContain('Handed off to billing by triage.');
  });

  it('shows the refusal the changed target would have met', () => {
    const report = run('h1', 'triage');
    expect(report.divergence?.expected).toContain('you are triage. Answer the user yourself.');
  });

  it('says so when no handoff has that tool call id', () => {
    expect(() => run('nope', 'legal')).toThrow(
      /no model call asks __handoff_to with tool call id nope/u,
    );
  });

  it('reaches an agent whose configuration only an earlier turn recorded', () => {
    // turn-1 went triage -> legal; turn-2 went triage -> billing. What if turn-2 had gone to legal?
    const first = journalOf([handoffTo('h1', 'legal')], [text('Legal says no.')]);
    const second = journalAfter(
      first,
      {
        ...input,
        turnId: 'turn-2',
        userMessage: 'and my other invoice?',
        history: [
          { role: 'user', content: [{ type: 'text', text: input.userMessage }] },
          { role: 'assistant', content: [{ type: 'text', text: 'Legal says no.' }] },
        ],
        recordedConfigSha256: newestConfig(first),
      },
      [handoffTo('h9', 'billing')],
      [text('Billing fixed it.')],
    );
    expect(replay(second).ok).toBe(true);
    const report = whatIf(
      second,
      { kind: 'handoff', toolCallId: 'h9', agent: 'legal' },
      {
        ids: requestIds,
        verifier: nodeEd25519Verifier,
        approvalPublicKey: new Uint8Array(32),
        resigner: nodeEd25519Signer(new Uint8Array(32).fill(9)),
      },
    );
    expect(report.divergence).toMatchObject({ turnId: 'turn-2' });
    expect(report.divergence?.expected).toContain('Handed off to legal by triage.');
  });
});

function newestConfig(entries: readonly ReplayEntry[]): string {
  const last = entries.filter((e) => e.kind === 'agent_config').at(-1);
  if (last === undefined) throw new Error('no agent_config');
  return Buffer.from(decodePayload('agent_config', last.payload).sha256).toString('hex');
}

describe('replay of a turn that delegated a task (docs/turns.md, "Delegation")', () => {
  const lead: TurnInput = {
    ...input,
    agentName: 'lead',
    system: 'You lead.',
    handoffs: [],
    delegates: ['billing'],
    tools: [lookup, delegateToolFor([{ name: 'billing', description: 'Bills.' }])],
    agents: [{ name: 'billing', system: 'You are billing.', tools: [lookup], model }],
  };
  const delegated = journalAfter(
    [],
    lead,
    [delegateTo('d1', 'billing', 'what was billed?')],
    [text('40')],
    [text('It was 40.')],
  );

  it("replays the thread from the journal alone: the delegate's steps, its answer, the lead's", () => {
    expect(delegated.map((e) => e.kind)).toEqual([
      'message_received',
      'turn_dispatched',
      'agent_config',
      'model_call',
      'tool_call',
      'agent_config',
      'model_call',
      'tool_result',
      'agent_config',
      'model_call',
      'turn_complete',
    ]);
    const thread = decodePayload('model_call', delegated[6]!.payload);
    expect(thread).toMatchObject({ agent: 'billing', thread: 'd1', depth: 1, step: 1 });
    const result = replay(delegated);
    expect(result.divergence).toBeUndefined();
    expect(result.turns.map((t) => [t.status, t.mode, t.ok])).toEqual([['complete', 'full', true]]);
  });

  it.each<[string, (e: ReplayEntry, i: number) => ReplayEntry]>([
    [
      "the delegate's answer rewritten",
      (e) =>
        e.kind === 'tool_result'
          ? {
              ...e,
              payload: encodePayload('tool_result', {
                ...decodePayload('tool_result', e.payload),
                content: '4,000',
              }),
            }
          : e,
    ],
    [
      "the delegate's step moved out of its thread",
      (e, i) =>
        i === 6
          ? {
              ...e,
              payload: encodePayload('model_call', {
                ...decodePayload('model_call', e.payload),
                thread: '',
                depth: 0,
              }),
            }
          : e,
    ],
  ])('finds %s', (_, tamper) => {
    const result = replay(delegated.map(tamper));
    expect(result.ok).toBe(false);
    expect(result.divergence).toBeDefined();
  });
});

describe('replay of a panel whose threads answered out of order', () => {
  const lead: TurnInput = {
    ...input,
    agentName: 'lead',
    system: 'You lead.',
    handoffs: [],
    delegates: ['billing', 'legal'],
    tools: [
      delegateToolFor([
        { name: 'billing', description: 'Bills.' },
        { name: 'legal', description: 'Advises.' },
      ]),
    ],
    agents: [
      { name: 'billing', system: 'You are billing.', tools: [lookup], model },
      { name: 'legal', system: 'You are legal.', tools: [], model },
    ],
  };
  const ask = (id: string, agent: string) =>
    delegateTo(id, agent, `${agent}: is the invoice right?`);
  const panel = journalAfter(
    [],
    lead,
    [ask('d1', 'billing'), ask('d2', 'legal')],
    // Billing looks something up while legal answers first; then billing answers.
    { thread: 'd1', content: [{ type: 'tool_use', id: 'l1', name: 'lookup', input: {} }] },
    { thread: 'd2', content: [text('Legally fine.')] },
    { thread: 'd1', content: [text('Billed 40, correct.')] },
    [text('Both say it is right.')],
  );
  const threadsOf = (entries: readonly ReplayEntry[]) =>
    entries.flatMap((e) =>
      e.kind === 'model_call' ? [decodePayload('model_call', e.payload).thread || 'lead'] : [],
    );

  it('replays the journal alone, answering each thread in the order the journal holds', () => {
    // The journal interleaves the threads: d1 asked its tool before d2 answered.
    expect(threadsOf(panel)).toEqual(['lead', 'd1', 'd2', 'd1', 'lead']);
    const result = replay(panel);
    expect(result.divergence).toBeUndefined();
    expect(result.turns.map((t) => [t.status, t.mode, t.ok])).toEqual([['complete', 'full', true]]);
  });

  it.each<[string, (entries: ReplayEntry[]) => ReplayEntry[]]>([
    [
      "legal's answer moved onto billing's thread",
      (entries) =>
        entries.map((e) => {
          if (e.kind !== 'model_call') return e;
          const call = decodePayload('model_call', e.payload);
          return call.thread === 'd2'
            ? { ...e, payload: encodePayload('model_call', { ...call, thread: 'd1' }) }
            : e;
        }),
    ],
    [
      "the two delegates' answers swapped",
      (entries) => {
        const results = entries.filter(
          (e) => e.kind === 'tool_result' && ['d1', 'd2'].includes(idOf(e)),
        );
        const [first, second] = results;
        return entries.map((e) =>
          e === first
            ? { ...second!, position: e.position }
            : e === second
              ? { ...first!, position: e.position }
              : e,
        );
      },
    ],
  ])('finds %s', (_, tamper) => {
    const result = replay(tamper([...panel]));
    expect(result.ok).toBe(false);
    expect(result.divergence).toBeDefined();
  });
});

function idOf(entry: ReplayEntry): string {
  return decodePayload('tool_result', entry.payload).toolCallId;
}

describe('what-if changes a delegation target (docs/replay.md, "What-if")', () => {
  const options = {
    ids: requestIds,
    verifier: nodeEd25519Verifier,
    approvalPublicKey: new Uint8Array(32),
    resigner: nodeEd25519Signer(new Uint8Array(32).fill(9)),
  };
  // The lead may ask billing, legal and audit; audit never ran, so no configuration of it is
  // recorded. A panel asks billing (d1) and legal (d2).
  const lead: TurnInput = {
    ...input,
    agentName: 'lead',
    system: 'You lead.',
    handoffs: [],
    delegates: ['billing', 'legal', 'audit'],
    tools: [
      delegateToolFor([
        { name: 'billing', description: 'Bills.' },
        { name: 'legal', description: 'Advises.' },
        { name: 'audit', description: 'Audits.' },
      ]),
    ],
    agents: [
      { name: 'billing', system: 'You are billing.', tools: [], model },
      { name: 'legal', system: 'You are legal.', tools: [], model, delegates: ['billing'] },
      { name: 'audit', system: 'You are audit.', tools: [], model },
    ],
  };
  const ask = (id: string, agent: string) => delegateTo(id, agent, 'is the invoice right?');
  const panel = journalAfter(
    [],
    lead,
    [ask('d1', 'billing'), ask('d2', 'legal')],
    { thread: 'd1', content: [text('Billed 40, correct.')] },
    { thread: 'd2', content: [text('Legally fine.')] },
    [text('Both say it is right.')],
  );
  const intentArgs = (position: number): string =>
    decodePayload('tool_call', panel.find((e) => e.position === position)!.payload).argsJson;

  it('replays the panel ok before any change', () => {
    expect(replay(panel).ok).toBe(true);
  });

  it.each([
    ['a panel member asked of another agent it may delegate to', 'd2', 'billing'],
    ['the first of a panel asked of the other member', 'd1', 'legal'],
  ])('%s: the run departs at that thread’s intent', (_, toolCallId, agent) => {
    const report = whatIf(panel, { kind: 'delegate', toolCallId, agent }, options);
    const d = report.divergence;
    expect(d).toMatchObject({ turnId: 'turn-1' });
    // The machine opens the thread under the new agent; the journal holds the old one.
    expect(d?.expected).toContain(`"toolCallId":"${toolCallId}"`);
    expect(d?.expected).toContain(`\\"agent\\":\\"${agent}\\"`);
    expect(panel.find((e) => e.position === d?.position)?.kind).toBe('tool_call');
    expect(JSON.parse(intentArgs(d?.position ?? -1))).toMatchObject({
      agent: toolCallId === 'd1' ? 'billing' : 'legal',
    });
    expect(report.needsModel).toBe(false);
    expect(report.recordedAfter.map((o) => o.type)).toContain('answer');
  });

  it('alters nothing when the call is given the agent it asked', () => {
    const report = whatIf(panel, { kind: 'delegate', toolCallId: 'd2', agent: 'legal' }, options);
    expect(report.divergence).toBeUndefined();
  });

  it.each([
    [
      'an agent the asker may not delegate to',
      'd1',
      'sales',
      'delegate@d1=sales: agent lead may delegate only to billing, legal, audit (its recorded configuration), so the call could only be refused; pick one of billing, legal',
    ],
    [
      'the asking agent itself',
      'd2',
      'lead',
      'delegate@d2=lead: agent lead may delegate only to billing, legal, audit',
    ],
    [
      'an allowed agent that never ran, so no configuration of it is recorded',
      'd2',
      'audit',
      'delegate@d2=audit: the journal records no configuration of agent audit (it never ran in this conversation), so replay cannot run it; pick one of billing, legal',
    ],
    [
      'a call id no __delegate_to has',
      'nope',
      'billing',
      'no model call asks __delegate_to with tool call id nope',
    ],
  ])('refuses %s, naming what to pick', (_, toolCallId, agent, message) => {
    expect(() => whatIf(panel, { kind: 'delegate', toolCallId, agent }, options)).toThrow(message);
  });

  it('changes a delegation with delegate@ only: handoff@ names no __delegate_to call', () => {
    expect(() =>
      whatIf(panel, { kind: 'handoff', toolCallId: 'd1', agent: 'legal' }, options),
    ).toThrow('no model call asks __handoff_to with tool call id d1');
  });
});
