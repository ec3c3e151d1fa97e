/**
 * A turn's agents on the control plane (docs/turns.md, "Agents"): the roster it runs
 * under, the agent that answers first, what the harness is given for each agent, and the
 * checks on the agents a harness's steps name. Pure.
 */
import { dispatchedMcpServers } from './agent-mcp-servers';
import { AppError } from '../../common/errors';
import { needsApproval } from '../../common/approval-rules';
import {
  ToolHost,
  type AgentSettings,
  type DispatchedAgent,
  type Step,
  type ToolSpec,
} from '../../proto/gen/polychrome/harness/v1/harness';
import type { ToolCall } from '../../proto/gen/polychrome/events/v1/events';
import { rosterAgent, type AgentRoster, type RosterAgent } from './agent-roster';
import type { JournalView, TurnView } from './journal-view-types';
import type { TurnStatusChange } from './turn-status';
import type { ModelRoute } from './model-relay-port';
import { ASK_USER_TOOL, DELEGATE_TOOL, HANDOFF_TOOL, rosterOfTurn } from './plan-common';
import { MAX_DELEGATION_DEPTH } from '../../common/delegation';
import type { ConversationSpec } from '../api/v1alpha1/conversation-spec';

/**
 * The roster `turn` runs under, or undefined for an inline agent. While a turn is open no
 * other is dispatched, and a dispatch records its roster when it is not the newest
 * (plan-message.ts), so the newest roster is the open turn's.
 *
 * @throws AppError `data_loss` when the journal lacks the roster the turn's dispatch names.
 */
export function turnRoster(view: JournalView, turn: TurnView): AgentRoster | undefined {
  const sha256 = rosterOfTurn(turn);
  if (sha256 === '') return undefined;
  const newest = view.newestAgentRoster;
  if (newest?.sha256 !== sha256) {
    throw new AppError(
      'data_loss',
      `turn ${turn.turnId} was dispatched under agent_roster ${sha256}, but the journal's newest roster is ${newest?.sha256 ?? 'none'}`,
    );
  }
  return newest.roster;
}

/**
 * The agent a turn starts with: the one the newest completed turn before it ended with
 * (its last handoff's target, else the agent of its first model call), so later turns stay
 * with the agent handed to until it hands off in turn; the roster's entry when that agent
 * is not in the roster (the Agents changed), names none, or no turn completed yet.
 */
export function startingAgent(view: JournalView, turn: TurnView, roster: AgentRoster): RosterAgent {
  const entry = rosterAgent(roster, roster.entry);
  if (entry === undefined) {
    throw new AppError(
      'data_loss',
      `agent_roster names entry ${roster.entry} but lists no such agent`,
    );
  }
  for (const earlier of view.newestTurns()) {
    if (earlier.messagePosition >= turn.messagePosition) continue;
    if (earlier.terminal?.kind !== 'turn_complete') continue;
    // One completed turn decides, so the walk is short whatever the history.
    const name = lastAgentOf(earlier);
    return (name === undefined ? undefined : rosterAgent(roster, name)) ?? entry;
  }
  return entry;
}

/** The agent a completed turn ended with, or undefined when its steps name none. */
export function lastAgentOf(turn: TurnView): string | undefined {
  let agent: string | undefined;
  for (const step of turn.steps) {
    if (step.kind === 'agent_handoff') agent = step.payload.toAgent;
    else if (step.kind === 'model_call' && agent === undefined && step.payload.agent !== '') {
      agent = step.payload.agent;
    }
  }
  return agent;
}

/** The tools an agent's model is offered, by reference: its built-ins and the reserved tools. */
export function toolSpecsOf(
  builtin: readonly string[],
  rules: readonly string[],
  handsOff: boolean,
  delegates = false,
): ToolSpec[] {
  const names = [
    ...builtin,
    ASK_USER_TOOL,
    ...(handsOff ? [HANDOFF_TOOL] : []),
    ...(delegates ? [DELEGATE_TOOL] : []),
  ];
  return names.map((name) => ({
    name,
    description: '',
    inputSchemaJson: '',
    effect: 0,
    needsApproval: needsApproval(name, rules),
    approvalReason: '',
    host: ToolHost.TOOL_HOST_HARNESS,
  }));
}

/** The tools an inline agent (`spec.agent`, `spec.tools`) is offered, by reference. */
export function inlineToolSpecs(spec: ConversationSpec): ToolSpec[] {
  const handsOff = (spec.agent?.handoffTargets ?? []).length > 0;
  return toolSpecsOf(spec.tools?.builtin ?? [], spec.tools?.requireApproval ?? [], handsOff);
}

/**
 * What the harness is told of an agent's model: an Agent's model is its ModelConfig's,
 * and the control plane makes its calls (the key never enters the sandbox).
 */
export function settingsOf(agent: RosterAgent): AgentSettings {
  return {
    model: agent.model.model,
    systemPrompt: agent.systemPrompt,
    name: agent.name,
    relayModelCalls: true,
    provider: agent.model.provider,
    maxTokens: agent.model.maxTokens ?? 0,
  };
}

/**
 * Where each agent of `roster` has its model calls made (model-relay-port.ts): its
 * ModelConfig as the turn's first dispatch recorded it, in the Conversation's namespace.
 */
export function rosterRoutes(roster: AgentRoster, namespace: string): Map<string, ModelRoute> {
  return new Map(
    roster.agents.map(({ name, model }) => [
      name,
      {
        provider: model.provider,
        model: model.model,
        ...(model.baseUrl === undefined ? {} : { baseUrl: model.baseUrl }),
        ...(model.maxTokens === undefined ? {} : { maxTokens: model.maxTokens }),
        ...(model.secretKeyRef === undefined ? {} : { secretKeyRef: model.secretKeyRef }),
        namespace,
      },
    ]),
  );
}

/** `TurnStart.agents`: every agent of the roster with its settings, tools, handoffs and delegates. */
export function dispatchedAgentsOf(roster: AgentRoster): DispatchedAgent[] {
  return roster.agents.map((agent) => {
    const delegates = agent.delegates ?? [];
    return {
      name: agent.name,
      description: agent.description,
      settings: settingsOf(agent),
      tools: toolSpecsOf(
        agent.builtin,
        agent.requireApproval,
        agent.handoffs.length > 0,
        delegates.length > 0,
      ),
      handoffs: [...agent.handoffs],
      delegates: [...delegates],
      ...dispatchedMcpServers(agent),
    };
  });
}

/**
 * Why a step names an agent the turn cannot have run under, or undefined. A turn with a
 * roster: every model and tool call names one of its agents, and a handoff goes from one
 * to another its Agent lists in `spec.handoffs` (the machine applies the rest of the rule,
 * and replay checks it). A turn without one (an inline agent) hands off to nobody.
 */
export function checkStepAgent(
  roster: AgentRoster | undefined,
  turnId: string,
  step: NonNullable<Step['step']>,
): string | undefined {
  switch (step.$case) {
    case 'modelCall':
    case 'toolCall': {
      const { agent } = step.value;
      if (roster !== undefined && rosterAgent(roster, agent) === undefined) {
        const kind = step.$case === 'modelCall' ? 'model_call' : 'tool_call';
        return `${kind} of turn ${turnId} names agent ${agent || '(none)'}, which is not among the turn's agents (${names(roster)})`;
      }
      return step.$case === 'toolCall' ? checkDelegation(roster, turnId, step.value) : undefined;
    }
    case 'agentHandoff': {
      const { toolCallId, fromAgent, toAgent } = step.value;
      const moves = `agent_handoff ${toolCallId} moves turn ${turnId} from ${fromAgent || '(unnamed)'} to ${toAgent || '(unnamed)'}`;
      if (roster === undefined)
        return `${moves}, but this turn was dispatched with no agent to hand off to`;
      const from = rosterAgent(roster, fromAgent);
      if (from === undefined || rosterAgent(roster, toAgent) === undefined) {
        return `${moves}, but the turn's agents are ${names(roster)}`;
      }
      return from.handoffs.includes(toAgent)
        ? undefined
        : `${moves}, but ${fromAgent} may hand off only to ${from.handoffs.join(', ') || 'nobody'}`;
    }
    default:
      return undefined;
  }
}

/**
 * Why a `__delegate_to` tool call (the intent that opens a thread) is not one its agent
 * may make: only to an agent its Agent lists in `spec.delegates`, within the depth limit.
 * The machine applies the rest of the rule (cycles, the deadline), and replay checks it.
 */
function checkDelegation(
  roster: AgentRoster | undefined,
  turnId: string,
  call: ToolCall,
): string | undefined {
  if (call.toolName !== DELEGATE_TOOL) return undefined;
  const asks = `tool_call ${call.toolCallId} of turn ${turnId} delegates from ${call.agent || '(unnamed)'}`;
  if (roster === undefined)
    return `${asks}, but this turn was dispatched with no agent to delegate to`;
  let target: unknown;
  try {
    target = (JSON.parse(call.argsJson) as { agent?: unknown }).agent;
  } catch {
    return `${asks} with arguments that are not JSON`;
  }
  const allowed = rosterAgent(roster, call.agent)?.delegates ?? [];
  if (typeof target !== 'string' || !allowed.includes(target)) {
    return `${asks} to ${String(target)}, but ${call.agent || '(unnamed)'} may delegate only to ${allowed.join(', ') || 'nobody'}`;
  }
  if (call.depth + 1 > MAX_DELEGATION_DEPTH) {
    return `${asks} to ${target} at depth ${call.depth + 1}, deeper than ${MAX_DELEGATION_DEPTH}`;
  }
  return undefined;
}

function names(roster: AgentRoster): string {
  return roster.agents.map(({ name }) => name).join(', ');
}

/**
 * A completed turn of a Conversation that names an Agent: its status change names the
 * agent it ended with, which answers the next turn (plan-agents.ts `startingAgent`).
 */
export function settledWithAgent(
  change: TurnStatusChange,
  view: JournalView,
  turnId: string,
): TurnStatusChange {
  const turn = view.turnsById.get(turnId);
  if (change.kind !== 'settled' || turn?.terminal?.kind !== 'turn_complete') return change;
  if (rosterOfTurn(turn) === '') return change;
  const agent = lastAgentOf(turn);
  return agent === undefined ? change : { ...change, agent };
}
