import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';

/**
 * A small in-process MCP server over streamable HTTP (stateless: one server and
 * transport per request, as the SDK's stateless example does), bound to loopback, for
 * the HTTP failure cases. Tools: `echo` (read-only) and `hang` (never answers; tells the
 * test it started). `kill()` drops every connection and stops listening, as a crashed
 * server would.
 */
export interface TestHttpMcpServer {
  readonly url: string;
  /** Resolves when a `hang` call reached its handler. */
  readonly hangStarted: Promise<void>;
  /** The tools called, in order (what a test that a call never ran reads). */
  readonly calls: readonly string[];
  /** Cuts all connections at once and stops listening. */
  kill(): Promise<void>;
}

/** Starts the server on a free loopback port. */
export async function startTestHttpMcpServer(): Promise<TestHttpMcpServer> {
  let signalHang: () => void = () => undefined;
  const hangStarted = new Promise<void>((resolve) => {
    signalHang = resolve;
  });
  const sockets = new Set<Socket>();
  const calls: string[] = [];

  const handle = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const mcp = new McpServer({ name: 'polychrome-http-test-server', version: '1.0.0' });
    mcp.registerTool('echo', { description: 'Echo.', annotations: { readOnlyHint: true } }, () => {
      calls.push('echo');
      return { content: [{ type: 'text', text: 'echo over http' }] };
    });
    mcp.registerTool(
      'hang',
      { description: 'Never answers.' },
      () =>
        new Promise(() => {
          calls.push('hang');
          signalHang();
        }),
    );
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined });
    res.on('close', () => {
      void transport.close();
      void mcp.close();
    });
    await mcp.connect(transport);
    await transport.handleRequest(req, res);
  };

  const server = createServer((req, res) => {
    handle(req, res).catch(() => {
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
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('no port');
  return {
    url: `http://127.0.0.1:${address.port}/mcp`,
    hangStarted,
    calls,
    kill: async () => {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
