import { createHash, randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * A local stand-in for the Anthropic Messages API, for tests of code that uses the real
 * SDK. It speaks the wire protocol, not a mock of the SDK: `POST /v1/messages` with and
 * without `stream: true`, the server-sent events exactly as the API emits them
 * (`message_start`, `content_block_start`, `ping`, `content_block_delta` with
 * `text_delta` / `input_json_delta`, `content_block_stop`, `message_delta`,
 * `message_stop`, and the mid-stream `error` event), and errors as the API returns them
 * (`{"type":"error","error":{"type":...,"message":...},"request_id":...}` with a
 * `request-id` header and, when scripted, `retry-after`).
 *
 * Each test scripts the replies (a FIFO queue, one reply per HTTP request, retries
 * included) and then reads {@link MessagesApiServer.requests} to assert what the client
 * sent. It checks the request the way the API does first (key, version header, body
 * shape) and answers 401 or 400 without consuming a scripted reply.
 *
 * A long-running stack, where a test cannot know which request comes when, sets a
 * {@link Responder} instead (or as well): when the queue is empty it computes the reply
 * from the request. {@link echoResponder} is a ready-made one with a small convention
 * (echo, tool calls and slow streams asked for in the user's text).
 */

/** A block of a scripted reply. */
export type ScriptedBlock =
  | {
      readonly type: 'text';
      readonly text: string;
      /** How the text is split into `text_delta` events. @default words */
      readonly chunks?: readonly string[];
    }
  | {
      readonly type: 'tool_use';
      readonly id: string;
      readonly name: string;
      readonly input: Readonly<Record<string, unknown>>;
      /**
       * How the JSON of `input` is split into `input_json_delta` events; joined they must
       * equal the JSON text the client will parse. @default the JSON in pieces of 7 characters
       */
      readonly jsonChunks?: readonly string[];
    };

/** Stop reasons the API sends. */
export type ApiStopReason =
  | 'end_turn'
  | 'max_tokens'
  | 'stop_sequence'
  | 'tool_use'
  | 'pause_turn'
  | 'refusal'
  | 'model_context_window_exceeded';

/** One scripted answer to one HTTP request. */
export type ScriptedReply =
  | {
      readonly kind: 'message';
      readonly content: readonly ScriptedBlock[];
      /** @default tool_use when a block is a tool_use, else end_turn */
      readonly stopReason?: ApiStopReason;
      /** @default { input_tokens: 10, output_tokens: 5 }; cache counts 0, in message_start */
      readonly usage?: {
        readonly input_tokens: number;
        readonly output_tokens: number;
        readonly cache_read_input_tokens?: number;
        readonly cache_creation_input_tokens?: number;
      };
      /** The model the reply names. @default the request's model */
      readonly model?: string;
      /**
       * Streaming only: send this many events, then hold the response open until the
       * client goes away (for cancellation tests).
       */
      readonly holdAfterEvents?: number;
      /**
       * Streaming only: after this many events send an `error` event and end the stream,
       * as the API does when it is overloaded mid-response.
       */
      readonly errorAfterEvents?: { readonly events: number; readonly type: string };
      /**
       * Take this long: streaming, the events are spread evenly over it (the first at
       * once, the last after `durationMs`), so a client sees text arrive piece by piece;
       * not streaming, the whole response waits this long. @default 0
       */
      readonly durationMs?: number;
    }
  | {
      readonly kind: 'error';
      /** 400, 401, 403, 404, 413, 429, 500, 529, ... */
      readonly status: number;
      /** @default the API's type for the status (rate_limit_error, overloaded_error, ...) */
      readonly type?: string;
      /** @default a message like the API's */
      readonly message?: string;
      /** The `retry-after` header, in seconds (or an HTTP date). */
      readonly retryAfter?: string;
    }
  /** Close the connection without answering (a connection error on the client). */
  | { readonly kind: 'drop' };

/** A scripted reply that answers with a message. */
export type MessageReply = Extract<ScriptedReply, { kind: 'message' }>;

/** A request as the server received it. */
export interface RecordedRequest {
  readonly method: string;
  readonly path: string;
  readonly headers: Readonly<Record<string, string | string[] | undefined>>;
  /** The parsed JSON body (`undefined` when it was not JSON). */
  readonly body: unknown;
  readonly stream: boolean;
  /** True once the client went away before the response ended (cancellation). */
  aborted: boolean;
}

/**
 * Computes the reply to a request that found the queue empty (the request passed the
 * server's checks, so `body` is an object with `model`, `max_tokens` and `messages`). A
 * throw or a rejection answers 500 `api_error` with its message.
 */
export type Responder = (request: RecordedRequest) => ScriptedReply | Promise<ScriptedReply>;

/** The system prompt a request was sent with, its blocks' text joined; '' when none. */
export function systemOf(request: RecordedRequest): string {
  const system = isRecord(request.body) ? request.body.system : undefined;
  if (typeof system === 'string') return system;
  return Array.isArray(system)
    ? system.map((block: { text?: string }) => block.text ?? '').join('')
    : '';
}

/** Options of {@link MessagesApiServer.start}. */
export interface MessagesApiServerOptions {
  /** The key `x-api-key` or `authorization: Bearer` must carry; any other gets 401. @default 'test-key' */
  readonly apiKey?: string;
  /** Answers requests while the queue is empty. @default none: such a request gets 500 */
  readonly respond?: Responder;
  /** The loopback port to listen on (a long-running stack's fixed address). @default a free one */
  readonly port?: number;
  /**
   * Whether to keep every request in {@link MessagesApiServer.requests}: a server that runs
   * for hours (`make dev`'s demo model) keeps none. @default true
   */
  readonly record?: boolean;
}

const ERROR_TYPES: Readonly<Record<number, string>> = {
  400: 'invalid_request_error',
  401: 'authentication_error',
  402: 'billing_error',
  403: 'permission_error',
  404: 'not_found_error',
  413: 'request_too_large',
  429: 'rate_limit_error',
  500: 'api_error',
  504: 'timeout_error',
  529: 'overloaded_error',
};

const ERROR_MESSAGES: Readonly<Record<string, string>> = {
  invalid_request_error: 'messages: field required',
  authentication_error: 'invalid x-api-key',
  billing_error: 'Your credit balance is too low to access the Anthropic API.',
  permission_error: 'Your API key does not have permission to use the specified resource.',
  not_found_error: 'model: not found',
  request_too_large: 'Request exceeds the maximum allowed number of bytes.',
  rate_limit_error: 'Number of request tokens has exceeded your per-minute rate limit.',
  api_error: 'Internal server error',
  timeout_error: 'Request timed out',
  overloaded_error: 'Overloaded',
};

/** The server. Start it with {@link MessagesApiServer.start}; `close` it after the test. */
export class MessagesApiServer {
  /** Requests in arrival order, rejected ones included. */
  readonly requests: RecordedRequest[] = [];
  private readonly queue: ScriptedReply[] = [];
  private readonly server: Server;
  private readonly key: string;
  private readonly open = new Set<ServerResponse>();
  private readonly timers = new Set<NodeJS.Timeout>();
  private messageCount = 0;
  private responder: Responder | undefined;

  private constructor(
    server: Server,
    apiKey: string,
    respond: Responder | undefined,
    private readonly record: boolean,
  ) {
    this.server = server;
    this.key = apiKey;
    this.responder = respond;
  }

  /** Listens on a free loopback port. */
  static async start(options: MessagesApiServerOptions = {}): Promise<MessagesApiServer> {
    const server = createServer();
    const api = new MessagesApiServer(
      server,
      options.apiKey ?? 'test-key',
      options.respond,
      options.record ?? true,
    );
    server.on('request', (req: IncomingMessage, res: ServerResponse) => api.handle(req, res));
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(options.port ?? 0, '127.0.0.1', () => resolve());
    });
    return api;
  }

  /** The base URL to give the SDK (`baseURL`). */
  get url(): string {
    const address = this.server.address();
    if (address === null || typeof address === 'string') throw new Error('server not listening');
    return `http://127.0.0.1:${(address satisfies AddressInfo).port}`;
  }

  /** The API key requests must carry (give it to the client as its key). */
  get apiKey(): string {
    return this.key;
  }

  /** Replies not yet used. */
  get pending(): number {
    return this.queue.length;
  }

  /** Appends replies; each HTTP request to `/v1/messages` takes the next one. */
  enqueue(...replies: ScriptedReply[]): void {
    this.queue.push(...replies);
  }

  /** Sets (or, with `undefined`, removes) the responder used while the queue is empty. */
  setResponder(respond: Responder | undefined): void {
    this.responder = respond;
  }

  /** The parsed bodies of the message requests, in order. */
  get bodies(): unknown[] {
    return this.requests.filter((r) => r.path === '/v1/messages').map((r) => r.body);
  }

  /** Stops listening and cuts open responses. Idempotent. */
  async close(): Promise<void> {
    for (const timer of this.timers) clearTimeout(timer);
    this.timers.clear();
    for (const res of this.open) res.destroy();
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private handle(req: IncomingMessage, res: ServerResponse): void {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const text = Buffer.concat(chunks).toString('utf8');
      let body: unknown;
      try {
        body = JSON.parse(text);
      } catch {
        body = undefined;
      }
      const stream = isRecord(body) && body.stream === true;
      const recorded: RecordedRequest = {
        method: req.method ?? '',
        path: (req.url ?? '').split('?')[0] ?? '',
        headers: req.headers,
        body,
        stream,
        aborted: false,
      };
      if (this.record) this.requests.push(recorded);
      this.open.add(res);
      res.on('close', () => {
        this.open.delete(res);
        if (!res.writableEnded) recorded.aborted = true;
      });
      this.answer(recorded, res);
    });
  }

  private answer(request: RecordedRequest, res: ServerResponse): void {
    if (request.method !== 'POST' || request.path !== '/v1/messages') {
      this.sendError(res, 404, 'not_found_error', `${request.method} ${request.path}: not found`);
      return;
    }
    // SDK 1.x sends the key as a bearer token; older clients send `x-api-key`. The API takes both.
    const bearer = /^Bearer (.+)$/u.exec(String(request.headers.authorization ?? ''))?.[1];
    if ((request.headers['x-api-key'] ?? bearer) !== this.key) {
      this.sendError(res, 401, 'authentication_error', 'invalid x-api-key');
      return;
    }
    if (typeof request.headers['anthropic-version'] !== 'string') {
      this.sendError(res, 400, 'invalid_request_error', 'anthropic-version: header is required');
      return;
    }
    const problem = checkBody(request.body);
    if (problem !== undefined) {
      this.sendError(res, 400, 'invalid_request_error', problem);
      return;
    }
    const reply = this.queue.shift();
    if (reply !== undefined) {
      this.reply(request, res, reply);
      return;
    }
    const respond = this.responder;
    if (respond === undefined) {
      this.sendError(res, 500, 'api_error', 'test server: no scripted reply left for this request');
      return;
    }
    Promise.resolve()
      .then(() => respond(request))
      .then(
        (computed) => {
          if (!res.destroyed) this.reply(request, res, computed);
        },
        (err: unknown) => {
          if (res.destroyed) return;
          const why = err instanceof Error ? err.message : String(err);
          this.sendError(res, 500, 'api_error', `test server: the responder failed: ${why}`);
        },
      );
  }

  private reply(request: RecordedRequest, res: ServerResponse, reply: ScriptedReply): void {
    const requestModel = isRecord(request.body) ? String(request.body.model) : '';
    switch (reply.kind) {
      case 'drop':
        res.socket?.destroy();
        return;
      case 'error': {
        const type = reply.type ?? ERROR_TYPES[reply.status] ?? 'api_error';
        const headers: Record<string, string> = {};
        if (reply.retryAfter !== undefined) headers['retry-after'] = reply.retryAfter;
        this.sendError(
          res,
          reply.status,
          type,
          reply.message ?? ERROR_MESSAGES[type] ?? 'error',
          headers,
        );
        return;
      }
      case 'message': {
        const id = `msg_${String(++this.messageCount).padStart(4, '0')}`;
        const model = reply.model ?? requestModel;
        if (request.stream) this.stream(res, id, model, reply);
        else
          this.later(reply.durationMs ?? 0, res, () =>
            this.sendJson(res, 200, fullMessage(id, model, reply)),
          );
        return;
      }
      default: {
        const never: never = reply;
        return never;
      }
    }
  }

  private stream(res: ServerResponse, id: string, model: string, reply: MessageReply): void {
    res.writeHead(200, {
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-cache',
      'request-id': requestId(),
    });
    const events = streamEvents(id, model, reply);
    const gapMs = (reply.durationMs ?? 0) / Math.max(1, events.length - 1);
    // Sends events from `sent` on: all at once, or one per gap when the reply takes time.
    const sendFrom = (first: number): void => {
      for (let sent = first; sent < events.length; sent++) {
        if (reply.errorAfterEvents !== undefined && sent === reply.errorAfterEvents.events) {
          const type = reply.errorAfterEvents.type;
          writeEvent(res, 'error', {
            type: 'error',
            error: { type, message: ERROR_MESSAGES[type] ?? 'error' },
          });
          res.end();
          return;
        }
        if (reply.holdAfterEvents !== undefined && sent === reply.holdAfterEvents) return;
        const [event, data] = events[sent] ?? [];
        if (event !== undefined) writeEvent(res, event, data);
        if (gapMs > 0 && sent + 1 < events.length) {
          const next = sent + 1;
          this.later(gapMs, res, () => sendFrom(next));
          return;
        }
      }
      res.end();
    };
    sendFrom(0);
  }

  /** Runs `then` after `ms` (at once when 0) unless the response is gone by then. */
  private later(ms: number, res: ServerResponse, then: () => void): void {
    if (ms <= 0) {
      then();
      return;
    }
    const timer = setTimeout(() => {
      this.timers.delete(timer);
      if (!res.destroyed) then();
    }, ms);
    this.timers.add(timer);
  }

  private sendError(
    res: ServerResponse,
    status: number,
    type: string,
    message: string,
    headers: Record<string, string> = {},
  ): void {
    const id = requestId();
    this.sendJson(
      res,
      status,
      { type: 'error', error: { type, message }, request_id: id },
      { ...headers, 'request-id': id },
    );
  }

  private sendJson(
    res: ServerResponse,
    status: number,
    body: unknown,
    headers: Record<string, string> = {},
  ): void {
    const text = JSON.stringify(body);
    res.writeHead(status, {
      'content-type': 'application/json',
      'content-length': Buffer.byteLength(text),
      ...(headers['request-id'] === undefined ? { 'request-id': requestId() } : {}),
      ...headers,
    });
    res.end(text);
  }
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function requestId(): string {
  return `req_${randomBytes(12).toString('hex')}`;
}

/** The checks the API makes before it runs a model: the ones our adapter could get wrong. */
function checkBody(body: unknown): string | undefined {
  if (!isRecord(body)) return 'request body: not a JSON object';
  if (typeof body.model !== 'string' || body.model === '') return 'model: field required';
  if (typeof body.max_tokens !== 'number' || !Number.isInteger(body.max_tokens)) {
    return 'max_tokens: field required';
  }
  if (!Array.isArray(body.messages) || body.messages.length === 0) {
    return 'messages: at least one message is required';
  }
  for (const [i, message] of body.messages.entries()) {
    if (!isRecord(message) || (message.role !== 'user' && message.role !== 'assistant')) {
      return `messages.${i}.role: Input should be 'user' or 'assistant'`;
    }
    if (Array.isArray(message.content)) {
      for (const [j, block] of message.content.entries()) {
        if (isRecord(block) && block.type === 'text' && block.text === '') {
          return `messages.${i}.content.${j}.text: text content blocks must be non-empty`;
        }
      }
    }
  }
  if (body.tools !== undefined) {
    if (!Array.isArray(body.tools)) return 'tools: Input should be a valid list';
    for (const [i, tool] of body.tools.entries()) {
      if (!isRecord(tool) || typeof tool.name !== 'string')
        return `tools.${i}.name: field required`;
      if (!/^[a-zA-Z0-9_-]{1,64}$/u.test(tool.name)) {
        return `tools.${i}.custom.name: String should match pattern '^[a-zA-Z0-9_-]{1,64}$'`;
      }
      if (!isRecord(tool.input_schema) || tool.input_schema.type !== 'object') {
        return `tools.${i}.custom.input_schema.type: Input should be 'object'`;
      }
    }
  }
  return undefined;
}

function stopReasonOf(reply: MessageReply): ApiStopReason {
  return (
    reply.stopReason ?? (reply.content.some((b) => b.type === 'tool_use') ? 'tool_use' : 'end_turn')
  );
}

function usageOf(reply: MessageReply): NonNullable<MessageReply['usage']> {
  return reply.usage ?? { input_tokens: 10, output_tokens: 5 };
}

function fullUsage(
  usage: NonNullable<MessageReply['usage']>,
  output = usage.output_tokens,
): Record<string, unknown> {
  return {
    input_tokens: usage.input_tokens,
    cache_creation_input_tokens: usage.cache_creation_input_tokens ?? 0,
    cache_read_input_tokens: usage.cache_read_input_tokens ?? 0,
    cache_creation: { ephemeral_5m_input_tokens: 0, ephemeral_1h_input_tokens: 0 },
    output_tokens: output,
    service_tier: 'standard',
  };
}

function fullMessage(id: string, model: string, reply: MessageReply): Record<string, unknown> {
  const usage = usageOf(reply);
  return {
    id,
    type: 'message',
    role: 'assistant',
    model,
    content: reply.content.map((block) =>
      block.type === 'text'
        ? { type: 'text', text: block.text }
        : { type: 'tool_use', id: block.id, name: block.name, input: block.input },
    ),
    stop_reason: stopReasonOf(reply),
    stop_sequence: null,
    usage: fullUsage(usage),
  };
}

/** The events of one streamed reply, in the order and shape the API sends them. */
function streamEvents(
  id: string,
  model: string,
  reply: MessageReply,
): [string, Record<string, unknown>][] {
  const usage = usageOf(reply);
  const events: [string, Record<string, unknown>][] = [
    [
      'message_start',
      {
        type: 'message_start',
        message: {
          id,
          type: 'message',
          role: 'assistant',
          model,
          content: [],
          stop_reason: null,
          stop_sequence: null,
          // message_start reports the input tokens and a first output token count.
          usage: fullUsage(usage, 1),
        },
      },
    ],
  ];
  reply.content.forEach((block, index) => {
    if (block.type === 'text') {
      events.push([
        'content_block_start',
        { type: 'content_block_start', index, content_block: { type: 'text', text: '' } },
      ]);
      if (index === 0) events.push(['ping', { type: 'ping' }]);
      for (const text of block.chunks ?? block.text.match(/\S+\s*|\s+/gu) ?? []) {
        events.push([
          'content_block_delta',
          { type: 'content_block_delta', index, delta: { type: 'text_delta', text } },
        ]);
      }
    } else {
      events.push([
        'content_block_start',
        {
          type: 'content_block_start',
          index,
          content_block: { type: 'tool_use', id: block.id, name: block.name, input: {} },
        },
      ]);
      if (index === 0) events.push(['ping', { type: 'ping' }]);
      // The API opens every tool input with an empty fragment, then streams the JSON.
      const json = JSON.stringify(block.input);
      const pieces = block.jsonChunks ?? [''].concat(json.match(/[\s\S]{1,7}/gu) ?? []);
      for (const partial_json of pieces) {
        events.push([
          'content_block_delta',
          { type: 'content_block_delta', index, delta: { type: 'input_json_delta', partial_json } },
        ]);
      }
    }
    events.push(['content_block_stop', { type: 'content_block_stop', index }]);
  });
  events.push(
    [
      'message_delta',
      {
        type: 'message_delta',
        delta: { stop_reason: stopReasonOf(reply), stop_sequence: null },
        usage: { output_tokens: usage.output_tokens },
      },
    ],
    ['message_stop', { type: 'message_stop' }],
  );
  return events;
}

function writeEvent(res: ServerResponse, event: string, data: unknown): void {
  res.write(`event: ${event}\ndata: ${JSON.stringify(data)}\n\n`);
}

// ---- the echo responder ----

/** The directive asking {@link echoResponder} for a tool call: `[[tool:NAME {json}]]`. */
export function toolDirective(name: string, input: Readonly<Record<string, unknown>> = {}): string {
  return `[[tool:${name} ${JSON.stringify(input)}]]`;
}

/** The directive asking {@link echoResponder} to stream its reply over `ms` milliseconds. */
export function slowDirective(ms: number): string {
  return `[[slow:${ms}]]`;
}

const TOOL_DIRECTIVE = /\[\[tool:([^\s\]]+)(?:\s+(\{[\s\S]*?\}))?\s*\]\]/gu;
const SLOW_DIRECTIVE = /\[\[slow:(\d+)\]\]/u;
/** Tool names the API accepts. */
const API_TOOL_NAME = /^[a-zA-Z0-9_-]{1,64}$/u;
/** A slow reply is streamed in this many text pieces (fewer for a shorter text). */
const SLOW_PIECES = 10;

interface ToolDirective {
  readonly name: string;
  readonly input: Record<string, unknown> | undefined;
  /** Why `input` could not be read. */
  readonly problem: string | undefined;
}

/** The content of a request message as blocks (a string is one text block). */
function blocksOf(message: unknown): Record<string, unknown>[] {
  if (!isRecord(message)) return [];
  const content = message.content;
  if (typeof content === 'string') return [{ type: 'text', text: content }];
  return Array.isArray(content) ? content.filter(isRecord) : [];
}

function textOf(blocks: readonly Record<string, unknown>[]): string {
  return blocks
    .filter((b) => b.type === 'text' && typeof b.text === 'string')
    .map((b) => String(b.text))
    .join('\n');
}

/** The text of a `tool_result`'s content (a string or text blocks). */
function resultText(block: Record<string, unknown>): string {
  const content = block.content;
  if (typeof content === 'string') return content;
  return Array.isArray(content) ? textOf(content.filter(isRecord)) : '';
}

function toolDirectives(text: string): ToolDirective[] {
  return [...text.matchAll(TOOL_DIRECTIVE)].map((match) => {
    const name = match[1] ?? '';
    const json = match[2];
    if (json === undefined) return { name, input: {}, problem: undefined };
    try {
      const input: unknown = JSON.parse(json);
      return isRecord(input)
        ? { name, input, problem: undefined }
        : { name, input: undefined, problem: 'the input is not a JSON object' };
    } catch (err: unknown) {
      return { name, input: undefined, problem: err instanceof Error ? err.message : String(err) };
    }
  });
}

/**
 * The name to put on a tool_use for the directive's `name`: the offered tool of that name,
 * else the offered tool whose name is `name` made API-safe (`/` → `__`, other characters
 * outside `[a-zA-Z0-9_-]` → `_`, as clients alias namespaced tools), else that safe name.
 */
function apiNameFor(name: string, tools: unknown): string {
  const offered = new Set(
    (Array.isArray(tools) ? tools : [])
      .map((t) => (isRecord(t) ? t.name : undefined))
      .filter((n): n is string => typeof n === 'string'),
  );
  if (offered.has(name)) return name;
  const safe = name.replaceAll('/', '__').replace(/[^a-zA-Z0-9_-]/gu, '_');
  if (offered.has(safe) || !API_TOOL_NAME.test(name)) return safe.slice(0, 64);
  return name;
}

/** A tool_use id stable for one conversation prefix and directive: retries get the same id. */
function stableToolUseId(prefix: readonly unknown[], index: number): string {
  const digest = createHash('sha256')
    .update(JSON.stringify(prefix))
    .update(`\n${index}`)
    .digest('hex');
  return `toolu_echo_${digest.slice(0, 24)}`;
}

function textReply(text: string, slowMs: number | undefined): MessageReply {
  if (slowMs === undefined) return { kind: 'message', content: [{ type: 'text', text }] };
  const count = Math.max(1, Math.min(SLOW_PIECES, text.length));
  const cut = (i: number): number => Math.round((i * text.length) / count);
  const chunks = Array.from({ length: count }, (_, i) => text.slice(cut(i), cut(i + 1)));
  return { kind: 'message', content: [{ type: 'text', text, chunks }], durationMs: slowMs };
}

/**
 * The reply {@link echoResponder} computes for a request body.
 *
 * The convention, read from the *prompt*: the last user message that has text and no
 * `tool_result` (a string content counts as text):
 *
 * 1. For each `[[tool:NAME {json}]]` in the prompt, in order (`{json}` is optional and
 *    must be a JSON object): if no `tool_result` after the prompt answers it yet, reply
 *    with that one `tool_use` (stop reason `tool_use`). Its id is
 *    `toolu_echo_<24 hex of SHA-256 over the messages up to the prompt and the directive's
 *    index>`, so a retried or replayed request gets the same id. The name is NAME, or the
 *    offered tool that is NAME with `/` written `__`. Skipped when `tool_choice` is
 *    `none`. An unreadable `{json}` gets a text reply saying so.
 * 2. Else, when the last message carries `tool_result` blocks: one line per result,
 *    `tool NAME said: <result text>` (NAME as in the directive), joined by newlines.
 * 3. Else: `echo: <prompt text>` (directives included, verbatim).
 *
 * `[[slow:MS]]` in the prompt makes every text reply take MS milliseconds (streamed in
 * ten pieces spread over that time; a non-streaming reply waits), for tests that
 * kill something mid-stream.
 */
export function echoReply(body: unknown): MessageReply {
  const messages: unknown[] = isRecord(body) && Array.isArray(body.messages) ? body.messages : [];
  let promptIndex = -1;
  for (let i = messages.length - 1; i >= 0 && promptIndex < 0; i--) {
    const message = messages[i];
    const blocks = blocksOf(message);
    if (
      isRecord(message) &&
      message.role === 'user' &&
      blocks.some((b) => b.type === 'text') &&
      !blocks.some((b) => b.type === 'tool_result')
    ) {
      promptIndex = i;
    }
  }
  const prompt = promptIndex < 0 ? '' : textOf(blocksOf(messages[promptIndex]));
  const slowText = SLOW_DIRECTIVE.exec(prompt)?.[1];
  const slowMs = slowText === undefined ? undefined : Number(slowText);
  const toolsAllowed = !(
    isRecord(body) &&
    isRecord(body.tool_choice) &&
    body.tool_choice.type === 'none'
  );

  const prefix = messages.slice(0, promptIndex + 1);
  const directives = promptIndex < 0 ? [] : toolDirectives(prompt);
  const nameById = new Map(directives.map((d, i) => [stableToolUseId(prefix, i), d.name]));
  const answered = new Set(
    messages
      .slice(promptIndex + 1)
      .flatMap(blocksOf)
      .filter((b) => b.type === 'tool_result')
      .map((b) => String(b.tool_use_id)),
  );
  if (toolsAllowed) {
    for (const [index, directive] of directives.entries()) {
      const id = stableToolUseId(prefix, index);
      if (answered.has(id)) continue;
      if (directive.input === undefined) {
        return textReply(
          `echo responder: cannot read the input of [[tool:${directive.name}]]: ${directive.problem ?? ''}`,
          slowMs,
        );
      }
      return {
        kind: 'message',
        content: [
          {
            type: 'tool_use',
            id,
            name: apiNameFor(directive.name, isRecord(body) ? body.tools : undefined),
            input: directive.input,
          },
        ],
      };
    }
  }
  const results = blocksOf(messages[messages.length - 1]).filter((b) => b.type === 'tool_result');
  if (results.length > 0 && messages.length - 1 > promptIndex) {
    const lines = results.map((block) => {
      const id = String(block.tool_use_id);
      return `tool ${nameById.get(id) ?? id} said: ${resultText(block)}`;
    });
    return textReply(lines.join('\n'), slowMs);
  }
  return textReply(`echo: ${prompt}`, slowMs);
}

/**
 * A {@link Responder} that answers every request deterministically from its messages,
 * following the convention of {@link echoReply}: `echo: <text>`, tool calls asked for
 * with `[[tool:NAME {json}]]` (see {@link toolDirective}) and their results reported as
 * `tool NAME said: <result>`, and slow streams with `[[slow:MS]]` ({@link slowDirective}).
 */
export const echoResponder: Responder = (request) => echoReply(request.body);
