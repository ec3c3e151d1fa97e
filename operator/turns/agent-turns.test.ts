/**
 * A Conversation that names an Agent, end to end (docs/turns.md, "Agents" and "Handoffs"):
 * the real coordinator over in-memory ports (test/support/real-turns.ts), the real harness
 * server, and each agent's model called by the control plane's relay through the real
 * Anthropic SDK against the local Messages API. The triage Agent hands the turn to billing,
 * which answers within the same turn; the next turn starts with billing; an Agent changed
 * after a turn began affects only later turns.
 */
import { afterEach, describe, expect, it } from '@jest/globals';
import { crewAgent, startAgentTurns, type AgentTurns } from '../../test/support/agent-turns';
import { lastUserText, panelCrew, panelResponder } from '../../test/support/crew-replies';
import {
  systemOf,
  type RecordedRequest,
  type Responder,
  type ScriptedReply,
} from '../../test/support/messages-api-server';
import type { Agent } from '../api/v1alpha1/agent-resource';

let closers: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const close of closers.reverse()) await close();
  closers = [];
});

const agent = crewAgent;

/** Triage hands every first question to billing; billing answers. */
function crewResponder(request: RecordedRequest): ScriptedReply {
  const system = systemOf(request);
  if (system.includes('You are triage.')) {
    return {
      kind: 'message',
      content: [
        {
          type: 'tool_use',
          id: 'toolu_handoff_1',
          name: '__handoff_to',
          input: { agent: 'billing', reason: 'a refund' },
        },
      ],
    };
  }
  const prompt = system.includes('Be terse.') ? 'terse billing' : 'billing';
  return { kind: 'message', content: [{ type: 'text', text: `${prompt} here: refunded` }] };
}

/** The shared Agent-turns rig (test/support/agent-turns.ts), closed after each test. */
async function crewTurns(
  agents: Map<string, Agent>,
  entry = 'triage',
  respond: Responder = crewResponder,
): Promise<AgentTurns> {
  const rig = await startAgentTurns({ agents, entry, respond });
  closers.push(() => rig.close());
  return rig;
}

describe('a Conversation that names an Agent', () => {
  const triage = agent('triage', { description: 'Sorts requests.', handoffs: ['billing'] });
  const billing = agent('billing', { description: 'Refunds.', handoffs: ['triage'] });

  it('hands the turn to billing, which answers under the same turn id; the next turn starts with billing', async () => {
    const agents = new Map([
      ['triage', triage],
      ['billing', billing],
    ]);
    const { api, turns, uid, post, events } = await crewTurns(agents);
    const first = await post('I was charged twice');
    expect(first).toMatchObject({ status: 'complete', reply: 'billing here: refunded' });
    const [handoff] = await events('agent_handoff');
    expect(handoff).toMatchObject({
      turnId: first.turnId,
      fromAgent: 'triage',
      toAgent: 'billing',
      reason: 'a refund',
    });
    expect((await events('model_call')).map((c) => c.agent)).toEqual(['triage', 'billing']);
    // The roster is recorded once, and the dispatch names it.
    const [roster] = await events('agent_roster');
    expect(JSON.parse(roster?.rosterJson ?? '{}')).toMatchObject({ entry: 'triage' });
    const [dispatch] = await events('turn_dispatched');
    expect(
      Buffer.from(dispatch?.agentRosterSha256 ?? []).equals(Buffer.from(roster?.sha256 ?? [])),
    ).toBe(true);
    // Both agents' calls went through the relay to the ModelConfig's endpoint.
    expect(api.requests.map((r) => systemOf(r).split('\n')[0])).toEqual([
      'You are triage.',
      'You are billing.',
    ]);
    expect(turns.conversations.byUid(uid)?.status?.agent).toBe('billing');

    const second = await post('and the invoice?');
    expect(second).toMatchObject({ status: 'complete', reply: 'billing here: refunded' });
    expect(systemOf(api.requests[2]!)).toContain('You are billing.');
    expect(await events('agent_roster')).toHaveLength(1);
  });

  it('keeps a turn on the Agents it began with; a changed Agent takes the next turn', async () => {
    const agents = new Map([
      ['triage', triage],
      ['billing', billing],
    ]);
    const { api, post, events } = await crewTurns(agents);
    // billing changes while triage is still asking its model: the turn keeps the old billing.
    api.setResponder((request) => {
      agents.set('billing', agent('billing', { ...billing.spec, systemPrompt: 'Be terse.' }));
      return crewResponder(request);
    });
    expect(await post('first')).toMatchObject({ reply: 'billing here: refunded' });
    api.setResponder(crewResponder);
    expect(await post('second')).toMatchObject({ reply: 'terse billing here: refunded' });
    expect(await events('agent_roster')).toHaveLength(2);
  });

  it('refuses a message, naming what is missing, while the entry Agent does not exist', async () => {
    const { post, events } = await crewTurns(new Map([['billing', billing]]));
    await expect(post('hello')).rejects.toThrow(
      'spec.agentRef names Agent triage, which does not exist in namespace',
    );
    expect(await events('message_received')).toHaveLength(0);
  });
});

describe('an Agent that delegates (docs/turns.md, "Delegation")', () => {
  it('asks two agents side by side on threads of their own and answers from their results, in one turn', async () => {
    const { api, turns, uid, post, events } = await crewTurns(
      panelCrew(),
      'lead',
      panelResponder(),
    );
    const live: { thread?: string; text: string }[] = [];
    const unsubscribe = turns.coordinator.onTextDelta(uid, (delta) => live.push(delta));
    const answer = await post('Was I charged twice in March?');
    unsubscribe();
    // Each delegate's text streams live under its thread, the lead's under none.
    const liveText = (thread: string) =>
      live
        .filter((d) => (d.thread ?? '') === thread)
        .map((d) => d.text)
        .join('');
    expect(liveText('toolu_ask_researcher')).toBe('researcher says: 29 chars');
    expect(liveText('toolu_ask_checker')).toBe('checker says: 33 chars');
    expect(liveText('')).toContain('lead: ');
    expect(answer.status).toBe('complete');
    // Each delegate was told its task alone, under its own prompt, through the relay; both
    // were asked before either answered (their threads run side by side).
    const asked = api.requests.map((r) => [systemOf(r).split('\n')[0], lastUserText(r)]);
    expect(asked[0]).toEqual(['You are lead.', 'Was I charged twice in March?']);
    expect(asked.slice(1, 3).sort()).toEqual([
      ['You are checker.', 'Was the March invoice paid twice?'],
      ['You are researcher.', 'How much was billed in March?'],
    ]);
    expect(asked.slice(3)).toEqual([
      ['You are lead.', expect.stringContaining('researcher says: 29 chars')],
    ]);
    expect(answer.reply).toContain('checker says: 33 chars');
    expect(answer.reply).not.toContain('asked alone');
    // The journal holds the lineage: the intent of each thread, its steps, its answer.
    const calls = await events('model_call');
    const lineage = calls.map((c) => [c.agent, c.thread, c.depth, c.step]);
    expect(lineage[0]).toEqual(['lead', '', 0, 1]);
    expect(lineage.slice(1, 3).sort()).toEqual([
      ['checker', 'toolu_ask_checker', 1, 1],
      ['researcher', 'toolu_ask_researcher', 1, 1],
    ]);
    expect(lineage.slice(3)).toEqual([['lead', '', 0, 2]]);
    const intents = (await events('tool_call')).filter((c) => c.toolName === '__delegate_to');
    expect(intents.map((c) => [c.toolCallId, c.agent])).toEqual([
      ['toolu_ask_researcher', 'lead'],
      ['toolu_ask_checker', 'lead'],
    ]);
    const results = await events('tool_result');
    expect(results.map((r) => [r.toolCallId, r.content]).sort()).toEqual([
      ['toolu_ask_checker', 'checker says: 33 chars'],
      ['toolu_ask_researcher', 'researcher says: 29 chars'],
    ]);
    // Only the lead answers the user; the conversation stays with it.
    expect(turns.conversations.byUid(uid)?.status?.agent).toBe('lead');
  });
});
