import { afterEach, beforeEach, describe, expect, it } from '@jest/globals';
import Anthropic from '@anthropic-ai/sdk';
import { AppError } from '../errors';
import {
  MessagesApiServer,
  type MessageReply,
  type ScriptedReply,
} from '../../test/support/messages-api-server';
import {
  AnthropicProvider,
  DEFAULT_ANTHROPIC_MODEL,
  type AnthropicProviderOptions,
} from './anthropic-provider';
import type { ModelRequest, ModelResponse, ToolDefinition } from './model-port';

const KEY = 'sk-ant-test-0123456789';

let server: MessagesApiServer;
let sleeps: number[];

beforeEach(async () => {
  server = await MessagesApiServer.start({ apiKey: KEY });
  sleeps = [];
});
afterEach(async () => {
  await server.close();
});

function provider(options: Partial<AnthropicProviderOptions> = {}): AnthropicProvider {
  return new AnthropicProvider({
    apiKey: KEY,
    baseUrl: server.url,
    sleep: (ms) => {
      sleeps.push(ms);
      return Promise.resolve();
    },
    random: () => 0.5,
    ...options,
  });
}

const hello: ModelRequest = {
  system: 'Be brief.',
  messages: [{ role: 'user', content: [{ type: 'text', text: 'Say hello.' }] }],
  tools: [],
  toolChoice: 'auto',
};

const issueTool: ToolDefinition = {
  name: 'github/create_issue',
  description: 'Open an issue.',
  inputSchema: {
    type: 'object',
    properties: { title: { type: 'string' }, labels: { type: 'array' } },
    required: ['title'],
  },
};

async function complete(
  p: AnthropicProvider,
  request: ModelRequest = hello,
  signal: AbortSignal = new AbortController().signal,
): Promise<{ response: ModelResponse; deltas: string[] }> {
  const deltas: string[] = [];
  const response = await p.complete(request, { signal, onTextDelta: (t) => deltas.push(t) });
  return { response, deltas };
}

async function failure(promise: Promise<unknown>): Promise<AppError> {
  try {
    await promise;
  } catch (error) {
    if (error instanceof AppError) return error;
    throw error;
  }
  throw new Error('expected the call to fail');
}

const text = (value: string, chunks?: string[]): MessageReply => ({
  kind: 'message',
  content: [{ type: 'text', text: value, ...(chunks === undefined ? {} : { chunks }) }],
  usage: { input_tokens: 21, output_tokens: 9 },
});

async function eventually(check: () => boolean, what: string, timeoutMs = 2000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

describe('AnthropicProvider against a local Messages API server', () => {
  it('streams text: deltas in order, final text, model, stop reason, usage, request shape', async () => {
    server.enqueue(text('Hello there, friend.', ['Hel', 'lo there', ', friend.']));
    const { response, deltas } = await complete(provider());
    expect(deltas).toEqual(['Hel', 'lo there', ', friend.']);
    expect(response).toEqual({
      id: 'msg_0001',
      model: DEFAULT_ANTHROPIC_MODEL,
      content: [{ type: 'text', text: 'Hello there, friend.' }],
      stopReason: 'end_turn',
      // The API reports its prompt-cache counts even when nothing was cached.
      usage: {
        inputTokens: 21,
        outputTokens: 9,
        cacheReadInputTokens: 0,
        cacheCreationInputTokens: 0,
      },
    });
    const [request] = server.requests;
    expect(request?.headers.authorization).toBe(`Bearer ${KEY}`);
    expect(request?.headers['anthropic-version']).toMatch(/^\d{4}-\d{2}-\d{2}$/u);
    expect(request?.headers['x-stainless-retry-count']).toBe('0');
    expect(request?.body).toEqual({
      model: 'claude-sonnet-5-5',
      max_tokens: 8192,
      stream: true,
      system: 'Be brief.',
      messages: [{ role: 'user', content: [{ type: 'text', text: 'Say hello.' }] }],
    });
  });

  it('prompt-cache counts and the message id: read from the stream into the response', async () => {
    server.enqueue({
      ...text('Cached.'),
      usage: {
        input_tokens: 4,
        output_tokens: 2,
        cache_read_input_tokens: 1200,
        cache_creation_input_tokens: 300,
      },
    });
    const { response } = await complete(provider());
    expect(response.id).toMatch(/^msg_\d+$/u);
    expect(response.usage).toEqual({
      inputTokens: 4,
      outputTokens: 2,
      cacheReadInputTokens: 1200,
      cacheCreationInputTokens: 300,
    });
  });

  it('tool use: JSON split across input_json_delta chunks, canonical names both ways', async () => {
    const input = { title: 'Crash on "save" — ünïcode', labels: ['bug', 'p1'] };
    const json = JSON.stringify(input);
    server.enqueue({
      kind: 'message',
      content: [
        { type: 'text', text: 'Filing it.' },
        {
          type: 'tool_use',
          id: 'toolu_01',
          name: 'github__create_issue',
          input,
          // Splits inside a key, inside a string and between the escapes.
          jsonChunks: ['', json.slice(0, 3), json.slice(3, 17), json.slice(17, 30), json.slice(30)],
        },
      ],
    });
    const { response } = await complete(provider(), {
      ...hello,
      tools: [issueTool],
    });
    expect(response.stopReason).toBe('tool_use');
    expect(response.content).toEqual([
      { type: 'text', text: 'Filing it.' },
      { type: 'tool_use', id: 'toolu_01', name: 'github/create_issue', input },
    ]);
    const body = server.bodies[0];
    expect(body).toMatchObject({
      tools: [
        {
          name: 'github__create_issue',
          description: 'Open an issue.',
          input_schema: issueTool.inputSchema,
        },
      ],
      tool_choice: { type: 'auto' },
    });
  });

  it('parallel tool_use blocks, one without arguments', async () => {
    server.enqueue({
      kind: 'message',
      content: [
        { type: 'tool_use', id: 'toolu_a', name: 'calculator', input: { expression: '6 * 7' } },
        { type: 'tool_use', id: 'toolu_b', name: 'current_step', input: {}, jsonChunks: [''] },
      ],
    });
    const tools: ToolDefinition[] = [
      {
        name: 'calculator',
        description: 'Evaluates an arithmetic expression.',
        inputSchema: { type: 'object', properties: { expression: { type: 'string' } } },
      },
      { name: 'current_step', description: 'The step number.', inputSchema: { type: 'object' } },
    ];
    const { response, deltas } = await complete(provider(), { ...hello, tools });
    expect(deltas).toEqual([]);
    expect(response.content).toEqual([
      { type: 'tool_use', id: 'toolu_a', name: 'calculator', input: { expression: '6 * 7' } },
      { type: 'tool_use', id: 'toolu_b', name: 'current_step', input: {} },
    ]);
    expect(response.stopReason).toBe('tool_use');
  });

  it.each([
    ['end_turn', 'end_turn'],
    ['max_tokens', 'max_tokens'],
    ['stop_sequence', 'stop_sequence'],
    ['refusal', 'refusal'],
    ['pause_turn', 'other'],
    ['model_context_window_exceeded', 'other'],
  ] as const)('stop reason %s → %s', async (api, ours) => {
    server.enqueue({ kind: 'message', content: [{ type: 'text', text: 'x' }], stopReason: api });
    const { response } = await complete(provider());
    expect(response.stopReason).toBe(ours);
  });

  it('sends history: tool_use under its alias, tool_result blocks, tool_choice none, configured model', async () => {
    server.enqueue(text('Done.'));
    await complete(provider({ model: 'claude-opus-5-5', maxTokens: 100 }), {
      messages: [
        { role: 'user', content: [{ type: 'text', text: 'File a bug.' }] },
        {
          role: 'assistant',
          content: [
            { type: 'tool_use', id: 'toolu_1', name: 'github/create_issue', input: { title: 't' } },
          ],
        },
        {
          role: 'user',
          content: [
            { type: 'tool_result', toolUseId: 'toolu_1', content: 'boom', isError: true },
            { type: 'text', text: 'Wrap up.' },
          ],
        },
      ],
      tools: [issueTool],
      toolChoice: 'none',
    });
    expect(server.bodies[0]).toMatchObject({
      model: 'claude-opus-5-5',
      max_tokens: 100,
      messages: [
        { role: 'user', content: [{ type: 'text', text: 'File a bug.' }] },
        {
          role: 'assistant',
          content: [
            {
              type: 'tool_use',
              id: 'toolu_1',
              name: 'github__create_issue',
              input: { title: 't' },
            },
          ],
        },
        {
          role: 'user',
          content: [
            { type: 'tool_result', tool_use_id: 'toolu_1', content: 'boom', is_error: true },
            { type: 'text', text: 'Wrap up.' },
          ],
        },
      ],
      tool_choice: { type: 'none' },
    });
    expect(server.bodies[0]).not.toHaveProperty('system');
  });
});

describe('AnthropicProvider retries and classification', () => {
  it('429 then success: retried once, retry-after honoured', async () => {
    server.enqueue({ kind: 'error', status: 429, retryAfter: '3' }, text('ok'));
    const { response } = await complete(provider());
    expect(response.content).toEqual([{ type: 'text', text: 'ok' }]);
    expect(server.requests).toHaveLength(2);
    expect(sleeps).toEqual([3000]);
  });

  it('529 and 500 then success: exponential backoff with jitter', async () => {
    server.enqueue({ kind: 'error', status: 529 }, { kind: 'error', status: 500 }, text('ok'));
    const { response } = await complete(provider());
    expect(response.content).toEqual([{ type: 'text', text: 'ok' }]);
    expect(server.requests).toHaveLength(3);
    // Equal jitter with random 0.5: base/2 + base/4, base 500 then 1000.
    expect(sleeps).toEqual([375, 750]);
  });

  it('jitter spans half to all of the base delay', async () => {
    server.enqueue({ kind: 'error', status: 503 }, { kind: 'error', status: 503 }, text('ok'));
    const randoms = [0, 0.999];
    await complete(provider({ random: () => randoms.shift() ?? 0 }));
    expect(sleeps).toEqual([250, 1000]);
  });

  it('a dropped connection is retried', async () => {
    server.enqueue({ kind: 'drop' }, text('ok'));
    const { response } = await complete(provider());
    expect(response.content).toEqual([{ type: 'text', text: 'ok' }]);
    expect(sleeps).toHaveLength(1);
  });

  it('an overloaded error inside the stream is retried; the answer is the retry', async () => {
    server.enqueue(
      {
        kind: 'message',
        content: [{ type: 'text', text: 'First try', chunks: ['First ', 'try'] }],
        errorAfterEvents: { events: 4, type: 'overloaded_error' },
      },
      text('Second try', ['Second ', 'try']),
    );
    const { response, deltas } = await complete(provider());
    expect(response.content).toEqual([{ type: 'text', text: 'Second try' }]);
    // Deltas of the failed attempt were already forwarded (documented: not authoritative).
    expect(deltas).toEqual(['First ', 'Second ', 'try']);
    expect(server.requests).toHaveLength(2);
  });

  it('400 fails at once with invalid_argument, no retry', async () => {
    server.enqueue({
      kind: 'error',
      status: 400,
      message: 'messages.0.content: Input should be a valid list',
    });
    const error = await failure(complete(provider()));
    expect(error.code).toBe('invalid_argument');
    expect(error.message).toBe(
      'Anthropic Messages API returned 400 invalid_request_error: messages.0.content: Input should be a valid list; the request is malformed or too large; a retry will not help (check the transcript, tools and model settings)',
    );
    expect(error.details).toMatchObject({ status: 400, type: 'invalid_request_error', attempt: 1 });
    expect(error.details.requestId).toMatch(/^req_/u);
    expect(server.requests).toHaveLength(1);
    expect(sleeps).toEqual([]);
  });

  it('a prompt over the context window → invalid_argument that says so and what to do', async () => {
    server.enqueue({
      kind: 'error',
      status: 400,
      message: 'prompt is too long: 210000 tokens > 200000 maximum',
    });
    const error = await failure(complete(provider({ model: 'claude-small' })));
    expect(error.code).toBe('invalid_argument');
    expect(error.message).toBe(
      "Anthropic Messages API returned 400 invalid_request_error: prompt is too long: 210000 tokens > 200000 maximum; the conversation's history is longer than model claude-small can read (its context window); a retry will not help: start a new conversation, or run this one on a model with a larger context window",
    );
    expect(server.requests).toHaveLength(1);
  });

  it('401 (wrong key) → unauthenticated, no retry, the key never in the message', async () => {
    const wrongKey = 'sk-ant-wrong-key-999';
    const error = await failure(complete(provider({ apiKey: wrongKey })));
    expect(error.code).toBe('unauthenticated');
    expect(error.message).toBe(
      'Anthropic Messages API returned 401 authentication_error: invalid x-api-key; the API key was rejected; check the key in the harness configuration',
    );
    expect(JSON.stringify(error.toJSON())).not.toContain(wrongKey);
    expect(server.requests).toHaveLength(1);
  });

  it('a key echoed back by the server is redacted', async () => {
    server.enqueue({ kind: 'error', status: 403, message: `key ${KEY} may not use this model` });
    const error = await failure(complete(provider()));
    expect(error.code).toBe('permission_denied');
    expect(error.message).toContain('key [redacted] may not use this model');
    expect(JSON.stringify(error.toJSON())).not.toContain(KEY);
  });

  it.each([
    [404, 'not_found'],
    [402, 'failed_precondition'],
    [413, 'invalid_argument'],
  ] as const)('%d → %s at once', async (status, code) => {
    server.enqueue({ kind: 'error', status });
    const error = await failure(complete(provider()));
    expect(error.code).toBe(code);
    expect(server.requests).toHaveLength(1);
  });

  it('429 until retries run out → resource_exhausted, bounded attempts', async () => {
    for (let i = 0; i < 4; i++) server.enqueue({ kind: 'error', status: 429 });
    const error = await failure(complete(provider()));
    expect(error.code).toBe('resource_exhausted');
    expect(error.message).toMatch(
      /^Anthropic Messages API returned 429 rate_limit_error: .*; retried with backoff; the turn can be dispatched again later \(giving up after 4 attempts\)$/u,
    );
    expect(error.details).toMatchObject({ attempts: 4, status: 429 });
    expect(server.requests).toHaveLength(4);
    expect(sleeps).toEqual([375, 750, 1500]);
  });

  it('5xx until retries run out → unavailable', async () => {
    server.enqueue({ kind: 'error', status: 529 }, { kind: 'error', status: 500 });
    const error = await failure(complete(provider({ maxAttempts: 2 })));
    expect(error.code).toBe('unavailable');
    expect(error.details).toMatchObject({ attempts: 2, status: 500, type: 'api_error' });
    expect(server.pending).toBe(0);
  });

  it('a retry-after longer than the limit stops at once and says how long', async () => {
    server.enqueue({ kind: 'error', status: 429, retryAfter: '120' }, text('never'));
    const error = await failure(complete(provider()));
    expect(error.code).toBe('resource_exhausted');
    expect(error.message).toContain(
      '(the API asked to wait 120 s, longer than this turn waits; stopped after 1 attempts)',
    );
    expect(sleeps).toEqual([]);
    expect(server.pending).toBe(1);
  });

  it('an attempt that outlives its timeout → deadline_exceeded after the retries', async () => {
    const hang: ScriptedReply = { ...text('slow'), holdAfterEvents: 2 };
    server.enqueue(hang, hang);
    const error = await failure(complete(provider({ attemptTimeoutMs: 150, maxAttempts: 2 })));
    expect(error.code).toBe('deadline_exceeded');
    expect(error.message).toBe(
      'Anthropic Messages API: no complete answer within 150 ms (giving up after 2 attempts)',
    );
  });

  it('abort mid-stream: rejects cancelled and the HTTP stream is closed', async () => {
    server.enqueue({ ...text('one two three'), holdAfterEvents: 4 });
    const abort = new AbortController();
    const deltas: string[] = [];
    const call = provider().complete(hello, {
      signal: abort.signal,
      onTextDelta: (t) => {
        deltas.push(t);
        abort.abort();
      },
    });
    const error = await failure(call);
    expect(error.code).toBe('cancelled');
    expect(deltas).toEqual(['one ']);
    await eventually(() => server.requests[0]?.aborted === true, 'the server to see the abort');
    expect(server.requests).toHaveLength(1);
  });

  it('abort during a backoff: no further attempt', async () => {
    server.enqueue({ kind: 'error', status: 529 }, text('never'));
    const abort = new AbortController();
    const p = provider({
      sleep: (ms, signal) => {
        sleeps.push(ms);
        abort.abort();
        return signal.aborted ? Promise.reject(new Error('aborted')) : Promise.resolve();
      },
    });
    const error = await failure(p.complete(hello, { signal: abort.signal }));
    expect(error.code).toBe('cancelled');
    expect(server.requests).toHaveLength(1);
  });

  it('the real sleep is cut short by the signal', async () => {
    server.enqueue({ kind: 'error', status: 429, retryAfter: '30' });
    const abort = new AbortController();
    const p = new AnthropicProvider({ apiKey: KEY, baseUrl: server.url });
    const started = Date.now();
    const call = p.complete(hello, { signal: abort.signal });
    await eventually(() => server.requests.length === 1, 'the first request');
    setTimeout(() => abort.abort(), 20);
    const error = await failure(call);
    expect(error.code).toBe('cancelled');
    expect(Date.now() - started).toBeLessThan(5000);
  });

  it('refuses an empty key and bad numbers', () => {
    expect(() => new AnthropicProvider({ apiKey: ' ' })).toThrow(
      'Anthropic provider: the API key is empty; set it in the harness configuration',
    );
    expect(() => new AnthropicProvider({ apiKey: KEY, maxAttempts: 0 })).toThrow(
      'Anthropic provider: maxAttempts must be a positive integer, got 0',
    );
  });
});

describe('tool name aliases through the provider', () => {
  it('two tools whose aliases collide still map back to their own names', async () => {
    const a: ToolDefinition = { ...issueTool, name: 'x/y' };
    const b: ToolDefinition = { ...issueTool, name: 'x__y' };
    server.enqueue({
      kind: 'message',
      content: [{ type: 'tool_use', id: 'toolu_1', name: 'x__y', input: {} }],
    });
    const { response } = await complete(provider(), { ...hello, tools: [b, a] });
    const sent = server.bodies[0];
    const names =
      typeof sent === 'object' && sent !== null && 'tools' in sent && Array.isArray(sent.tools)
        ? sent.tools.map((t: { name: string }) => t.name)
        : [];
    expect(names[0]).toBe('x__y');
    expect(names[1]).toMatch(/^x__y_[0-9a-f]{8}$/u);
    expect(response.content).toEqual([
      { type: 'tool_use', id: 'toolu_1', name: 'x__y', input: {} },
    ]);
  });
});

describe('the local server speaks what the SDK expects', () => {
  function client(): Anthropic {
    return new Anthropic({ apiKey: KEY, baseURL: server.url, maxRetries: 0, logLevel: 'off' });
  }

  it('the SDK MessageStream accumulates our events into the same message', async () => {
    server.enqueue({
      kind: 'message',
      content: [
        { type: 'text', text: 'Let me add.' },
        { type: 'tool_use', id: 'toolu_9', name: 'calculator', input: { expression: '1 + 2' } },
      ],
      usage: { input_tokens: 7, output_tokens: 3 },
    });
    const texts: string[] = [];
    const stream = client()
      .messages.stream({
        model: 'claude-sonnet-5-5',
        max_tokens: 10,
        messages: [{ role: 'user', content: 'add' }],
      })
      .on('text', (delta) => texts.push(delta));
    const message = await stream.finalMessage();
    expect(texts.join('')).toBe('Let me add.');
    expect(message.content).toEqual([
      { type: 'text', text: 'Let me add.' },
      { type: 'tool_use', id: 'toolu_9', name: 'calculator', input: { expression: '1 + 2' } },
    ]);
    expect(message.stop_reason).toBe('tool_use');
    expect(message.usage).toMatchObject({ input_tokens: 7, output_tokens: 3 });
  });

  it('non-streaming create returns the whole message', async () => {
    server.enqueue(text('Plain.'));
    const message = await client().messages.create({
      model: 'claude-sonnet-5-5',
      max_tokens: 10,
      messages: [{ role: 'user', content: 'hi' }],
    });
    expect(server.requests[0]?.stream).toBe(false);
    expect(message).toMatchObject({
      type: 'message',
      role: 'assistant',
      content: [{ type: 'text', text: 'Plain.' }],
      stop_reason: 'end_turn',
      usage: { input_tokens: 21, output_tokens: 9 },
    });
  });

  it('the SDK raises its typed error with status, type and retry-after', async () => {
    server.enqueue({ kind: 'error', status: 429, retryAfter: '7' });
    const error: unknown = await client()
      .messages.create({
        model: 'claude-sonnet-5-5',
        max_tokens: 10,
        messages: [{ role: 'user', content: 'hi' }],
      })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(Anthropic.RateLimitError);
    if (!(error instanceof Anthropic.RateLimitError)) return;
    expect(error.type).toBe('rate_limit_error');
    expect(error.headers.get('retry-after')).toBe('7');
  });

  it('answers 400 to a body the API would refuse, without using a scripted reply', async () => {
    server.enqueue(text('unused'));
    const error = await failure(
      complete(provider(), {
        ...hello,
        messages: [{ role: 'user', content: [{ type: 'text', text: '' }] }],
      }),
    );
    expect(error.code).toBe('invalid_argument');
    expect(error.message).toContain('text content blocks must be non-empty');
    expect(server.pending).toBe(1);
  });
});
