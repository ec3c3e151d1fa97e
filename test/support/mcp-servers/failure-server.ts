/**
 * A small MCP server over stdio for the failure cases of the MCP adapter's tests. Run it
 * with `node --import tsx test/support/mcp-servers/failure-server.ts`.
 *
 * Tools:
 * - `echo` (read-only): returns its `text`.
 * - `write_note` (no annotations, so a side effect): appends `text` to an in-memory list
 *   and returns how many notes there are.
 * - `crash`: exits the process inside the handler, before any answer: the client cannot
 *   know whether the work happened.
 * - `slow`: waits `ms` milliseconds unless the client cancels the request; cancelled
 *   calls are counted.
 * - `cancellations`: how many `slow` calls were cancelled, and the process id (a restart
 *   shows as a new pid).
 * - `fail`: returns an `isError` result (a tool failure the model should see).
 * - `throws`: the handler throws; the SDK turns that into an `isError` result.
 */
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { z } from 'zod';

const server = new McpServer({ name: 'polychrome-failure-server', version: '1.0.0' });
const notes: string[] = [];
let cancelled = 0;

server.registerTool(
  'echo',
  {
    description: 'Echo the text back.',
    inputSchema: { text: z.string() },
    annotations: { readOnlyHint: true },
  },
  ({ text }) => ({ content: [{ type: 'text', text }] }),
);

server.registerTool(
  'write_note',
  { description: 'Store a note.', inputSchema: { text: z.string() } },
  ({ text }) => {
    notes.push(text);
    return { content: [{ type: 'text', text: `saved note ${notes.length}` }] };
  },
);

server.registerTool('crash', { description: 'Exit mid-call.' }, () => {
  process.exit(3);
});

server.registerTool(
  'slow',
  { description: 'Answer after ms milliseconds.', inputSchema: { ms: z.number().int() } },
  ({ ms }, extra) =>
    new Promise((resolve, reject) => {
      const timer = setTimeout(
        () => resolve({ content: [{ type: 'text', text: `waited ${ms} ms` }] }),
        ms,
      );
      extra.signal.addEventListener('abort', () => {
        clearTimeout(timer);
        cancelled++;
        reject(new Error('cancelled'));
      });
    }),
);

server.registerTool(
  'cancellations',
  { description: 'Count cancelled slow calls.', annotations: { readOnlyHint: true } },
  () => ({
    content: [{ type: 'text', text: JSON.stringify({ cancelled, pid: process.pid }) }],
  }),
);

server.registerTool('fail', { description: 'Report a failure.' }, () => ({
  content: [{ type: 'text', text: 'the widget is out of stock' }],
  isError: true,
}));

server.registerTool('throws', { description: 'Throw in the handler.' }, () => {
  throw new Error('handler exploded');
});

server.connect(new StdioServerTransport()).catch((error: unknown) => {
  process.stderr.write(`failure-server: ${String(error)}\n`);
  process.exit(1);
});
