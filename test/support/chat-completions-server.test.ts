import { afterEach, beforeEach, describe, expect, it } from '@jest/globals';
import OpenAI from 'openai';
import type { ChatCompletionMessageParam } from 'openai/resources/chat/completions';
import { ChatCompletionsServer } from './chat-completions-server';

// The local Chat Completions server through the real SDK client, and the SDK's own stream
// accumulator: if our chunks were not what the API sends, the SDK's helpers would build a
// different completion. The adapter's use of it is tested in
// common/model/openai-provider.test.ts.

const KEY = 'sk-test-server';
const MODEL = 'gpt-test';

let server: ChatCompletionsServer;

beforeEach(async () => {
  server = await ChatCompletionsServer.start({ apiKey: KEY });
});
afterEach(async () => {
  await server.close();
});

function client(): OpenAI {
  return new OpenAI({ apiKey: KEY, baseURL: server.url, maxRetries: 0, logLevel: 'off' });
}

const ask: ChatCompletionMessageParam[] = [{ role: 'user', content: 'add' }];

async function rejection(promise: Promise<unknown>): Promise<unknown> {
  return promise.then(
    () => {
      throw new Error('expected the request to fail');
    },
    (error: unknown) => error,
  );
}

describe('ChatCompletionsServer', () => {
  it("the SDK's stream helper assembles our chunks into the completion we scripted", async () => {
    server.enqueue({
      kind: 'completion',
      text: 'Let me add.',
      toolCalls: [
        { id: 'call_9', name: 'calculator', arguments: '{"expression":"1 + 2"}' },
        { id: 'call_10', name: 'calculator', arguments: '{"expression":"3 + 4"}' },
      ],
      usage: { prompt_tokens: 7, completion_tokens: 3, cached_tokens: 4 },
    });
    const texts: string[] = [];
    const stream = client()
      .chat.completions.stream({
        model: MODEL,
        messages: ask,
        stream_options: { include_usage: true },
      })
      .on('content.delta', ({ delta }) => texts.push(delta));
    const completion = await stream.finalChatCompletion();
    expect(texts).toEqual(['Let ', 'me ', 'add.']);
    expect(completion.model).toBe(MODEL);
    expect(completion.choices[0]?.finish_reason).toBe('tool_calls');
    expect(completion.choices[0]?.message).toMatchObject({
      role: 'assistant',
      content: 'Let me add.',
      tool_calls: [
        {
          id: 'call_9',
          type: 'function',
          function: { name: 'calculator', arguments: '{"expression":"1 + 2"}' },
        },
        {
          id: 'call_10',
          type: 'function',
          function: { name: 'calculator', arguments: '{"expression":"3 + 4"}' },
        },
      ],
    });
    expect(completion.usage).toMatchObject({
      prompt_tokens: 7,
      completion_tokens: 3,
      prompt_tokens_details: { cached_tokens: 4 },
    });
  });

  it('sends usage only when stream_options.include_usage asks, and ends with [DONE]', async () => {
    server.enqueue({ kind: 'completion', text: 'hi' });
    const chunks = [];
    const stream = await client().chat.completions.create({
      model: MODEL,
      messages: ask,
      stream: true,
    });
    for await (const chunk of stream) chunks.push(chunk);
    expect(chunks.every((chunk) => chunk.usage === undefined)).toBe(true);
    expect(chunks.at(-1)?.choices[0]?.finish_reason).toBe('stop');
  });

  it('non-streaming create returns the whole completion', async () => {
    server.enqueue({ kind: 'completion', text: 'Plain.' });
    const completion = await client().chat.completions.create({ model: MODEL, messages: ask });
    expect(server.requests[0]?.stream).toBe(false);
    expect(completion).toMatchObject({
      object: 'chat.completion',
      choices: [{ index: 0, message: { content: 'Plain.' }, finish_reason: 'stop' }],
      usage: { prompt_tokens: 10, completion_tokens: 5, total_tokens: 15 },
    });
  });

  it('errors are the typed SDK errors, with code, request id and retry-after', async () => {
    server.enqueue({ kind: 'error', status: 429, code: 'rate_limit_exceeded', retryAfter: '7' });
    const error = await rejection(
      client().chat.completions.create({ model: MODEL, messages: ask }),
    );
    expect(error).toBeInstanceOf(OpenAI.RateLimitError);
    if (!(error instanceof OpenAI.RateLimitError)) return;
    expect(error.code).toBe('rate_limit_exceeded');
    expect(error.requestID).toMatch(/^req_/u);
    expect(error.headers.get('retry-after')).toBe('7');
  });

  it('an error inside a stream reaches the SDK as an APIError', async () => {
    server.enqueue({
      kind: 'completion',
      text: 'one two',
      errorAfterEvents: { events: 2, message: 'overloaded', code: 'server_error' },
    });
    const stream = await client().chat.completions.create({
      model: MODEL,
      messages: ask,
      stream: true,
    });
    const error = await rejection(
      (async () => {
        for await (const chunk of stream) void chunk;
      })(),
    );
    expect(error).toBeInstanceOf(OpenAI.APIError);
    if (!(error instanceof OpenAI.APIError)) return;
    expect(error.status).toBeUndefined();
    expect(error.code).toBe('server_error');
  });

  it.each<[string, Partial<OpenAI.ChatCompletionCreateParamsNonStreaming>, string]>([
    [
      'a tool message that answers no tool call',
      { messages: [...ask, { role: 'tool', tool_call_id: 'call_1', content: '3' }] },
      "messages with role 'tool' must be a response to a preceeding message with 'tool_calls'",
    ],
    [
      'a tool call left unanswered',
      {
        messages: [
          ...ask,
          {
            role: 'assistant',
            content: null,
            tool_calls: [
              { id: 'call_1', type: 'function', function: { name: 'calc', arguments: '{}' } },
            ],
          },
          { role: 'user', content: 'and?' },
        ],
      },
      'The following tool_call_ids did not have response messages: call_1',
    ],
    ['tool_choice without tools', { tool_choice: 'none' }, "'tool_choice' is only allowed when"],
    [
      'a tool name the API refuses',
      { tools: [{ type: 'function', function: { name: 'github/create_issue' } }] },
      "Invalid 'tools[0].function.name'",
    ],
  ])('answers 400 to %s, without using a scripted reply', async (_what, change, says) => {
    server.enqueue({ kind: 'completion', text: 'unused' });
    const error = await rejection(
      client().chat.completions.create({ model: MODEL, messages: ask, ...change }),
    );
    expect(error).toBeInstanceOf(OpenAI.BadRequestError);
    expect(String(error)).toContain(says);
    expect(server.pending).toBe(1);
  });

  it('answers 401 to a wrong key', async () => {
    const wrong = new OpenAI({ apiKey: 'sk-nope', baseURL: server.url, maxRetries: 0 });
    const error = await rejection(wrong.chat.completions.create({ model: MODEL, messages: ask }));
    expect(error).toBeInstanceOf(OpenAI.AuthenticationError);
  });
});
