import { MEMORY_TOOL } from '../../common/memory';
import type {
  AgentSettings,
  DispatchedAgent,
  TurnStart,
} from '../../proto/gen/polychrome/harness/v1/harness';
import { invalidField } from '../turn/proto-fields';
import type { AgentModelSettings } from '../model/relayed-model';
import { mcpServersFromProto, mcpServersToProto, type AgentMcp } from './agent-mcp-codec';
import { relaySettingsFromProto, relaySettingsToProto } from './relay-codec';
import {
  delegateToolFor,
  handoffToolFor,
  ReservedTool,
  type HandoffTarget,
} from '../turn/reserved-tools';
import type { TurnAgent } from '../turn/turn-agents';
import type { TurnInput } from '../turn/turn-machine';
import {
  toolReferenceToProto,
  toolsFromProto,
  turnToolToProto,
  type ToolCatalog,
  type ToolReference,
} from './tool-spec-codec';

/**
 * `TurnStart.agents` (a Conversation that names an Agent) to the turn machine's roster
 * (docs/turns.md, "Handoffs", "Delegation"): each agent's prompt, tools, handoffs and
 * delegates, with `__handoff_to` and `__delegate_to` described for exactly the agents it
 * may reach. The start is checked as any input from another process: names unique and
 * set, the answering agent among them, every handoff and delegate naming one of them.
 */

/** What `TurnStart.agents` adds to a turn request. */
export interface AgentsOfStart {
  /** Whom `agent` may hand off to, described; undefined when the start has no agents. */
  targetsOf(agent: string): readonly HandoffTarget[] | undefined;
  /** Whom `agent` may delegate to, described; empty when it may not. */
  delegatesOf(agent: string): readonly HandoffTarget[];
  /** The machine's input: the answering agent's handoffs and delegates, and every other agent. */
  input(agent: string): Pick<TurnInput, 'handoffs' | 'delegates' | 'agents'>;
  /** Per agent: tools of the harness's MCP servers named by reference, and its settings. */
  request(): AgentsOfRequest;
}

/** What a turn request holds of its agents (turn-start-codec.ts `TurnRequest`). */
export interface AgentsOfRequest {
  /** Each agent's tools of the harness's MCP servers, by reference. */
  readonly agentToolReferences?: ReadonlyMap<string, readonly ToolReference[]>;
  /** Each agent's model settings. */
  readonly agentSettings?: ReadonlyMap<string, AgentModelSettings>;
  /**
   * Each agent's own MCP servers (its Agent's `spec.tools.mcpServers`), whose tools only it
   * is offered; an agent without any is absent.
   */
  readonly agentMcpServers?: ReadonlyMap<string, AgentMcp>;
}

/**
 * Reads `start.agents`.
 *
 * @throws AppError `invalid_argument` naming the field: an empty or repeated name, a
 *   handoff to an agent not listed, an answering agent (`start.agent.name`) not listed, or
 *   a malformed tool spec.
 */
export function agentsFromProto(
  start: TurnStart,
  catalog: ToolCatalog,
  deferred: (name: string) => boolean,
): AgentsOfStart {
  if (start.agents.length === 0) return NO_AGENTS;
  const described = new Map<string, string>();
  start.agents.forEach(({ name, description }, i) => {
    if (name === '') throw invalidField(`start.agents[${i}].name`, 'is empty');
    if (described.has(name)) throw invalidField(`start.agents[${i}].name`, `repeats ${name}`);
    described.set(name, description);
  });
  const answering = start.agent?.name ?? '';
  if (!described.has(answering)) {
    throw invalidField(
      'start.agent.name',
      `names ${answering || '(none)'}, which is not in start.agents`,
    );
  }
  const describe = (names: readonly string[]): HandoffTarget[] =>
    names.map((name) => ({ name, description: described.get(name) ?? '' }));
  const targetsOf = (agent: string): readonly HandoffTarget[] | undefined => {
    const dispatched = start.agents.find(({ name }) => name === agent);
    return dispatched === undefined ? undefined : describe(dispatched.handoffs);
  };
  const agents: TurnAgent[] = [];
  const references = new Map<string, readonly ToolReference[]>();
  const settings = new Map<string, AgentModelSettings>();
  const mcpServers = new Map<string, AgentMcp>();
  start.agents.forEach((agent, i) => {
    const field = `start.agents[${i}]`;
    const servers = mcpServersFromProto(agent.mcpServers, `${field}.mcp_servers`);
    if (servers.length > 0) {
      mcpServers.set(agent.name, { servers, requireApproval: [...agent.requireApproval] });
    }
    for (const list of ['handoffs', 'delegates'] as const) {
      agent[list].forEach((target, j) => {
        if (!described.has(target)) {
          throw invalidField(
            `${field}.${list}[${j}]`,
            `names ${target}, which is not in start.agents`,
          );
        }
      });
    }
    const { tools, toolReferences } = toolsFromProto(
      agent.tools,
      `${field}.tools`,
      agentCatalog(catalog, targetsOf(agent.name), describe(agent.delegates)),
      deferred,
    );
    const system = agent.settings?.systemPrompt ?? '';
    const memory = tools.some(({ name }) => name === MEMORY_TOOL) ? start.memoryBudgetBytes : 0;
    agents.push({
      name: agent.name,
      ...(system === '' ? {} : { system }),
      tools,
      handoffs: agent.handoffs,
      ...(agent.delegates.length === 0 ? {} : { delegates: agent.delegates }),
      ...(memory === 0 ? {} : { memoryBudgetBytes: memory }),
    });
    references.set(agent.name, toolReferences);
    const relay = relaySettingsFromProto(agent.settings, `${field}.settings`);
    settings.set(agent.name, {
      model: agent.settings?.model ?? '',
      ...(relay === undefined ? {} : { relay }),
    });
  });
  const delegatesOf = (agent: string): readonly HandoffTarget[] =>
    describe(start.agents.find(({ name }) => name === agent)?.delegates ?? []);
  return {
    targetsOf,
    delegatesOf,
    // The machine takes the answering agent from the start's own fields, the rest here.
    input: (agent) => {
      const delegates = agents.find(({ name }) => name === agent)?.delegates;
      return {
        handoffs: targetsOf(agent)?.map(({ name }) => name) ?? [],
        ...(delegates === undefined ? {} : { delegates }),
        agents: agents.filter(({ name }) => name !== agent),
      };
    },
    request: () => ({
      agentToolReferences: references,
      agentSettings: settings,
      ...(mcpServers.size === 0 ? {} : { agentMcpServers: mcpServers }),
    }),
  };
}

/**
 * A request's agents to `TurnStart.agents` (tools as full specs; by-reference MCP tools
 * after them). Descriptions travel inside each agent's `__handoff_to`, so they are empty.
 *
 * @throws AppError `invalid_argument` when a tool schema cannot be written as JSON.
 */
export function agentsToProto(
  request: AgentsOfRequest & { readonly input: TurnInput },
): DispatchedAgent[] {
  const { input } = request;
  if (input.agents === undefined) return [];
  const answering: TurnAgent = {
    name: input.agentName ?? '',
    ...(input.system === undefined ? {} : { system: input.system }),
    tools: input.tools,
    handoffs: input.handoffs ?? [],
    ...(input.delegates === undefined ? {} : { delegates: input.delegates }),
  };
  return [answering, ...input.agents].map((agent) => ({
    name: agent.name,
    description: '',
    settings: settingsToProto(agent, request.agentSettings?.get(agent.name)),
    tools: [
      ...agent.tools.map(turnToolToProto),
      ...(request.agentToolReferences?.get(agent.name) ?? []).map(toolReferenceToProto),
    ],
    handoffs: [...(agent.handoffs ?? [])],
    delegates: [...(agent.delegates ?? [])],
    mcpServers: mcpServersToProto(request.agentMcpServers?.get(agent.name)?.servers ?? []),
    requireApproval: [...(request.agentMcpServers?.get(agent.name)?.requireApproval ?? [])],
  }));
}

const NO_AGENTS: AgentsOfStart = {
  targetsOf: () => undefined,
  delegatesOf: () => [],
  input: () => ({}),
  request: () => ({}),
};

/**
 * `catalog` with `__handoff_to` described for `targets` (reserved-tools.ts
 * `handoffToolFor`); `catalog` itself when there are none to describe.
 */
export function handoffCatalog(
  catalog: ToolCatalog,
  targets: readonly HandoffTarget[] | undefined,
): ToolCatalog {
  if (targets === undefined || targets.length === 0) return catalog;
  const tool = handoffToolFor(targets);
  return (name) => (name === ReservedTool.HandoffTo ? tool : catalog(name));
}

/**
 * An agent's catalog: `__handoff_to` and `__delegate_to` described for the agents it may
 * reach each way (reserved-tools.ts); a reserved tool with nobody to reach is not offered.
 */
export function agentCatalog(
  catalog: ToolCatalog,
  handoffs: readonly HandoffTarget[] | undefined,
  delegates: readonly HandoffTarget[],
): ToolCatalog {
  const withHandoffs = handoffCatalog(catalog, handoffs);
  if (delegates.length === 0) return withHandoffs;
  const tool = delegateToolFor(delegates);
  return (name) => (name === ReservedTool.DelegateTo ? tool : withHandoffs(name));
}

function settingsToProto(agent: TurnAgent, model: AgentModelSettings | undefined): AgentSettings {
  return {
    model: model?.model ?? '',
    systemPrompt: agent.system ?? '',
    name: agent.name,
    ...relaySettingsToProto(model?.relay),
  };
}
