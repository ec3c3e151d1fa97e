/**
 * An Agent's MCP servers as the harness is given them (`DispatchedAgent.mcp_servers`,
 * docs/turns.md "Agents"): the roster's record of its `spec.tools.mcpServers`. Pure.
 */
import type {
  AgentMcpServer,
  DispatchedAgent,
} from '../../proto/gen/polychrome/harness/v1/harness';
import type { RosterAgent } from './agent-roster';

/**
 * `agent`'s MCP servers for `DispatchedAgent.mcp_servers`, and with them its approval
 * rules, which gate their tools; both empty when it has none.
 */
export function dispatchedMcpServers(
  agent: RosterAgent,
): Pick<DispatchedAgent, 'mcpServers' | 'requireApproval'> {
  const mcpServers = (agent.mcpServers ?? []).map(serverOf);
  return { mcpServers, requireApproval: mcpServers.length === 0 ? [] : [...agent.requireApproval] };
}

function serverOf(server: NonNullable<RosterAgent['mcpServers']>[number]): AgentMcpServer {
  return {
    name: server.name,
    transport: server.transport,
    command: server.command ?? '',
    args: [...(server.args ?? [])],
    url: server.url ?? '',
    timeoutMs: server.timeoutMs ?? 0,
  };
}
