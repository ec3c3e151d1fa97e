/**
 * `DispatchedAgent.mcp_servers` (an Agent's `spec.tools.mcpServers`, docs/turns.md
 * "Agents") to and from the configurations the MCP adapter takes. The start is checked as
 * any input from another process: a server is a DNS-label name, unique within its agent,
 * and either `stdio` with a command or `http` with an http(s) URL.
 */
import type { AgentMcpServer } from '../../proto/gen/polychrome/harness/v1/harness';
import type { McpServerConfig } from '../tools/mcp-server-config';
import { invalidField } from '../turn/proto-fields';

/** An agent's own MCP servers and the approval rules that gate their tools. */
export interface AgentMcp {
  readonly servers: readonly McpServerConfig[];
  readonly requireApproval: readonly string[];
}

const DNS_LABEL = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/u;
const HTTP_URL = /^https?:\/\/[^\s/?#]+/u;

/**
 * An agent's MCP servers from the start.
 *
 * @throws AppError `invalid_argument` naming the field that is wrong and why.
 */
export function mcpServersFromProto(
  servers: readonly AgentMcpServer[],
  field: string,
): McpServerConfig[] {
  const names = new Set<string>();
  return servers.map((server, i): McpServerConfig => {
    const at = `${field}[${i}]`;
    if (!DNS_LABEL.test(server.name)) {
      throw invalidField(`${at}.name`, `is ${JSON.stringify(server.name)}, not a DNS label`);
    }
    if (names.has(server.name)) throw invalidField(`${at}.name`, `repeats ${server.name}`);
    names.add(server.name);
    const timeout = server.timeoutMs === 0 ? {} : { timeoutMs: server.timeoutMs };
    if (server.transport === 'stdio') {
      if (server.command === '' || server.url !== '') {
        throw invalidField(at, 'transport stdio takes a command and no url');
      }
      return {
        name: server.name,
        transport: 'stdio',
        command: server.command,
        ...(server.args.length === 0 ? {} : { args: [...server.args] }),
        ...timeout,
      };
    }
    if (server.transport === 'http') {
      if (!HTTP_URL.test(server.url) || server.command !== '' || server.args.length > 0) {
        throw invalidField(at, 'transport http takes an http:// or https:// url and no command');
      }
      return { name: server.name, transport: 'http', url: server.url, ...timeout };
    }
    throw invalidField(`${at}.transport`, `is ${JSON.stringify(server.transport)}: stdio or http`);
  });
}

/** An agent's MCP servers for the start. */
export function mcpServersToProto(servers: readonly McpServerConfig[]): AgentMcpServer[] {
  return servers.map((server) => ({
    name: server.name,
    transport: server.transport,
    command: server.transport === 'stdio' ? server.command : '',
    args: server.transport === 'stdio' ? [...(server.args ?? [])] : [],
    url: server.transport === 'http' ? server.url : '',
    timeoutMs: server.timeoutMs ?? 0,
  }));
}
