import type { Readable } from 'node:stream';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import {
  CallToolResultSchema,
  ErrorCode as McpErrorCode,
  McpError,
  type CallToolResult,
  type Tool,
} from '@modelcontextprotocol/sdk/types.js';
import { isJsonObject, type JsonObject } from '../../common/canonical-json';
import { AppError } from '../../common/errors';
import { ToolEffect, type TurnTool } from '../turn/turn-records';
import { needsApproval, type ApprovalRules } from '../../common/approval-rules';
import type {
  ToolCallOptions,
  ToolCallRequest,
  ToolOutcome,
  ToolRunner,
} from '../turn/ports/tool-port';

/**
 * The MCP adapter: lists the tools of the Conversation's MCP servers and calls them. This
 * file is the only one that imports `@modelcontextprotocol/sdk`.
 *
 * Names. A tool is offered as `<server>/<tool>`, the name the Conversation CRD's
 * `requireApproval` rules use (`<server>/*` covers a whole server). The model adapter
 * maps that name onto what its API accepts.
 *
 * Effect class. An MCP tool is `side_effect` (committed before it runs, never re-run
 * when its outcome is unknown) unless its server marks it read-only with the
 * `readOnlyHint` tool annotation; such a tool is treated as `pure` by the turn loop,
 * meaning safe to call again. Annotations are hints from the server: we trust them
 * because the Conversation's author chose the server; a server that lies about
 * `readOnlyHint` can cause a repeated call after a crash, never a skipped approval
 * (approvals come from the rules, not from annotations).
 *
 * Outcomes (the {@link ToolRunner} contract). `call` resolves whenever the outcome is
 * known: the tool's own result (`isError` as the server set it), a JSON-RPC error the
 * server answered with (unknown tool, invalid arguments: the server refused, so nothing
 * ran), or a failure to reach the server before the request was sent (nothing ran). It
 * rejects when the request was sent and no answer will come: the signal aborted
 * (`cancelled`), the timeout passed (`deadline_exceeded`; the SDK also sends the server
 * `notifications/cancelled`, but the work may have happened), or the connection closed
 * mid-call, for example the stdio server crashed (`unavailable`). A crashed server is an
 * unknown outcome: it may have done the work and died before answering, so the turn
 * machine treats a side-effecting call as ambiguous rather than guessing.
 *
 * Reconnects. A server is started (stdio) or connected (HTTP) on first use. When its
 * connection closes (a crash, an exit, a dropped session) the next `listTools` or `call`
 * starts a fresh process or session; a call in flight at the crash is never retried here.
 *
 * Listing. A server's tools are listed once per connection and kept with it: later
 * listings answer from that copy, and a reconnect (a fresh process or session) lists
 * again. A listing that fails is not kept, so the next one asks again.
 *
 * Environment. A stdio server gets the SDK's small default environment (PATH, HOME,
 * USER, ...) plus the configured `env`, never the harness's own variables, so the model
 * API key does not reach MCP servers.
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

/** A tool of an MCP server. */
export interface McpTool {
  /** `<server>/<tool>`: the name offered to the model and used by approval rules. */
  readonly name: string;
  readonly server: string;
  /** The name on the server. */
  readonly tool: string;
  readonly description: string;
  /** JSON Schema of the arguments (`type: "object"`). */
  readonly inputSchema: JsonObject;
  /** `pure` only when the server annotates the tool `readOnlyHint: true`. */
  readonly effect: ToolEffect;
}

/** One server's tools, or why they could not be listed ({@link McpToolRunner.listToolsByServer}). */
export type McpServerListing =
  | { readonly server: string; readonly tools: readonly McpTool[] }
  | { readonly server: string; readonly error: AppError };

/** Options of {@link McpToolRunner}. */
export interface McpToolRunnerOptions {
  /** Receives what stdio servers write to stderr (for the log). @default dropped */
  readonly onStderr?: (server: string, text: string) => void;
  /** @default {@link DEFAULT_MAX_RESULT_CHARS} */
  readonly maxResultChars?: number;
  /** The client name and version the servers see. */
  readonly clientInfo?: { readonly name: string; readonly version: string };
}

/**
 * The turn-loop view of MCP tools: each with its effect and whether it needs approval
 * under `rules` (see `approval-policy.ts`).
 */
export function toTurnTools(tools: readonly McpTool[], rules: ApprovalRules): TurnTool[] {
  return tools.map((tool) => ({
    name: tool.name,
    description: tool.description,
    inputSchema: tool.inputSchema,
    effect: tool.effect,
    needsApproval: needsApproval(tool.name, rules),
  }));
}

/**
 * Splits `<server>/<tool>` at the first `/` (server names are DNS labels, so they hold
 * none; tool names may).
 */
export function splitToolName(name: string): { server: string; tool: string } | undefined {
  const slash = name.indexOf('/');
  if (slash <= 0 || slash === name.length - 1) return undefined;
  return { server: name.slice(0, slash), tool: name.slice(slash + 1) };
}

/** Lists and calls the tools of a set of MCP servers. Call {@link close} when done. */
export class McpToolRunner implements ToolRunner {
  private readonly servers = new Map<string, ServerConnection>();
  private readonly maxResultChars: number;
  private closed = false;

  /**
   * Connects lazily: nothing starts until the first `listTools` or `call`.
   *
   * @throws AppError `invalid_argument` when two servers share a name or a name or
   *   timeout is malformed.
   */
  constructor(servers: readonly McpServerConfig[], options: McpToolRunnerOptions = {}) {
    for (const config of servers) {
      if (!/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/u.test(config.name)) {
        throw new AppError(
          'invalid_argument',
          `MCP server name ${JSON.stringify(config.name)} is not a DNS label`,
          { details: { server: config.name } },
        );
      }
      if (this.servers.has(config.name)) {
        throw new AppError(
          'invalid_argument',
          `MCP server ${config.name} is configured twice; names must be unique`,
          { details: { server: config.name } },
        );
      }
      const timeoutMs = config.timeoutMs ?? DEFAULT_MCP_TIMEOUT_MS;
      if (!Number.isInteger(timeoutMs) || timeoutMs < 1) {
        throw new AppError(
          'invalid_argument',
          `MCP server ${config.name}: timeoutMs must be a positive integer, got ${timeoutMs}`,
          { details: { server: config.name } },
        );
      }
      this.servers.set(config.name, new ServerConnection(config, timeoutMs, options));
    }
    this.maxResultChars = options.maxResultChars ?? DEFAULT_MAX_RESULT_CHARS;
  }

  /** The configured servers' names, in configuration order. */
  get serverNames(): readonly string[] {
    return [...this.servers.keys()];
  }

  /**
   * The tools of every server, in server order then the server's order (kept per
   * connection; see the file comment).
   *
   * @throws AppError `unavailable` naming the server that could not be started, reached
   *   or listed; `cancelled` when the signal aborts; `failed_precondition` after `close`.
   */
  async listTools(signal: AbortSignal = new AbortController().signal): Promise<McpTool[]> {
    this.throwIfClosed();
    const tools: McpTool[] = [];
    for (const connection of this.servers.values()) {
      tools.push(...(await connection.listTools(signal)));
    }
    return tools;
  }

  /**
   * Each server's tools, or the error that kept them from being listed, in server order.
   * Servers are listed concurrently and independently: one that cannot be started,
   * reached or listed does not hide the others' tools. Kept per connection like
   * {@link listTools}.
   *
   * @throws AppError `failed_precondition` after `close`. Per-server failures (including
   *   `cancelled` when the signal aborts) are answers, not rejections.
   */
  async listToolsByServer(
    signal: AbortSignal = new AbortController().signal,
  ): Promise<McpServerListing[]> {
    this.throwIfClosed();
    return Promise.all(
      [...this.servers.entries()].map(async ([server, connection]) => {
        try {
          return { server, tools: await connection.listTools(signal) };
        } catch (error) {
          return {
            server,
            error:
              error instanceof AppError
                ? error
                : new AppError('unavailable', `MCP server ${server} did not list its tools`, {
                    cause: error,
                    details: { server },
                  }),
          };
        }
      }),
    );
  }

  /**
   * Calls `<server>/<tool>`; see the file comment for which failures resolve and which reject.
   *
   * @throws AppError `cancelled`, `deadline_exceeded` or `unavailable` when the request
   *   was sent and its outcome is unknown.
   */
  async call(request: ToolCallRequest, options: ToolCallOptions): Promise<ToolOutcome> {
    if (this.closed) return failed(`MCP tools are shut down; ${request.name} did not run.`);
    const parts = splitToolName(request.name);
    const connection = parts === undefined ? undefined : this.servers.get(parts.server);
    if (parts === undefined || connection === undefined) {
      return failed(`${request.name} is not a tool of a configured MCP server; it did not run.`);
    }
    const outcome = await connection.call(parts.tool, request, options);
    return truncate(outcome, this.maxResultChars);
  }

  /** Stops every server process and session. Idempotent. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await Promise.allSettled([...this.servers.values()].map((c) => c.close()));
  }

  private throwIfClosed(): void {
    if (this.closed) {
      throw new AppError('failed_precondition', 'MCP tools are shut down; create a new runner');
    }
  }
}

/** A live client, whether its connection has closed, and its tools once listed. */
interface Session {
  readonly client: Client;
  closed: boolean;
  tools?: readonly McpTool[];
}

/** One server: its config, its current session, and the restart-on-next-use policy. */
class ServerConnection {
  private session: Session | undefined;
  private connecting: Promise<Session> | undefined;
  private stderrTail = '';

  constructor(
    private readonly config: McpServerConfig,
    private readonly timeoutMs: number,
    private readonly options: McpToolRunnerOptions,
  ) {}

  async listTools(signal: AbortSignal): Promise<McpTool[]> {
    const name = this.config.name;
    const session = await this.connect(signal);
    if (session.tools !== undefined) return [...session.tools];
    const tools: McpTool[] = [];
    let cursor: string | undefined;
    try {
      do {
        const page = await session.client.listTools(cursor === undefined ? {} : { cursor }, {
          signal,
          timeout: this.timeoutMs,
        });
        for (const tool of page.tools) tools.push(this.toMcpTool(tool));
        cursor = page.nextCursor;
      } while (cursor !== undefined);
    } catch (error) {
      if (signal.aborted) {
        throw new AppError('cancelled', `listing the tools of MCP server ${name} was cancelled`, {
          cause: error,
          details: { server: name },
        });
      }
      if (error instanceof AppError) throw error;
      throw new AppError(
        'unavailable',
        `MCP server ${name} did not list its tools: ${errorText(error)}; check that the server runs and speaks MCP`,
        { cause: this.withStderr(error), details: { server: name } },
      );
    }
    // Kept only while this connection lives: a reconnect lists again.
    if (!session.closed) session.tools = tools;
    return [...tools];
  }

  async call(
    tool: string,
    request: ToolCallRequest,
    options: ToolCallOptions,
  ): Promise<ToolOutcome> {
    const server = this.config.name;
    const timeoutMs = Math.min(options.timeoutMs, this.timeoutMs);
    const timeout = AbortSignal.timeout(timeoutMs);
    const signal = AbortSignal.any([options.signal, timeout]);
    let session: Session;
    try {
      session = await this.connect(signal);
    } catch (error) {
      // Nothing was sent: the tool did not run, so the outcome is known.
      return failed(
        `MCP server ${server} is not available (${isCancel(error) ? 'the call was cancelled before it started' : errorText(error)}); ${request.name} did not run.`,
      );
    }
    const details = { server, tool, toolCallId: request.toolCallId };
    try {
      const result = await session.client.request(
        { method: 'tools/call', params: { name: tool, arguments: request.input } },
        CallToolResultSchema,
        // Both our signal and the SDK's timeout: the SDK cuts requests at 60 s unless told.
        { signal, timeout: timeoutMs },
      );
      return { content: renderResult(result), isError: result.isError === true };
    } catch (error) {
      if (options.signal.aborted) {
        throw new AppError(
          'cancelled',
          `MCP tool ${request.name} (${request.toolCallId}) was cancelled after it was sent; its outcome is unknown`,
          { cause: error, details },
        );
      }
      if (
        timeout.aborted ||
        (error instanceof McpError && error.code === Number(McpErrorCode.RequestTimeout))
      ) {
        throw new AppError(
          'deadline_exceeded',
          `MCP tool ${request.name} (${request.toolCallId}) gave no answer within ${timeoutMs} ms; the server was asked to cancel, but its outcome is unknown`,
          { cause: error, details: { ...details, timeoutMs } },
        );
      }
      if (
        session.closed ||
        (error instanceof McpError && error.code === Number(McpErrorCode.ConnectionClosed))
      ) {
        throw new AppError(
          'unavailable',
          `MCP server ${server} closed the connection during ${request.name} (${request.toolCallId}), for example by crashing; the outcome is unknown. The next call restarts the server.`,
          { cause: this.withStderr(error), details },
        );
      }
      if (error instanceof McpError) {
        // A JSON-RPC error answer: the server refused the request (unknown tool, bad
        // arguments), so the tool did not run and the model may correct itself.
        return failed(`MCP server ${server} refused ${tool}: ${error.message}`);
      }
      // An answer we cannot read (not a CallToolResult) or a transport failure after the
      // send: the work may have happened.
      throw new AppError(
        'unavailable',
        `MCP tool ${request.name} (${request.toolCallId}) failed without a readable answer (${errorText(error)}); its outcome is unknown`,
        { cause: error, details },
      );
    }
  }

  async close(): Promise<void> {
    const session = this.session ?? (await this.connecting?.catch(() => undefined));
    this.session = undefined;
    this.connecting = undefined;
    if (session !== undefined) await session.client.close();
  }

  /** The live session, or a new one (a new process for stdio) when there is none. */
  private async connect(signal: AbortSignal): Promise<Session> {
    if (this.session !== undefined && !this.session.closed) return this.session;
    // One start for concurrent callers; it runs on the server's timeout, not a caller's
    // signal, so one caller's cancel does not fail the others.
    this.connecting ??= this.start().finally(() => {
      this.connecting = undefined;
    });
    const starting = this.connecting;
    return new Promise<Session>((resolve, reject) => {
      const onAbort = (): void =>
        reject(
          new AppError('cancelled', `connecting to MCP server ${this.config.name} was cancelled`),
        );
      if (signal.aborted) onAbort();
      signal.addEventListener('abort', onAbort, { once: true });
      void starting
        .then(resolve, reject)
        .finally(() => signal.removeEventListener('abort', onAbort));
    });
  }

  private async start(): Promise<Session> {
    const name = this.config.name;
    const client = new Client(
      {
        name: this.options.clientInfo?.name ?? 'polychrome-harness',
        version: this.options.clientInfo?.version ?? '0.1.0',
      },
      // No sampling, roots or elicitation: the harness answers for no one but the model.
      { capabilities: {} },
    );
    const session: Session = { client, closed: false };
    client.onclose = () => {
      session.closed = true;
      if (this.session === session) this.session = undefined;
    };
    const transport = this.transport();
    try {
      await client.connect(transport, { timeout: this.timeoutMs });
    } catch (error) {
      session.closed = true;
      await client.close().catch(() => undefined);
      throw new AppError(
        'unavailable',
        `MCP server ${name} could not be ${this.config.transport === 'stdio' ? 'started' : 'reached'}: ${errorText(error)}; check its ${this.config.transport === 'stdio' ? 'command and args' : 'url'}`,
        { cause: this.withStderr(error), details: { server: name } },
      );
    }
    this.session = session;
    return session;
  }

  private transport(): Transport {
    const config = this.config;
    if (config.transport === 'http') {
      return new StreamableHTTPClientTransport(new URL(config.url), {
        ...(config.headers === undefined
          ? {}
          : { requestInit: { headers: { ...config.headers } } }),
      });
    }
    const transport = new StdioClientTransport({
      command: config.command,
      args: [...(config.args ?? [])],
      ...(config.env === undefined ? {} : { env: { ...config.env } }),
      ...(config.cwd === undefined ? {} : { cwd: config.cwd }),
      // Piped, and always read: an unread pipe fills and blocks the server.
      stderr: 'pipe',
    });
    const stderr: Readable | null = isReadable(transport.stderr) ? transport.stderr : null;
    stderr?.setEncoding('utf8');
    stderr?.on('data', (chunk: unknown) => {
      const text = String(chunk);
      this.stderrTail = (this.stderrTail + text).slice(-4096);
      this.options.onStderr?.(config.name, text);
    });
    return transport;
  }

  private toMcpTool(tool: Tool): McpTool {
    const schema: unknown = tool.inputSchema;
    if (!isJsonObject(schema)) {
      throw new AppError(
        'unavailable',
        `MCP server ${this.config.name} lists tool ${tool.name} with an input schema that is not JSON`,
        { details: { server: this.config.name, tool: tool.name } },
      );
    }
    return {
      name: `${this.config.name}/${tool.name}`,
      server: this.config.name,
      tool: tool.name,
      description: tool.description ?? tool.title ?? '',
      inputSchema: schema,
      effect: tool.annotations?.readOnlyHint === true ? ToolEffect.Pure : ToolEffect.SideEffect,
    };
  }

  /** The error, with what the server last wrote to stderr, for the log (never a message). */
  private withStderr(error: unknown): unknown {
    if (this.stderrTail === '') return error;
    return new Error(`stderr of MCP server ${this.config.name}: ${this.stderrTail}`, {
      cause: error,
    });
  }
}

function isReadable(value: unknown): value is Readable {
  return (
    typeof value === 'object' &&
    value !== null &&
    'on' in value &&
    typeof value.on === 'function' &&
    'setEncoding' in value &&
    typeof value.setEncoding === 'function'
  );
}

/** Text for the model: text as is, other content described in one line. */
function renderResult(result: CallToolResult): string {
  const parts = result.content.map((block): string => {
    switch (block.type) {
      case 'text':
        return block.text;
      case 'image':
      case 'audio':
        return `[${block.type} ${block.mimeType}, ${Math.floor((block.data.length * 3) / 4)} bytes]`;
      case 'resource_link':
        return `[resource link ${block.name}: ${block.uri}]`;
      case 'resource':
        return 'text' in block.resource && typeof block.resource.text === 'string'
          ? block.resource.text
          : `[resource ${block.resource.uri}${block.resource.mimeType === undefined ? '' : `, ${block.resource.mimeType}`}]`;
      default: {
        const never: never = block;
        return String(never);
      }
    }
  });
  if (parts.length === 0 && result.structuredContent !== undefined) {
    return JSON.stringify(result.structuredContent);
  }
  return parts.join('\n');
}

function truncate(outcome: ToolOutcome, maxChars: number): ToolOutcome {
  if (outcome.content.length <= maxChars) return outcome;
  return {
    ...outcome,
    content: `${outcome.content.slice(0, maxChars)}\n[result cut at ${maxChars} of ${outcome.content.length} characters]`,
  };
}

function failed(content: string): ToolOutcome {
  return { content, isError: true };
}

function isCancel(error: unknown): boolean {
  return error instanceof AppError && error.code === 'cancelled';
}

function errorText(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
