/**
 * A one-tool MCP server over stdio that shows what a client sent beside the arguments:
 * `meta` (read-only) returns the request's `params._meta` as JSON (`{}` when none), e.g.
 * the trace context. Run it with `node --import tsx test/support/mcp-servers/meta-server.ts`.
 */
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';

const server = new McpServer({ name: 'polychrome-meta-server', version: '1.0.0' });

server.registerTool(
  'meta',
  { description: 'Return the request _meta.', annotations: { readOnlyHint: true } },
  (extra) => ({ content: [{ type: 'text', text: JSON.stringify(extra._meta ?? {}) }] }),
);

server.connect(new StdioServerTransport()).catch((error: unknown) => {
  process.stderr.write(`meta-server: ${String(error)}\n`);
  process.exit(1);
});
