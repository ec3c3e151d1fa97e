/**
 * The tools each agent of a turn was given, on the control plane (docs/turns.md, "Agents"):
 * the one place for the rule that a step's tool is one its agent was offered. The harness's
 * turn machine refuses a call to a tool its agent was not offered before anything is
 * committed; a harness that commits one anyway is forged, and this refuses it. Pure.
 *
 * - An `agent_config` the harness commits may offer an agent, of the tools the control
 *   plane names, only those its dispatch gave it: the built-in and reserved tools of its
 *   `TurnStart` entry. MCP tools (`<server>/<tool>`) are listed by the harness alone.
 * - A `tool_call` names a tool that the newest committed `agent_config` of the agent the
 *   step names offers, and no tool of another agent's own MCP server (a server in another
 *   Agent's `spec.tools.mcpServers` that is neither in the agent's own nor in the
 *   Conversation's): a delegate cannot call the lead's tools, nor any agent a tool no
 *   configuration offers it. The harness's shared servers (the Conversation's, and any its
 *   sandbox template adds) are every agent's.
 *
 * A journal that records no configuration (a harness from before configurations were
 * recorded, docs/replay.md "What the control plane checks") is not checked for tools here;
 * once one is recorded, every agent that calls a tool needs its own.
 */
import type { AgentConfig, ToolCall } from '../../proto/gen/polychrome/events/v1/events';
import { rosterAgent, type AgentRoster } from './agent-roster';
import type { Conversation } from '../api/v1alpha1/conversation-types';
import { configToolsOf } from './agent-config-tools';
import type { AgentConfigRef, Lookup } from './journal-view-types';
import { dispatchedAgentsOf, inlineToolSpecs } from './plan-agents';

/** What the rule reads of a dispatched turn. */
export interface AgentToolFacts {
  readonly conversation: Conversation;
  /** The roster the turn runs under; absent: an inline agent. */
  readonly roster?: AgentRoster;
  /** The newest committed configuration of each agent, by name (the journal view's). */
  readonly agentConfigs?: Lookup<string, AgentConfigRef>;
}

/** Why `call` names a tool its agent was not offered, or undefined. */
export function checkToolOffered(facts: AgentToolFacts, call: ToolCall): string | undefined {
  const configs = facts.agentConfigs;
  if (configs === undefined || configs.size === 0) return undefined;
  const who = call.agent || '(unnamed)';
  const what = `tool_call ${call.toolCallId} of turn ${call.turnId} by ${who} runs ${call.toolName}`;
  const config = configs.get(call.agent);
  if (config === undefined) {
    return `${what}, but no agent_config of agent ${who} is committed, so it was offered no tool`;
  }
  if (!config.toolNames.includes(call.toolName)) {
    return `${what}, which agent ${who} was not offered (its agent_config at position ${config.position} offers ${config.toolNames.join(', ') || 'none'})`;
  }
  const owner = otherOwner(facts, call.agent, call.toolName);
  return owner === undefined
    ? undefined
    : `${what}, a tool of agent ${owner}'s own MCP server, which ${who} was not given`;
}

/** Why a configuration the harness commits offers its agent a tool it was not given, or undefined. */
export function checkConfigOffered(facts: AgentToolFacts, step: AgentConfig): string | undefined {
  const { agent, toolNames } = configToolsOf(step.configJson);
  const what = `agent_config of turn ${step.turnId} for agent ${agent || '(unnamed)'}`;
  const given = dispatchedTools(facts, agent);
  if (given === undefined) return `${what} names an agent the turn was not given`;
  const stray = toolNames.filter((name) => !name.includes('/') && !given.includes(name));
  return stray.length === 0
    ? undefined
    : `${what} offers ${stray.join(', ')}, which its dispatch did not give it (it gave ${given.join(', ') || 'none'})`;
}

/** The tools `agent`'s dispatch names; undefined when the turn was not given that agent. */
function dispatchedTools(facts: AgentToolFacts, agent: string): string[] | undefined {
  const { roster, conversation } = facts;
  if (roster === undefined) {
    return agent === (conversation.spec.agent?.name ?? '')
      ? inlineToolSpecs(conversation.spec).map(({ name }) => name)
      : undefined;
  }
  return dispatchedAgentsOf(roster)
    .find(({ name }) => name === agent)
    ?.tools.map(({ name }) => name);
}

/**
 * The agent whose own MCP server `tool` belongs to when that is not `agent` (and the server
 * is neither `agent`'s own nor the Conversation's), or undefined.
 */
function otherOwner(facts: AgentToolFacts, agent: string, tool: string): string | undefined {
  const slash = tool.indexOf('/');
  if (slash <= 0 || facts.roster === undefined) return undefined;
  const server = tool.slice(0, slash);
  const shared = facts.conversation.spec.tools?.mcpServers ?? [];
  const mine = rosterAgent(facts.roster, agent)?.mcpServers ?? [];
  if ([...shared, ...mine].some(({ name }) => name === server)) return undefined;
  return facts.roster.agents.find(({ mcpServers }) =>
    (mcpServers ?? []).some(({ name }) => name === server),
  )?.name;
}
