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
import { setActiveSpanAttributes, traceMeta } from '../../common/tracing';
import type { ToolCallOptions, ToolCallRequest, ToolOutcome } from '../turn/ports/tool-port';
import { ToolEffect } from '../turn/turn-records';
import { failed } from './mcp-result';
import type { McpServerConfig, McpToolRunnerOptions } from './mcp-server-config';

/**
 * One MCP server as the adapter speaks to it (see mcp-tools.ts for the rules): its
 * session, started (stdio) or connected (HTTP) on first use and again on the next use
 * after it closes; its tools listed once per session; a call's failure told apart as a
 * known outcome (nothing ran, or the server refused) or an unknown one (rejects).
 */

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

/** A JSON-RPC error a server answered a call with. */
export interface McpErrorAnswer {
  readonly code: number;
  readonly message: string;
  readonly data?: unknown;
}

/** What a server answered a call: its result, or the JSON-RPC error it answered instead. */
export type McpAnswer = { readonly result: CallToolResult } | { readonly error: McpErrorAnswer };

/**
 * A call's answer: the server's result, or the outcome of a call that did not run, with
 * the JSON-RPC error the server answered when it refused the request (`error`).
 */
export type McpCallAnswer =
  | { readonly kind: 'result'; readonly result: CallToolResult }
  | { readonly kind: 'not_run'; readonly outcome: ToolOutcome; readonly error?: McpErrorAnswer };

/** What the server answered a call, when it answered: its result or its JSON-RPC error. */
export function serverAnswer(answer: McpCallAnswer): McpAnswer | undefined {
  if (answer.kind === 'result') return { result: answer.result };
  return answer.error === undefined ? undefined : { error: answer.error };
}

/** A live client, whether its connection has closed, and its tools once listed. */
interface Session {
  readonly client: Client;
  closed: boolean;
  tools?: readonly McpTool[];
}

/** One server: its config, its current session, and the restart-on-next-use policy. */
export class ServerConnection {
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

  /**
   * Calls `tool` with the request's arguments, and `meta` added to the call's `_meta` (a
   * paid call's payment). Resolves with the server's result, or with the outcome of a
   * call that did not run; see mcp-tools.ts for which failures reject.
   */
  async call(
    tool: string,
    request: ToolCallRequest,
    options: ToolCallOptions,
    meta: JsonObject = {},
  ): Promise<McpCallAnswer> {
    const server = this.config.name;
    const timeoutMs = Math.min(options.timeoutMs, this.timeoutMs);
    const timeout = AbortSignal.timeout(timeoutMs);
    const signal = AbortSignal.any([options.signal, timeout]);
    let session: Session;
    try {
      session = await this.connect(signal);
    } catch (error) {
      // Nothing was sent: the tool did not run, so the outcome is known.
      return {
        kind: 'not_run',
        outcome: failed(
          `MCP server ${server} is not available (${isCancel(error) ? 'the call was cancelled before it started' : errorText(error)}); ${request.name} did not run.`,
        ),
      };
    }
    const details = { server, tool, toolCallId: request.toolCallId };
    // The call is the active execute_tool span's (traced-tools.ts): its transport and
    // session, and its context to the server in `_meta` (MCP semantic conventions).
    const sessionId = session.client.transport?.sessionId;
    setActiveSpanAttributes({
      'network.transport': this.config.transport === 'stdio' ? 'pipe' : 'tcp',
      ...(sessionId === undefined ? {} : { 'mcp.session.id': sessionId }),
    });
    const callMeta = { ...traceMeta(), ...meta };
    try {
      const result = await session.client.request(
        {
          method: 'tools/call',
          params: {
            name: tool,
            arguments: request.input,
            ...(Object.keys(callMeta).length === 0 ? {} : { _meta: callMeta }),
          },
        },
        CallToolResultSchema,
        // Both our signal and the SDK's timeout: the SDK cuts requests at 60 s unless told.
        { signal, timeout: timeoutMs },
      );
      return { kind: 'result', result };
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
        return {
          kind: 'not_run',
          outcome: failed(`MCP server ${server} refused ${tool}: ${error.message}`),
          error: { code: error.code, message: error.message, data: error.data },
        };
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

function isCancel(error: unknown): boolean {
  return error instanceof AppError && error.code === 'cancelled';
}

function errorText(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
