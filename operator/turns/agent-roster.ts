/**
 * The agents a turn may run under (docs/turns.md, "Agents"): resolved from a
 * Conversation's entry Agent and every Agent it can hand off to, recorded in the journal
 * as an `agent_roster` whose digest every dispatch of the turn names, and read back from
 * there. Pure: the Agents and ModelConfigs come from the shell's caches.
 *
 * A turn keeps the roster of its first dispatch across every attempt, so an Agent changed
 * while a turn waits for an approval or is resumed after a crash affects later turns only.
 */
import { createHash } from 'node:crypto';
import { canonicalJson } from '../../common/canonical-json';
import { AppError } from '../../common/errors';
import type { Agent } from '../api/v1alpha1/agent-resource';
import type { ModelConfig } from '../api/v1alpha1/model-config-resource';
import { DEFAULT_MAX_STEPS } from '../api/v1alpha1/conversation-values';
import type { McpServerSpec } from '../api/v1alpha1/conversation-spec';
import type { AgentDirectory } from '../controller/agent-resource-reads';

/** The most agents one roster holds (the entry Agent and every Agent it reaches). */
export const MAX_ROSTER_AGENTS = 32;

/** Where an agent's model calls go: its ModelConfig as the turn's first dispatch found it. */
export interface RosterModel {
  /** The ModelConfig's name, in the conversation's namespace. */
  readonly modelConfig: string;
  readonly provider: ModelConfig['spec']['provider'];
  readonly model: string;
  /** Absent: the provider's public endpoint. */
  readonly baseUrl?: string;
  /** Absent: the harness's default. */
  readonly maxTokens?: number;
  /** The Secret key holding the API key (its name, never its value); absent: none is sent. */
  readonly secretKeyRef?: { readonly name: string; readonly key: string };
}

/** One agent of a roster. */
export interface RosterAgent {
  readonly name: string;
  /** The Agent's `spec.description`; '' when it has none. */
  readonly description: string;
  readonly systemPrompt: string;
  /** Built-in tools its model is offered. */
  readonly builtin: readonly string[];
  /** Its approval rules and the Conversation's: an Agent never loosens the Conversation's. */
  readonly requireApproval: readonly string[];
  readonly maxSteps: number;
  /** The agents it may hand the turn to, each in the roster. */
  readonly handoffs: readonly string[];
  /**
   * The agents it may delegate tasks to (docs/turns.md, "Delegation"), each in the roster;
   * absent when none, so a roster without delegation keeps its bytes.
   */
  readonly delegates?: readonly string[];
  /**
   * The MCP servers of its Agent's `spec.tools.mcpServers`, as written there: the harness
   * offers their tools to this agent only (docs/turns.md, "Agents"). Absent when none, so a
   * roster without them keeps its bytes.
   */
  readonly mcpServers?: readonly McpServerSpec[];
  readonly model: RosterModel;
}

/** The agents of a turn: the one a turn starts with by default, and all, by name. */
export interface AgentRoster {
  /** The Conversation's `spec.agentRef.name`. */
  readonly entry: string;
  /** Sorted by name. */
  readonly agents: readonly RosterAgent[];
}

/** A roster as the journal holds it: canonical JSON and its SHA-256. */
export interface RecordedRoster {
  readonly roster: AgentRoster;
  readonly json: string;
  /** Lowercase hex. */
  readonly sha256: string;
}

/**
 * The roster a Conversation whose `spec.agentRef` names `entry` runs under: the entry
 * Agent and every Agent reachable from it through `spec.handoffs` and `spec.delegates`, each with its
 * ModelConfig. `conversationRules` (the Conversation's `spec.tools.requireApproval`) gate
 * every agent's tools as well as the agent's own rules.
 *
 * @throws AppError `failed_precondition` naming the missing Agent or ModelConfig, who
 *   names it and what to do; or when more than {@link MAX_ROSTER_AGENTS} are reachable.
 */
export function resolveRoster(
  entry: string,
  directory: AgentDirectory,
  namespace: string,
  conversationRules: readonly string[] = [],
): RecordedRoster {
  const found = new Map<string, RosterAgent>();
  const queue: { readonly name: string; readonly namedBy?: string; readonly delegated?: true }[] = [
    { name: entry },
  ];
  for (let next = queue.shift(); next !== undefined; next = queue.shift()) {
    if (found.has(next.name)) continue;
    const agent = directory.agent(next.name);
    if (agent === undefined) throw missingAgent(next, namespace);
    if (found.size === MAX_ROSTER_AGENTS) {
      throw new AppError(
        'failed_precondition',
        `Agent ${entry} reaches more than ${MAX_ROSTER_AGENTS} Agents through spec.handoffs and spec.delegates in namespace ${namespace}; a turn may run under at most ${MAX_ROSTER_AGENTS}: hand off or delegate to fewer`,
      );
    }
    found.set(next.name, rosterAgentOf(agent, directory, namespace, conversationRules));
    for (const target of agent.spec.handoffs ?? [])
      queue.push({ name: target, namedBy: next.name });
    for (const target of agent.spec.delegates ?? [])
      queue.push({ name: target, namedBy: next.name, delegated: true });
  }
  const agents = [...found.values()].sort((a, b) =>
    a.name < b.name ? -1 : a.name > b.name ? 1 : 0,
  );
  checkMcpServerNames(agents, namespace);
  return recorded({ entry, agents });
}

/** The roster's canonical JSON and digest (what `agent_roster` holds). */
export function recorded(roster: AgentRoster): RecordedRoster {
  const json = canonicalJson(roster);
  return { roster, json, sha256: createHash('sha256').update(json, 'utf8').digest('hex') };
}

/** The agent of `roster` named `name`. */
export function rosterAgent(roster: AgentRoster, name: string): RosterAgent | undefined {
  return roster.agents.find((agent) => agent.name === name);
}

function rosterAgentOf(
  agent: Agent,
  directory: AgentDirectory,
  namespace: string,
  conversationRules: readonly string[],
): RosterAgent {
  const name = agent.metadata.name ?? '';
  const { spec } = agent;
  const config = directory.modelConfig(spec.modelRef.name);
  if (config === undefined) {
    throw new AppError(
      'failed_precondition',
      `Agent ${name} names ModelConfig ${spec.modelRef.name} in spec.modelRef, which does not exist in namespace ${namespace}; create it or point spec.modelRef at one that does`,
    );
  }
  const model = config.spec;
  const rules = new Set([...(spec.tools?.requireApproval ?? []), ...conversationRules]);
  return {
    name,
    description: spec.description ?? '',
    systemPrompt: spec.systemPrompt ?? '',
    builtin: [...(spec.tools?.builtin ?? [])].sort(),
    requireApproval: [...rules].sort(),
    maxSteps: spec.maxSteps ?? DEFAULT_MAX_STEPS,
    handoffs: [...(spec.handoffs ?? [])].sort(),
    ...((spec.delegates ?? []).length === 0
      ? {}
      : { delegates: [...(spec.delegates ?? [])].sort() }),
    ...((spec.tools?.mcpServers ?? []).length === 0
      ? {}
      : { mcpServers: spec.tools?.mcpServers?.map((server) => ({ ...server })) }),
    model: {
      modelConfig: spec.modelRef.name,
      provider: model.provider,
      model: model.model,
      ...(model.baseUrl === undefined ? {} : { baseUrl: model.baseUrl }),
      ...(model.maxTokens === undefined ? {} : { maxTokens: model.maxTokens }),
      ...(model.secretKeyRef === undefined
        ? {}
        : { secretKeyRef: { name: model.secretKeyRef.name, key: model.secretKeyRef.key } }),
    },
  };
}

/**
 * One MCP server name means one server within a turn (tools are `<server>/<tool>`, and the
 * harness routes a call by that name): two Agents of a roster that declare the same name
 * must declare the same server.
 *
 * @throws AppError `failed_precondition` naming both Agents and the server.
 */
function checkMcpServerNames(agents: readonly RosterAgent[], namespace: string): void {
  const seen = new Map<string, { agent: string; json: string }>();
  for (const agent of agents) {
    for (const server of agent.mcpServers ?? []) {
      const json = canonicalJson(server);
      const first = seen.get(server.name);
      if (first === undefined) seen.set(server.name, { agent: agent.name, json });
      else if (first.json !== json) {
        throw new AppError(
          'failed_precondition',
          `Agents ${first.agent} and ${agent.name} in namespace ${namespace} both declare an MCP server named ${server.name} in spec.tools.mcpServers, differently; agents of one conversation share server names, so rename one of them or make them the same server`,
        );
      }
    }
  }
}

function missingAgent(
  { name, namedBy, delegated }: { name: string; namedBy?: string; delegated?: true },
  namespace: string,
): AppError {
  const [verb, field] = delegated ? ['delegates to', 'delegates'] : ['hands off to', 'handoffs'];
  return new AppError(
    'failed_precondition',
    namedBy === undefined
      ? `spec.agentRef names Agent ${name}, which does not exist in namespace ${namespace}; create it or point spec.agentRef at one that does`
      : `Agent ${namedBy} ${verb} Agent ${name}, which does not exist in namespace ${namespace}; create it or remove it from ${namedBy}'s spec.${field}`,
  );
}

/**
 * The roster in an `agent_roster`'s JSON, checked against its digest and its shape.
 *
 * @throws AppError `data_loss` when the digest does not match or the JSON is not a roster.
 */
export function rosterFromJson(json: string, sha256: string): RecordedRoster {
  const digest = createHash('sha256').update(json, 'utf8').digest('hex');
  if (digest !== sha256) {
    throw new AppError('data_loss', `agent_roster ${sha256} holds JSON whose SHA-256 is ${digest}`);
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(json);
  } catch {
    throw new AppError('data_loss', `agent_roster ${sha256} is not JSON`);
  }
  if (!isRoster(parsed) || canonicalJson(parsed) !== json) {
    throw new AppError('data_loss', `agent_roster ${sha256} is not a roster in canonical JSON`);
  }
  return { roster: parsed, json, sha256 };
}

function isRoster(value: unknown): value is AgentRoster {
  if (typeof value !== 'object' || value === null) return false;
  const { entry, agents } = value as Record<string, unknown>;
  return (
    typeof entry === 'string' &&
    Array.isArray(agents) &&
    agents.every(isRosterAgent) &&
    agents.some((agent: RosterAgent) => agent.name === entry)
  );
}

function isMcpServer(value: unknown): boolean {
  if (typeof value !== 'object' || value === null) return false;
  const { name, transport } = value as Record<string, unknown>;
  return typeof name === 'string' && (transport === 'stdio' || transport === 'http');
}

function isRosterAgent(value: unknown): value is RosterAgent {
  if (typeof value !== 'object' || value === null) return false;
  const a = value as Record<string, unknown>;
  const strings = (list: unknown): boolean =>
    Array.isArray(list) && list.every((item) => typeof item === 'string');
  const model = a.model as Record<string, unknown> | null | undefined;
  return (
    typeof a.name === 'string' &&
    typeof a.description === 'string' &&
    typeof a.systemPrompt === 'string' &&
    strings(a.builtin) &&
    strings(a.requireApproval) &&
    strings(a.handoffs) &&
    (a.delegates === undefined || strings(a.delegates)) &&
    (a.mcpServers === undefined ||
      (Array.isArray(a.mcpServers) && a.mcpServers.every(isMcpServer))) &&
    typeof a.maxSteps === 'number' &&
    typeof model === 'object' &&
    model !== null &&
    typeof model.modelConfig === 'string' &&
    typeof model.model === 'string' &&
    (model.provider === 'anthropic' || model.provider === 'openai')
  );
}
