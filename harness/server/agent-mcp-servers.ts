/**
 * Agents' own MCP servers (docs/turns.md, "Agents"): an Agent's `spec.tools.mcpServers`
 * arrive with each turn (`DispatchedAgent.mcp_servers`), and their tools are offered to
 * that agent only, after the tools of the harness's own servers (the Conversation's, which
 * every agent is offered). The turn machine runs only tools offered to the agent that asks,
 * so another agent's call to one of them is refused as not offered and never reaches a
 * server.
 *
 * A server is connected on its first turn and kept for later ones (one runner per
 * configuration, at most {@link MAX_AGENT_MCP_RUNNERS}, the least recently used closed
 * first); the harness closes them when it stops.
 */
import { AppError, isAppError } from '../../common/errors';
import type { McpServerConfig } from '../tools/mcp-server-config';
import type { McpServerListing } from '../tools/mcp-tools';
import type { ToolRunner } from '../turn/ports/tool-port';
import type { PaidToolRunner } from '../turn/ports/payment-port';
import type { AgentMcp } from './agent-mcp-codec';
import { notSent } from './payment-codec';
import type { McpToolSource } from './turn-tools';

/** Runners kept at most. */
export const MAX_AGENT_MCP_RUNNERS = 64;

/** The runner of one server: lists its tools and calls them (the `McpToolRunner` is one). */
export interface AgentMcpRunner extends McpToolSource, ToolRunner, PaidToolRunner {
  close(): Promise<void>;
}

/**
 * Makes the runner of one server (async: the harness loads the MCP SDK only when a server
 * needs it).
 */
export type AgentMcpRunnerFactory = (config: McpServerConfig) => Promise<AgentMcpRunner>;

/** The runners of agents' servers, kept across turns. */
export class AgentMcpServers {
  private readonly runners = new Map<string, Promise<AgentMcpRunner>>();

  constructor(
    private readonly create: AgentMcpRunnerFactory,
    private readonly max = MAX_AGENT_MCP_RUNNERS,
  ) {}

  /** The runner of `config`, made on first use; the most recently used are kept. */
  runnerOf(config: McpServerConfig): Promise<AgentMcpRunner> {
    // The codec builds every configuration in one field order, so equal ones stringify alike.
    const key = JSON.stringify(config);
    let runner = this.runners.get(key);
    this.runners.delete(key);
    runner ??= this.create(config);
    this.runners.set(key, runner);
    if (this.runners.size > this.max) {
      const [oldest, dropped] = this.runners.entries().next().value ?? [];
      if (oldest !== undefined) this.runners.delete(oldest);
      void dropped?.then((runner) => runner.close()).catch(() => undefined);
    }
    return runner;
  }

  /** Closes every runner. */
  async close(): Promise<void> {
    const all = [...this.runners.values()];
    this.runners.clear();
    await Promise.allSettled(all.map(async (runner) => (await runner).close()));
  }
}

/** One turn's agents' servers: each agent's listings, and a runner for their calls. */
export interface TurnAgentMcp {
  /** The listings of `agent`'s own servers; empty when it has none. */
  listingsOf(agent: string): readonly McpServerListing[];
  /** The approval rules `agent`'s servers' tools are gated by. */
  rulesOf(agent: string): readonly string[];
  /** `fallback` with calls to the turn's agents' servers routed to them. */
  route(fallback: ToolRunner): ToolRunner;
  /** The same for paid calls (docs/payments.md, "A paid MCP tool"). */
  routePaid(fallback: PaidToolRunner | undefined): PaidToolRunner | undefined;
  /** Agents' servers left out, because a server of the harness has the name. */
  readonly shadowed: readonly { readonly agent: string; readonly server: string }[];
  /** Agents' servers whose tools could not be listed (left out of this turn), and why. */
  readonly unlisted: readonly {
    readonly agent: string;
    readonly server: string;
    readonly error: Error;
  }[];
}

/**
 * Lists every agent's own servers for one turn. Never rejects: a server that cannot be
 * listed gives an error listing, as the harness's own do. A server named as one of the
 * harness's (`harnessServers`) is left out: one name is one server within a turn.
 */
export async function listAgentMcp(
  pool: AgentMcpServers | undefined,
  agents: ReadonlyMap<string, AgentMcp> | undefined,
  harnessServers: readonly string[],
  signal: AbortSignal,
): Promise<TurnAgentMcp> {
  const listings = new Map<string, McpServerListing[]>();
  const byServer = new Map<string, AgentMcpRunner>();
  const shadowed: { agent: string; server: string }[] = [];
  for (const [agent, { servers }] of agents ?? new Map<string, AgentMcp>()) {
    const own: McpServerListing[] = [];
    for (const config of servers) {
      if (pool === undefined) break;
      if (harnessServers.includes(config.name)) {
        shadowed.push({ agent, server: config.name });
        continue;
      }
      const runner = await pool.runnerOf(config);
      byServer.set(config.name, runner);
      own.push(...(await listOne(runner, config.name, signal)));
    }
    listings.set(agent, own);
  }
  const unlisted = [...listings].flatMap(([agent, own]) =>
    own.flatMap((listing) =>
      'error' in listing ? [{ agent, server: listing.server, error: listing.error }] : [],
    ),
  );
  const runnerOf = (name: string): AgentMcpRunner | undefined => {
    const slash = name.indexOf('/');
    return slash > 0 ? byServer.get(name.slice(0, slash)) : undefined;
  };
  return {
    unlisted,
    listingsOf: (agent) => listings.get(agent) ?? [],
    rulesOf: (agent) => agents?.get(agent)?.requireApproval ?? [],
    route: (fallback) =>
      byServer.size === 0
        ? fallback
        : {
            call: (request, options) => (runnerOf(request.name) ?? fallback).call(request, options),
          },
    routePaid: (fallback) =>
      byServer.size === 0
        ? fallback
        : {
            callPaid: async (request, payment, options) => {
              const runner = runnerOf(request.name) ?? fallback;
              return runner === undefined
                ? notSent(request)
                : runner.callPaid(request, payment, options);
            },
          },
    shadowed,
  };
}

/** A server's listing, or its failure as an error listing. */
async function listOne(
  runner: AgentMcpRunner,
  server: string,
  signal: AbortSignal,
): Promise<readonly McpServerListing[]> {
  try {
    return await runner.listToolsByServer(signal);
  } catch (error) {
    const why = isAppError(error)
      ? error
      : new AppError('unavailable', `MCP server ${server}: its tools could not be listed`, {
          cause: error,
        });
    return [{ server, error: why }];
  }
}
