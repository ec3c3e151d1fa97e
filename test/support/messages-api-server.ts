import { randomBytes } from 'node:crypto';
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
      /** @default { input_tokens: 10, output_tokens: 5 } */
      readonly usage?: { readonly input_tokens: number; readonly output_tokens: number };
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

/** Options of {@link MessagesApiServer.start}. */
export interface MessagesApiServerOptions {
  /** The key `x-api-key` or `authorization: Bearer` must carry; any other gets 401. @default 'test-key' */
  readonly apiKey?: string;
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
  private readonly apiKey: string;
  private readonly open = new Set<ServerResponse>();
  private messageCount = 0;

  private constructor(server: Server, apiKey: string) {
    this.server = server;
    this.apiKey = apiKey;
  }

  /** Listens on a free loopback port. */
  static async start(options: MessagesApiServerOptions = {}): Promise<MessagesApiServer> {
    const server = createServer();
    const api = new MessagesApiServer(server, options.apiKey ?? 'test-key');
    server.on('request', (req: IncomingMessage, res: ServerResponse) => api.handle(req, res));
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(0, '127.0.0.1', () => resolve());
    });
    return api;
  }

  /** The base URL to give the SDK (`baseURL`). */
  get url(): string {
    const address = this.server.address();
    if (address === null || typeof address === 'string') throw new Error('server not listening');
    return `http://127.0.0.1:${(address satisfies AddressInfo).port}`;
  }

  /** Replies not yet used. */
  get pending(): number {
    return this.queue.length;
  }

  /** Appends replies; each HTTP request to `/v1/messages` takes the next one. */
  enqueue(...replies: ScriptedReply[]): void {
    this.queue.push(...replies);
  }

  /** The parsed bodies of the message requests, in order. */
  get bodies(): unknown[] {
    return this.requests.filter((r) => r.path === '/v1/messages').map((r) => r.body);
  }

  /** Stops listening and cuts open responses. Idempotent. */
  async close(): Promise<void> {
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
      this.requests.push(recorded);
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
    if ((request.headers['x-api-key'] ?? bearer) !== this.apiKey) {
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
    if (reply === undefined) {
      this.sendError(res, 500, 'api_error', 'test server: no scripted reply left for this request');
      return;
    }
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
        else this.sendJson(res, 200, fullMessage(id, model, reply));
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
    let sent = 0;
    for (const [event, data] of events) {
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
      writeEvent(res, event, data);
      sent++;
    }
    res.end();
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

function usageOf(reply: MessageReply): {
  input_tokens: number;
  output_tokens: number;
} {
  return reply.usage ?? { input_tokens: 10, output_tokens: 5 };
}

function fullUsage(input: number, output: number): Record<string, unknown> {
  return {
    input_tokens: input,
    cache_creation_input_tokens: 0,
    cache_read_input_tokens: 0,
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
    usage: fullUsage(usage.input_tokens, usage.output_tokens),
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
          usage: fullUsage(usage.input_tokens, 1),
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
