import { afterEach, beforeEach, describe, expect, it } from '@jest/globals';
import { AppError } from '../errors';
import {
  ChatCompletionsServer,
  type CompletionReply,
  type ScriptedReply,
} from '../../test/support/chat-completions-server';
import {
  DEFAULT_OPENAI_MODEL,
  OpenAiProvider,
  type OpenAiProviderOptions,
} from './openai-provider';
import type { ModelRequest, ModelResponse, ToolDefinition } from './model-port';

// The OpenAI-compatible adapter with the real `openai` SDK against a local server that
// speaks the Chat Completions wire protocol (test/support/chat-completions-server.ts).

const KEY = 'sk-test-openai-0123456789';

let server: ChatCompletionsServer;
let sleeps: number[];

beforeEach(async () => {
  server = await ChatCompletionsServer.start({ apiKey: KEY });
  sleeps = [];
});
afterEach(async () => {
  await server.close();
});

function provider(options: Partial<OpenAiProviderOptions> = {}): OpenAiProvider {
  return new OpenAiProvider({
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

const calculator: ToolDefinition = {
  name: 'calculator',
  description: 'Evaluates an arithmetic expression.',
  inputSchema: { type: 'object', properties: { expression: { type: 'string' } } },
};

async function complete(
  p: OpenAiProvider,
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

const text = (value: string, chunks?: string[]): CompletionReply => ({
  kind: 'completion',
  text: value,
  ...(chunks === undefined ? {} : { chunks }),
  usage: { prompt_tokens: 21, completion_tokens: 9 },
});

async function eventually(check: () => boolean, what: string, timeoutMs = 2000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

describe('OpenAiProvider against a local Chat Completions server', () => {
  it('streams text: deltas in order, final text, model, stop reason, usage, request shape', async () => {
    server.enqueue(text('Hello there, friend.', ['Hel', 'lo there', ', friend.']));
    const p = provider();
    const { response, deltas } = await complete(p);
    expect(deltas).toEqual(['Hel', 'lo there', ', friend.']);
    expect(response).toEqual({
      model: DEFAULT_OPENAI_MODEL,
      content: [{ type: 'text', text: 'Hello there, friend.' }],
      stopReason: 'end_turn',
      usage: { inputTokens: 21, outputTokens: 9 },
    });
    const [request] = server.requests;
    expect(request?.path).toBe('/v1/chat/completions');
    expect(request?.headers.authorization).toBe(`Bearer ${KEY}`);
    expect(request?.headers['x-stainless-retry-count']).toBe('0');
    expect(request?.headers['openai-organization']).toBeUndefined();
    expect(request?.body).toEqual({
      model: DEFAULT_OPENAI_MODEL,
      max_completion_tokens: 8192,
      stream: true,
      stream_options: { include_usage: true },
      messages: [
        { role: 'system', content: 'Be brief.' },
        { role: 'user', content: 'Say hello.' },
      ],
    });
    expect(p.parameters).toEqual({ model: 'gpt-5', maxTokens: 8192, provider: 'openai' });
    expect(p.genAi).toEqual({ provider: 'openai', model: 'gpt-5' });
  });

  it('usage: cached prompt tokens are reported as cache reads', async () => {
    server.enqueue({
      kind: 'completion',
      text: 'ok',
      usage: { prompt_tokens: 2048, completion_tokens: 3, cached_tokens: 1920 },
    });
    const { response } = await complete(provider());
    expect(response.usage).toEqual({
      inputTokens: 2048,
      outputTokens: 3,
      cacheReadInputTokens: 1920,
    });
  });

  it('several tool calls, arguments split across deltas, canonical names both ways', async () => {
    const input = { title: 'Crash on "save" — ünïcode', labels: ['bug', 'p1'] };
    const json = JSON.stringify(input);
    server.enqueue({
      kind: 'completion',
      text: 'Filing it.',
      toolCalls: [
        {
          id: 'call_01',
          name: 'github__create_issue',
          arguments: json,
          // Splits inside a key, inside a string and between the escapes.
          chunks: [json.slice(0, 3), json.slice(3, 17), json.slice(17, 30), json.slice(30)],
        },
        { id: 'call_02', name: 'calculator', arguments: '{"expression":"6 * 7"}' },
        { id: 'call_03', name: 'calculator', arguments: '', chunks: [] },
      ],
    });
    const { response, deltas } = await complete(provider(), {
      ...hello,
      tools: [issueTool, calculator],
    });
    expect(deltas).toEqual(['Filing ', 'it.']);
    expect(response.stopReason).toBe('tool_use');
    expect(response.content).toEqual([
      { type: 'text', text: 'Filing it.' },
      { type: 'tool_use', id: 'call_01', name: 'github/create_issue', input },
      { type: 'tool_use', id: 'call_02', name: 'calculator', input: { expression: '6 * 7' } },
      { type: 'tool_use', id: 'call_03', name: 'calculator', input: {} },
    ]);
    expect(server.bodies[0]).toMatchObject({
      tools: [
        {
          type: 'function',
          function: {
            name: 'github__create_issue',
            description: 'Open an issue.',
            parameters: issueTool.inputSchema,
          },
        },
        { type: 'function', function: { name: 'calculator' } },
      ],
      tool_choice: 'auto',
    });
  });

  it.each([
    ['tool arguments that are not JSON', '{"expression": "6*', 'are not valid JSON'],
    ['tool arguments that are an array', '[1, 2]', 'are JSON but not an object (an array)'],
  ])('%s: a clear error after the retries', async (_what, args, says) => {
    const bad: CompletionReply = {
      kind: 'completion',
      toolCalls: [{ id: 'call_x', name: 'calculator', arguments: args }],
    };
    server.enqueue(bad, bad);
    const error = await failure(
      complete(provider({ maxAttempts: 2 }), { ...hello, tools: [calculator] }),
    );
    expect(error.code).toBe('unavailable');
    expect(error.message).toBe(
      `OpenAI-compatible API: the arguments the model wrote for tool calculator ${says} (giving up after 2 attempts)`,
    );
  });

  it.each([
    ['stop', 'end_turn'],
    ['tool_calls', 'tool_use'],
    ['length', 'max_tokens'],
    ['content_filter', 'refusal'],
    ['function_call', 'other'],
  ] as const)('finish_reason %s → %s', async (api, ours) => {
    server.enqueue({ kind: 'completion', text: 'x', finishReason: api });
    const { response } = await complete(provider());
    expect(response.stopReason).toBe(ours);
  });

  it('sends history: tool_calls under their alias, tool answers as tool messages, errors marked, tool_choice none', async () => {
    server.enqueue(text('Done.'));
    await complete(provider({ model: 'qwen3-32b', maxTokens: 100 }), {
      messages: [
        { role: 'user', content: [{ type: 'text', text: 'File a bug and add.' }] },
        {
          role: 'assistant',
          content: [
            { type: 'text', text: 'On it.' },
            { type: 'tool_use', id: 'call_1', name: 'github/create_issue', input: { title: 't' } },
            { type: 'tool_use', id: 'call_2', name: 'calculator', input: { expression: '1+1' } },
          ],
        },
        {
          role: 'user',
          content: [
            { type: 'tool_result', toolUseId: 'call_1', content: 'boom', isError: true },
            { type: 'tool_result', toolUseId: 'call_2', content: '2', isError: false },
            { type: 'text', text: 'Wrap up.' },
            { type: 'text', text: 'Briefly.' },
          ],
        },
        { role: 'assistant', content: [{ type: 'text', text: 'Filed; 2.' }] },
        { role: 'user', content: [{ type: 'text', text: 'Thanks.' }] },
      ],
      tools: [issueTool, calculator],
      toolChoice: 'none',
    });
    expect(server.bodies[0]).toMatchObject({
      model: 'qwen3-32b',
      max_completion_tokens: 100,
      messages: [
        { role: 'user', content: 'File a bug and add.' },
        {
          role: 'assistant',
          content: 'On it.',
          tool_calls: [
            {
              id: 'call_1',
              type: 'function',
              function: { name: 'github__create_issue', arguments: '{"title":"t"}' },
            },
            {
              id: 'call_2',
              type: 'function',
              function: { name: 'calculator', arguments: '{"expression":"1+1"}' },
            },
          ],
        },
        { role: 'tool', tool_call_id: 'call_1', content: '[tool error] boom' },
        { role: 'tool', tool_call_id: 'call_2', content: '2' },
        {
          role: 'user',
          content: [
            { type: 'text', text: 'Wrap up.' },
            { type: 'text', text: 'Briefly.' },
          ],
        },
        { role: 'assistant', content: 'Filed; 2.' },
        { role: 'user', content: 'Thanks.' },
      ],
      tool_choice: 'none',
    });
    const body = server.bodies[0];
    expect(body).not.toHaveProperty('max_tokens');
    // No system prompt, no system message.
    expect(JSON.stringify(body)).not.toContain('"role":"system"');
  });

  it('a tool-only assistant message has null content and a tool-only user message no user message', async () => {
    server.enqueue(text('42.'));
    await complete(provider(), {
      messages: [
        { role: 'user', content: [{ type: 'text', text: 'Add.' }] },
        {
          role: 'assistant',
          content: [{ type: 'tool_use', id: 'call_1', name: 'calculator', input: {} }],
        },
        {
          role: 'user',
          content: [{ type: 'tool_result', toolUseId: 'call_1', content: '42', isError: false }],
        },
      ],
      tools: [calculator],
      toolChoice: 'auto',
    });
    const body = server.bodies[0];
    expect(body).toMatchObject({
      messages: [
        { role: 'user', content: 'Add.' },
        { role: 'assistant', content: null },
        { role: 'tool', tool_call_id: 'call_1', content: '42' },
      ],
    });
    expect(body).toHaveProperty('messages.length', 3);
  });
});

describe('OpenAiProvider retries and classification', () => {
  it('429 then success: retried once, retry-after honoured', async () => {
    server.enqueue(
      { kind: 'error', status: 429, code: 'rate_limit_exceeded', retryAfter: '3' },
      text('ok'),
    );
    const { response } = await complete(provider());
    expect(response.content).toEqual([{ type: 'text', text: 'ok' }]);
    expect(server.requests).toHaveLength(2);
    expect(sleeps).toEqual([3000]);
  });

  it('503 and 500 then success: exponential backoff with jitter', async () => {
    server.enqueue({ kind: 'error', status: 503 }, { kind: 'error', status: 500 }, text('ok'));
    const { response } = await complete(provider());
    expect(response.content).toEqual([{ type: 'text', text: 'ok' }]);
    expect(server.requests).toHaveLength(3);
    // Equal jitter with random 0.5: base/2 + base/4, base 500 then 1000.
    expect(sleeps).toEqual([375, 750]);
  });

  it('a dropped connection and a stream cut before its finish are retried', async () => {
    server.enqueue({ kind: 'drop' }, { ...text('cut short'), endAfterEvents: 2 }, text('ok'));
    const { response } = await complete(provider());
    expect(response.content).toEqual([{ type: 'text', text: 'ok' }]);
    expect(sleeps).toHaveLength(2);
  });

  it('an error object inside the stream is retried; the answer is the retry', async () => {
    server.enqueue(
      {
        ...text('First try', ['First ', 'try']),
        errorAfterEvents: { events: 2, message: 'The server had an error' },
      },
      text('Second try', ['Second ', 'try']),
    );
    const { response, deltas } = await complete(provider());
    expect(response.content).toEqual([{ type: 'text', text: 'Second try' }]);
    // Deltas of the failed attempt were already forwarded (documented: not authoritative).
    expect(deltas).toEqual(['First ', 'Second ', 'try']);
  });

  it('429 until retries run out → resource_exhausted, bounded attempts', async () => {
    for (let i = 0; i < 4; i++) server.enqueue({ kind: 'error', status: 429 });
    const error = await failure(complete(provider()));
    expect(error.code).toBe('resource_exhausted');
    expect(error.message).toBe(
      'OpenAI-compatible API returned 429: Rate limit reached for requests; retried with backoff; the turn can be dispatched again later (giving up after 4 attempts)',
    );
    expect(error.details).toMatchObject({ attempts: 4, status: 429 });
    expect(server.requests).toHaveLength(4);
    expect(sleeps).toEqual([375, 750, 1500]);
  });

  it('5xx until retries run out → unavailable', async () => {
    server.enqueue({ kind: 'error', status: 502 }, { kind: 'error', status: 500 });
    const error = await failure(complete(provider({ maxAttempts: 2 })));
    expect(error.code).toBe('unavailable');
    expect(error.details).toMatchObject({ attempts: 2, status: 500 });
    expect(server.pending).toBe(0);
  });

  it('an exhausted quota (429 insufficient_quota) fails at once', async () => {
    server.enqueue({
      kind: 'error',
      status: 429,
      code: 'insufficient_quota',
      message: 'You exceeded your current quota.',
    });
    const error = await failure(complete(provider()));
    expect(error.code).toBe('failed_precondition');
    expect(error.message).toContain("the account's quota is used up");
    expect(sleeps).toEqual([]);
  });

  it('a retry-after longer than the limit stops at once and says how long', async () => {
    server.enqueue({ kind: 'error', status: 429, retryAfter: '120' }, text('never'));
    const error = await failure(complete(provider()));
    expect(error.code).toBe('resource_exhausted');
    expect(error.message).toContain(
      '(the API asked to wait 120 s, longer than this turn waits; stopped after 1 attempts)',
    );
    expect(server.pending).toBe(1);
  });

  it.each([
    [
      'OpenAI',
      {
        code: 'context_length_exceeded',
        message:
          "This model's maximum context length is 128000 tokens. However, your messages resulted in 131072 tokens. Please reduce the length of the messages.",
      },
    ],
    [
      'vLLM',
      {
        type: 'BadRequestError',
        message:
          "This model's maximum context length is 32768 tokens. However, you requested 40000 tokens (31808 in the messages, 8192 in the completion). Please reduce the length of the messages or completion.",
      },
    ],
    [
      'LiteLLM',
      {
        message:
          'litellm.ContextWindowExceededError: litellm.BadRequestError: prompt is too long: 210000 tokens > 200000 maximum',
      },
    ],
  ])(
    'context overflow (%s wording) → invalid_argument that says what to do',
    async (_who, body) => {
      server.enqueue({ kind: 'error', status: 400, ...body }, text('never'));
      const error = await failure(complete(provider({ model: 'm-small' })));
      expect(error.code).toBe('invalid_argument');
      expect(error.message).toContain(
        "the conversation's history is longer than model m-small can read (its context window); a retry will not help: start a new conversation, or run this one on a model with a larger context window",
      );
      expect(error.message).toContain(body.message);
      expect(server.requests).toHaveLength(1);
    },
  );

  it('another 400 is a malformed request, not an overflow', async () => {
    server.enqueue({ kind: 'error', status: 400, message: "Invalid value for 'temperature'." });
    const error = await failure(complete(provider()));
    expect(error.code).toBe('invalid_argument');
    expect(error.message).toBe(
      "OpenAI-compatible API returned 400: Invalid value for 'temperature'.; the request is malformed or too large; a retry will not help (check the transcript, tools and model settings)",
    );
    expect(error.details.requestId).toMatch(/^req_/u);
  });

  it('401 (wrong key) → permission_denied naming what to check, the key never in the message', async () => {
    const wrongKey = 'sk-wrong-key-999';
    const error = await failure(complete(provider({ apiKey: wrongKey })));
    expect(error.code).toBe('permission_denied');
    expect(error.message).toBe(
      'OpenAI-compatible API returned 401 invalid_api_key: Incorrect API key provided.; the API key was rejected; check OPENAI_API_KEY in the harness configuration and that it belongs to the server OPENAI_BASE_URL names',
    );
    expect(JSON.stringify(error.toJSON())).not.toContain(wrongKey);
    expect(server.requests).toHaveLength(1);
  });

  it('403 → permission_denied; a key echoed back is redacted', async () => {
    server.enqueue({ kind: 'error', status: 403, message: `key ${KEY} may not use this model` });
    const error = await failure(complete(provider()));
    expect(error.code).toBe('permission_denied');
    expect(error.message).toContain('key [redacted] may not use this model');
    expect(error.message).toContain("check the key's project, organization and model permissions");
    expect(JSON.stringify(error.toJSON())).not.toContain(KEY);
  });

  it('404 → not_found pointing at the model name and the base URL', async () => {
    server.enqueue({ kind: 'error', status: 404, code: 'model_not_found' });
    const error = await failure(complete(provider()));
    expect(error.code).toBe('not_found');
    expect(error.message).toContain('OPENAI_BASE_URL usually ends in /v1');
  });

  it('an attempt that outlives its timeout → deadline_exceeded after the retries', async () => {
    const hang: ScriptedReply = { ...text('slow'), holdAfterEvents: 2 };
    server.enqueue(hang, hang);
    const error = await failure(complete(provider({ attemptTimeoutMs: 150, maxAttempts: 2 })));
    expect(error.code).toBe('deadline_exceeded');
    expect(error.message).toBe(
      'OpenAI-compatible API: no complete answer within 150 ms (giving up after 2 attempts)',
    );
  });

  it('abort mid-stream: rejects cancelled and the HTTP stream is closed', async () => {
    server.enqueue({ ...text('one two three'), holdAfterEvents: 3 });
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

  it('the real sleep is cut short by the signal', async () => {
    server.enqueue({ kind: 'error', status: 429, retryAfter: '30' });
    const abort = new AbortController();
    const p = new OpenAiProvider({ apiKey: KEY, baseUrl: server.url });
    const started = Date.now();
    const call = p.complete(hello, { signal: abort.signal });
    await eventually(() => server.requests.length === 1, 'the first request');
    setTimeout(() => abort.abort(), 20);
    const error = await failure(call);
    expect(error.code).toBe('cancelled');
    expect(Date.now() - started).toBeLessThan(5000);
    expect(server.requests).toHaveLength(1);
  });

  it('refuses an empty key and bad numbers', () => {
    expect(() => new OpenAiProvider({ apiKey: ' ' })).toThrow(
      'OpenAI provider: the API key is empty; set OPENAI_API_KEY in the harness configuration',
    );
    expect(() => new OpenAiProvider({ apiKey: KEY, maxAttempts: 0 })).toThrow(
      'OpenAI provider: maxAttempts must be a positive integer, got 0',
    );
  });
});
