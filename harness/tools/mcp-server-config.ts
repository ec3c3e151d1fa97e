/**
 * How the harness is told about its MCP servers (`HARNESS_MCP_SERVERS`, one entry per
 * `spec.tools.mcpServers` entry of the Conversation) and the adapter's own options.
 */

/** How long a request may take when the server config sets no timeout (the CRD's default). */
export const DEFAULT_MCP_TIMEOUT_MS = 60_000;

/** Longest tool result passed on to the model; longer text is cut with a note. */
export const DEFAULT_MAX_RESULT_CHARS = 100_000;

interface McpServerBase {
  /** The server's name in the Conversation (a DNS label); tools are `<name>/<tool>`. */
  readonly name: string;
  /** Timeout of one request (connect, list, call) in ms. @default {@link DEFAULT_MCP_TIMEOUT_MS} */
  readonly timeoutMs?: number;
}

/** An MCP server started by the harness and spoken to over its stdin/stdout. */
export interface McpStdioServerConfig extends McpServerBase {
  readonly transport: 'stdio';
  readonly command: string;
  readonly args?: readonly string[];
  /** Added to the SDK's default environment. */
  readonly env?: Readonly<Record<string, string>>;
  readonly cwd?: string;
}

/** An MCP server reached over streamable HTTP. */
export interface McpHttpServerConfig extends McpServerBase {
  readonly transport: 'http';
  readonly url: string;
  /** Sent with every request (for example an authorization header). */
  readonly headers?: Readonly<Record<string, string>>;
}

/** One `spec.tools.mcpServers` entry, as the harness receives it. */
export type McpServerConfig = McpStdioServerConfig | McpHttpServerConfig;

/** Options of `McpToolRunner` (mcp-tools.ts). */
export interface McpToolRunnerOptions {
  /** Receives what stdio servers write to stderr (for the log). @default dropped */
  readonly onStderr?: (server: string, text: string) => void;
  /** @default {@link DEFAULT_MAX_RESULT_CHARS} */
  readonly maxResultChars?: number;
  /** The client name and version the servers see. */
  readonly clientInfo?: { readonly name: string; readonly version: string };
}
