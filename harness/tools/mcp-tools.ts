import { needsApproval, type ApprovalRules } from '../../common/approval-rules';
import { AppError } from '../../common/errors';
import type {
  ToolCallOptions,
  ToolCallRequest,
  ToolOutcome,
  ToolRunner,
} from '../turn/ports/tool-port';
import type { TurnTool } from '../turn/turn-records';
import { ServerConnection, serverAnswer, type McpCallAnswer, type McpTool } from './mcp-connection';
import { failed, renderResult, truncate } from './mcp-result';
import { paidCallMeta, paidOutcomeOf, paymentRequiredIn } from './mcp-payment';
import { mcpResourceUrl } from '../../common/payment-approval';
import type { JsonObject } from '../../common/canonical-json';
import {
  paymentNotTaken,
  type McpPaidOutcome,
  type McpPaymentToSend,
} from '../turn/ports/payment-port';
import {
  DEFAULT_MAX_RESULT_CHARS,
  DEFAULT_MCP_TIMEOUT_MS,
  type McpServerConfig,
  type McpToolRunnerOptions,
} from './mcp-server-config';

/**
 * The MCP adapter: lists the tools of the Conversation's MCP servers and calls them. The
 * `mcp-*` files are the only ones that import `@modelcontextprotocol/sdk`; one server's
 * session is `mcp-connection.ts`.
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

/** One server's tools, or why they could not be listed ({@link McpToolRunner.listToolsByServer}). */
export type McpServerListing =
  | { readonly server: string; readonly tools: readonly McpTool[] }
  | { readonly server: string; readonly error: AppError };

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
    const found = this.serverOf(request.name);
    if (found === undefined) {
      return failed(`${request.name} is not a tool of a configured MCP server; it did not run.`);
    }
    const answer = await found.connection.call(found.tool, request, options);
    const answered = serverAnswer(answer);
    const required = answered && paymentRequiredIn(answered);
    const url = mcpResourceUrl(request.name);
    const outcome =
      answer.kind === 'result'
        ? { content: renderResult(answer.result), isError: answer.result.isError === true }
        : answer.outcome;
    if (required !== undefined && url !== undefined) {
      // Not the call's result: the turn sends the challenge to the control plane.
      return { ...outcome, paymentRequired: { url, headers: [], mcpPaymentRequired: required } };
    }
    return answer.kind === 'result' ? truncate(outcome, this.maxResultChars) : outcome;
  }

  /**
   * Calls `<server>/<tool>` again with the payment the control plane signed, under its
   * protocol's `_meta` key (mcp-payment.ts; docs/payments.md, "A paid MCP tool"). The
   * payment is put in the request and nowhere else: never logged, never in a span.
   */
  async callPaid(
    request: ToolCallRequest,
    payment: McpPaymentToSend,
    options: ToolCallOptions,
  ): Promise<McpPaidOutcome> {
    const found = this.closed ? undefined : this.serverOf(request.name);
    if (found === undefined)
      return paymentNotTaken(`${request.name} is not reachable; the paid call was not sent.`);
    let meta: JsonObject;
    try {
      meta = paidCallMeta(payment.payment, payment.protocol);
    } catch (error) {
      const why = error instanceof AppError ? error.message : String(error);
      return paymentNotTaken(
        `the control plane's payment for ${request.name} cannot be sent (${why}); it was not sent.`,
      );
    }
    let answer: McpCallAnswer;
    try {
      answer = await found.connection.call(found.tool, request, options, meta);
    } catch (error) {
      const reason = error instanceof AppError ? error.message : String(error);
      return {
        content: '',
        isError: true,
        paymentResponse: '',
        paymentNotTaken: false,
        outcomeUnknownReason: reason,
      };
    }
    return paidOutcomeOf(
      answer,
      payment.protocol,
      ({ result }) =>
        truncate({ content: renderResult(result), isError: false }, this.maxResultChars).content,
    );
  }

  /** The connection and the server's tool name of `<server>/<tool>`, if configured. */
  private serverOf(name: string): { connection: ServerConnection; tool: string } | undefined {
    const parts = splitToolName(name);
    const connection = parts === undefined ? undefined : this.servers.get(parts.server);
    return parts === undefined || connection === undefined
      ? undefined
      : { connection, tool: parts.tool };
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
