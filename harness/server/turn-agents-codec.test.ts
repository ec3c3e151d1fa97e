import { describe, expect, it } from '@jest/globals';
import { ToolHost, TurnStart, type ToolSpec } from '../../proto/gen/polychrome/harness/v1/harness';
import { askUserTool, handoffTool, ReservedTool } from '../turn/reserved-tools';
import type { TurnTool } from '../turn/turn-records';
import { turnRequestFromProto } from './turn-start-codec';

/** The harness's own tools by name, as a server's catalog gives them. */
const catalog = (name: string): TurnTool | undefined =>
  name === ReservedTool.HandoffTo
    ? handoffTool
    : name === ReservedTool.AskUser
      ? askUserTool
      : undefined;

const byReference = (name: string, needsApproval = false): ToolSpec => ({
  name,
  description: '',
  inputSchemaJson: '',
  effect: 0,
  needsApproval,
  approvalReason: '',
  host: ToolHost.TOOL_HOST_HARNESS,
});

/** A start as the control plane sends it for a triage Agent that hands off to billing. */
function start(over: Partial<TurnStart> = {}): TurnStart {
  const triageTools = [byReference('__ask_user'), byReference('__handoff_to')];
  return TurnStart.fromPartial({
    conversationId: 'c',
    turnId: 't1',
    attempt: 1,
    userMessage: 'I was charged twice',
    agent: { model: 'm', systemPrompt: 'You are triage.', name: 'triage' },
    tools: triageTools,
    memoryBudgetBytes: 0,
    agents: [
      {
        name: 'triage',
        description: 'Sorts out what the user needs.',
        settings: { model: 'm', systemPrompt: 'You are triage.', name: 'triage' },
        tools: triageTools,
        handoffs: ['billing'],
      },
      {
        name: 'billing',
        description: 'Refunds and invoices.',
        settings: { model: 'm', systemPrompt: 'You are billing.', name: 'billing' },
        tools: [byReference('__ask_user'), byReference('lookup-invoice', true)],
        handoffs: [],
      },
    ],
    ...over,
  });
}

const deferred = (name: string): boolean => name === 'lookup-invoice';

describe('TurnStart.agents: the roster the machine runs', () => {
  it('gives the machine the answering agent, its handoffs and every other agent', () => {
    const { input, agentToolReferences } = turnRequestFromProto(start(), catalog, deferred);
    expect(input.agentName).toBe('triage');
    expect(input.handoffs).toEqual(['billing']);
    expect(input.agents?.map((a) => [a.name, a.system, a.handoffs])).toEqual([
      ['billing', 'You are billing.', []],
    ]);
    // An MCP tool named by reference waits for the run, under its agent.
    expect(agentToolReferences?.get('billing')).toEqual([
      { name: 'lookup-invoice', needsApproval: true },
    ]);
  });

  it('describes __handoff_to for exactly the agents the answering agent may reach', () => {
    const { input } = turnRequestFromProto(start(), catalog, deferred);
    const tool = input.tools.find((t) => t.name === ReservedTool.HandoffTo);
    expect(tool?.description).toContain('- billing: Refunds and invoices.');
    expect(tool?.inputSchema).toMatchObject({
      properties: { agent: { enum: ['billing'] } },
    });
  });

  it.each([
    [
      'an agent named twice',
      (s: TurnStart) => ({ agents: [...s.agents, s.agents[1]!] }),
      /start\.agents\[2\]\.name.*repeats billing/,
    ],
    [
      'an answering agent not listed',
      (s: TurnStart) => ({ agent: { ...s.agent!, name: 'sales' } }),
      /start\.agent\.name.*names sales, which is not in start\.agents/,
    ],
    [
      'a handoff to an agent not listed',
      (s: TurnStart) => ({
        agents: s.agents.map((a) => (a.name === 'billing' ? { ...a, handoffs: ['root'] } : a)),
      }),
      /start\.agents\[1\]\.handoffs\[0\].*names root, which is not in start\.agents/,
    ],
  ])('refuses %s, naming the field', (_what, change, message) => {
    const base = start();
    expect(() => turnRequestFromProto(start(change(base)), catalog, deferred)).toThrow(message);
  });

  it('leaves a start without agents as it was: one agent, handoffs end the turn', () => {
    const { input } = turnRequestFromProto(start({ agents: [] }), catalog, deferred);
    expect(input.agents).toBeUndefined();
    expect(input.handoffs).toBeUndefined();
    expect(input.tools.find((t) => t.name === ReservedTool.HandoffTo)?.description).toBe(
      handoffTool.description,
    );
  });
});

describe('TurnStart.agents: delegates (docs/turns.md, "Delegation")', () => {
  const delegating = (delegates: string[]): TurnStart => {
    const tools = [byReference('__ask_user'), byReference('__delegate_to')];
    const base = start();
    return start({
      tools,
      agents: base.agents.map((a) => (a.name === 'triage' ? { ...a, tools, delegates } : a)),
    });
  };

  it('gives the machine whom the answering agent may ask, and describes __delegate_to for them', () => {
    const { input } = turnRequestFromProto(delegating(['billing']), catalog, deferred);
    expect(input.delegates).toEqual(['billing']);
    const tool = input.tools.find((t) => t.name === ReservedTool.DelegateTo);
    expect(tool?.description).toContain('- billing: Refunds and invoices.');
    expect(tool?.inputSchema).toMatchObject({
      properties: { agent: { enum: ['billing'] } },
      required: ['agent', 'task'],
    });
  });

  it('refuses a delegate that is not among the agents, naming the field', () => {
    expect(() => turnRequestFromProto(delegating(['sales']), catalog, deferred)).toThrow(
      'start.agents[0].delegates[0]: names sales, which is not in start.agents',
    );
  });

  it('refuses __delegate_to by reference for an agent with no delegates', () => {
    expect(() => turnRequestFromProto(delegating([]), catalog, deferred)).toThrow(/__delegate_to/);
  });
});
