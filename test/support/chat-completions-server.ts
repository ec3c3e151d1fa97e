import { randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { checkChatBody } from './chat-completions-checks';

/**
 * A local stand-in for OpenAI's Chat Completions API, for tests of code that uses the real
 * `openai` SDK. It speaks the wire protocol as OpenAI documents it, not a mock of the SDK:
 * `POST /v1/chat/completions` with and without `stream: true`; streamed answers as
 * server-sent events `data: <chat.completion.chunk>` ending with `data: [DONE]`, the first
 * delta carrying the role, text in `content` deltas, each tool call opened by a delta with
 * its `index`, `id`, `type` and `function.name` and continued by `function.arguments`
 * pieces, the `finish_reason` in its own chunk, and (with `stream_options.include_usage`)
 * a last chunk with empty `choices` and the `usage`; errors as the API returns them
 * (`{"error":{"message","type","param","code"}}` with an `x-request-id` header and, when
 * scripted, `retry-after`), and an error object inside a stream.
 *
 * Each test scripts the replies (a FIFO queue, one reply per HTTP request, retries
 * included) and then reads {@link ChatCompletionsServer.requests} to assert what the
 * client sent. It checks a request the way the API does first (bearer key, body shape,
 * tool messages answering a preceding assistant's `tool_calls`: `chat-completions-checks.ts`)
 * and answers 401 or 400 without consuming a scripted reply.
 */

/** A tool call of a scripted reply. */
export interface ScriptedToolCall {
  readonly id: string;
  readonly name: string;
  /** The `arguments` text, exactly (it need not be valid JSON: the model writes it). */
  readonly arguments: string;
  /** How `arguments` is split into deltas; joined they must equal it. @default pieces of 5 characters */
  readonly chunks?: readonly string[];
}

/** OpenAI's `finish_reason` values. */
export type FinishReason = 'stop' | 'length' | 'tool_calls' | 'content_filter' | 'function_call';

/** Token counts of a reply, as the API reports them. */
export interface ScriptedUsage {
  readonly prompt_tokens: number;
  readonly completion_tokens: number;
  /** `prompt_tokens_details.cached_tokens`, when the server reports it. */
  readonly cached_tokens?: number;
}

/** One scripted answer to one HTTP request. */
export type ScriptedReply =
  | {
      readonly kind: 'completion';
      /** The assistant's text. */
      readonly text?: string;
      /** How the text is split into `content` deltas. @default words */
      readonly chunks?: readonly string[];
      readonly toolCalls?: readonly ScriptedToolCall[];
      /** @default tool_calls when there are tool calls, else stop */
      readonly finishReason?: FinishReason;
      /** @default { prompt_tokens: 10, completion_tokens: 5 } */
      readonly usage?: ScriptedUsage;
      /** The model the chunks name. @default the request's model */
      readonly model?: string;
      /** Send this many `data:` events, then hold the response open until the client leaves. */
      readonly holdAfterEvents?: number;
      /** After this many `data:` events send an error object and end the stream. */
      readonly errorAfterEvents?: {
        readonly events: number;
        readonly message: string;
        readonly type?: string;
        readonly code?: string;
      };
      /** End the stream after this many `data:` events without `[DONE]` (a cut connection). */
      readonly endAfterEvents?: number;
    }
  | {
      readonly kind: 'error';
      /** 400, 401, 403, 404, 429, 500, 503, ... */
      readonly status: number;
      readonly message?: string;
      /** @default the API's type for the status */
      readonly type?: string;
      /** e.g. `context_length_exceeded`, `rate_limit_exceeded`, `insufficient_quota` */
      readonly code?: string;
      readonly param?: string;
      /** The `retry-after` header, in seconds (or an HTTP date). */
      readonly retryAfter?: string;
    }
  /** Close the connection without answering (a connection error on the client). */
  | { readonly kind: 'drop' };

/** A scripted reply that answers with a completion. */
export type CompletionReply = Extract<ScriptedReply, { kind: 'completion' }>;

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

const ERROR_TYPES: Readonly<Record<number, string>> = {
  400: 'invalid_request_error',
  401: 'invalid_request_error',
  403: 'invalid_request_error',
  404: 'invalid_request_error',
  429: 'requests',
};

const ERROR_MESSAGES: Readonly<Record<number, string>> = {
  400: "Invalid value for 'messages'.",
  401: 'Incorrect API key provided.',
  403: 'You are not allowed to sample from this model',
  404: 'The model does not exist or you do not have access to it.',
  429: 'Rate limit reached for requests',
  500: 'The server had an error while processing your request. Sorry about that!',
  503: 'The engine is currently overloaded, please try again later',
};

/** The server. Start it with {@link ChatCompletionsServer.start}; `close` it after the test. */
export class ChatCompletionsServer {
  /** Requests in arrival order, rejected ones included. */
  readonly requests: RecordedRequest[] = [];
  private readonly queue: ScriptedReply[] = [];
  private readonly open = new Set<ServerResponse>();
  private completions = 0;

  private constructor(
    private readonly server: Server,
    private readonly key: string,
  ) {}

  /** Listens on a free loopback port; requests must carry `Authorization: Bearer <apiKey>`. */
  static async start(options: { apiKey?: string } = {}): Promise<ChatCompletionsServer> {
    const server = createServer();
    const api = new ChatCompletionsServer(server, options.apiKey ?? 'test-key');
    server.on('request', (req: IncomingMessage, res: ServerResponse) => api.handle(req, res));
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(0, '127.0.0.1', () => resolve());
    });
    return api;
  }

  /** The base URL to give the SDK (`baseURL`): up to and including `/v1`. */
  get url(): string {
    const address = this.server.address();
    if (address === null || typeof address === 'string') throw new Error('server not listening');
    return `http://127.0.0.1:${(address satisfies AddressInfo).port}/v1`;
  }

  get apiKey(): string {
    return this.key;
  }

  /** Replies not yet used. */
  get pending(): number {
    return this.queue.length;
  }

  /** Appends replies; each HTTP request to `/v1/chat/completions` takes the next one. */
  enqueue(...replies: ScriptedReply[]): void {
    this.queue.push(...replies);
  }

  /** The parsed bodies of the completion requests, in order. */
  get bodies(): unknown[] {
    return this.requests.filter((r) => r.path === '/v1/chat/completions').map((r) => r.body);
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
      let body: unknown;
      try {
        body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
      } catch {
        body = undefined;
      }
      const recorded: RecordedRequest = {
        method: req.method ?? '',
        path: (req.url ?? '').split('?')[0] ?? '',
        headers: req.headers,
        body,
        stream: isRecord(body) && body.stream === true,
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
    if (request.method !== 'POST' || request.path !== '/v1/chat/completions') {
      sendError(res, 404, { message: `Invalid URL (${request.method} ${request.path})` });
      return;
    }
    if (request.headers.authorization !== `Bearer ${this.key}`) {
      sendError(res, 401, { code: 'invalid_api_key' });
      return;
    }
    const problem = checkChatBody(request.body);
    if (problem !== undefined) {
      sendError(res, 400, { message: problem.message, param: problem.param });
      return;
    }
    const reply = this.queue.shift();
    if (reply === undefined) {
      sendError(res, 500, { message: 'test server: no scripted reply left for this request' });
      return;
    }
    switch (reply.kind) {
      case 'drop':
        res.socket?.destroy();
        return;
      case 'error':
        sendError(res, reply.status, reply);
        return;
      case 'completion': {
        const id = `chatcmpl-${String(++this.completions).padStart(4, '0')}`;
        const model = reply.model ?? (isRecord(request.body) ? String(request.body.model) : '');
        if (request.stream) streamCompletion(res, id, model, reply, includeUsage(request.body));
        else sendJson(res, 200, fullCompletion(id, model, reply));
        return;
      }
      default: {
        const never: never = reply;
        return never;
      }
    }
  }
}

function includeUsage(body: unknown): boolean {
  return (
    isRecord(body) && isRecord(body.stream_options) && body.stream_options.include_usage === true
  );
}

function requestId(): string {
  return `req_${randomBytes(12).toString('hex')}`;
}

function sendError(
  res: ServerResponse,
  status: number,
  error: { message?: string; type?: string; code?: string; param?: string; retryAfter?: string },
): void {
  const headers: Record<string, string> = {};
  if (error.retryAfter !== undefined) headers['retry-after'] = error.retryAfter;
  sendJson(
    res,
    status,
    {
      error: {
        message: error.message ?? ERROR_MESSAGES[status] ?? 'error',
        type: error.type ?? ERROR_TYPES[status] ?? 'server_error',
        param: error.param ?? null,
        code: error.code ?? null,
      },
    },
    headers,
  );
}

function sendJson(
  res: ServerResponse,
  status: number,
  body: unknown,
  headers: Record<string, string> = {},
): void {
  const text = JSON.stringify(body);
  res.writeHead(status, {
    ...headers,
    'content-type': 'application/json',
    'content-length': Buffer.byteLength(text),
    'x-request-id': requestId(),
  });
  res.end(text);
}

function finishReasonOf(reply: CompletionReply): FinishReason {
  return reply.finishReason ?? ((reply.toolCalls ?? []).length > 0 ? 'tool_calls' : 'stop');
}

function usageOf(reply: CompletionReply): Record<string, unknown> {
  const usage = reply.usage ?? { prompt_tokens: 10, completion_tokens: 5 };
  return {
    prompt_tokens: usage.prompt_tokens,
    completion_tokens: usage.completion_tokens,
    total_tokens: usage.prompt_tokens + usage.completion_tokens,
    ...(usage.cached_tokens === undefined
      ? {}
      : { prompt_tokens_details: { cached_tokens: usage.cached_tokens, audio_tokens: 0 } }),
  };
}

function fullCompletion(id: string, model: string, reply: CompletionReply): unknown {
  const calls = reply.toolCalls ?? [];
  return {
    id,
    object: 'chat.completion',
    created: Math.floor(Date.now() / 1000),
    model,
    choices: [
      {
        index: 0,
        message: {
          role: 'assistant',
          content: reply.text ?? null,
          refusal: null,
          ...(calls.length === 0
            ? {}
            : {
                tool_calls: calls.map((call) => ({
                  id: call.id,
                  type: 'function',
                  function: { name: call.name, arguments: call.arguments },
                })),
              }),
        },
        logprobs: null,
        finish_reason: finishReasonOf(reply),
      },
    ],
    usage: usageOf(reply),
  };
}

/** The `data:` payloads of one streamed reply, in the order and shape the API sends them. */
function chunksOf(id: string, model: string, reply: CompletionReply, usage: boolean): unknown[] {
  const created = Math.floor(Date.now() / 1000);
  const chunk = (choices: unknown[], extra: Record<string, unknown> = {}): unknown => ({
    id,
    object: 'chat.completion.chunk',
    created,
    model,
    system_fingerprint: 'fp_test',
    choices,
    ...(usage ? { usage: null } : {}),
    ...extra,
  });
  const delta = (d: Record<string, unknown>, finish: FinishReason | null = null): unknown =>
    chunk([{ index: 0, delta: d, logprobs: null, finish_reason: finish }]);
  const out: unknown[] = [delta({ role: 'assistant', content: '', refusal: null })];
  const text = reply.text ?? '';
  for (const piece of reply.chunks ?? text.match(/\S+\s*|\s+/gu) ?? []) {
    out.push(delta({ content: piece }));
  }
  (reply.toolCalls ?? []).forEach((call, index) => {
    out.push(
      delta({
        tool_calls: [
          { index, id: call.id, type: 'function', function: { name: call.name, arguments: '' } },
        ],
      }),
    );
    for (const piece of call.chunks ?? call.arguments.match(/[\s\S]{1,5}/gu) ?? []) {
      out.push(delta({ tool_calls: [{ index, function: { arguments: piece } }] }));
    }
  });
  out.push(delta({}, finishReasonOf(reply)));
  if (usage) out.push(chunk([], { usage: usageOf(reply) }));
  return out;
}

function streamCompletion(
  res: ServerResponse,
  id: string,
  model: string,
  reply: CompletionReply,
  usage: boolean,
): void {
  res.writeHead(200, {
    'content-type': 'text/event-stream; charset=utf-8',
    'cache-control': 'no-cache',
    'x-request-id': requestId(),
  });
  const events = chunksOf(id, model, reply, usage);
  for (let sent = 0; sent < events.length; sent++) {
    const failure = reply.errorAfterEvents;
    if (failure !== undefined && sent === failure.events) {
      const error = { message: failure.message, type: failure.type ?? 'server_error', param: null };
      res.write(`data: ${JSON.stringify({ error: { ...error, code: failure.code ?? null } })}\n\n`);
      res.end();
      return;
    }
    if (reply.holdAfterEvents === sent) return;
    if (reply.endAfterEvents === sent) {
      res.end();
      return;
    }
    res.write(`data: ${JSON.stringify(events[sent])}\n\n`);
  }
  res.write('data: [DONE]\n\n');
  res.end();
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
