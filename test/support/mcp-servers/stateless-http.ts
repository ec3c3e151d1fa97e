import { createServer } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';

/** A stateless MCP server over streamable HTTP on loopback, and how to stop it at once. */
export interface StatelessHttpMcp {
  /** The MCP endpoint. */
  readonly url: string;
  /** Cuts every connection at once (as a crashed server would) and stops listening. */
  kill(): Promise<void>;
}

/**
 * Serves MCP over streamable HTTP, stateless: one server and transport per request (as
 * the SDK's stateless example does), each given its tools by `register`, on a free
 * loopback port. For the test servers in this folder and test/support/payments.
 */
export async function serveStatelessHttpMcp(
  name: string,
  register: (mcp: McpServer) => void,
): Promise<StatelessHttpMcp> {
  const sockets = new Set<Socket>();
  const server = createServer((req, res) => {
    const mcp = new McpServer({ name, version: '1.0.0' });
    register(mcp);
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined });
    res.on('close', () => {
      void transport.close();
      void mcp.close();
    });
    mcp
      .connect(transport)
      .then(() => transport.handleRequest(req, res))
      .catch(() => {
        if (!res.headersSent) res.writeHead(500).end();
      });
  });
  server.on('connection', (socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/mcp`,
    kill: async () => {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
