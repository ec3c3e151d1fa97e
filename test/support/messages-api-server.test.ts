import { afterEach, beforeEach, describe, expect, it } from '@jest/globals';
import Anthropic from '@anthropic-ai/sdk';
import type { MessageParam, Tool } from '@anthropic-ai/sdk/resources/messages';
import {
  echoResponder,
  MessagesApiServer,
  slowDirective,
  toolDirective,
} from './messages-api-server';

// The responder mode of the local Messages API server, through the real SDK client. The
// scripted-queue mode is exercised by common/model/anthropic-provider.test.ts.

const KEY = 'sk-ant-test-responder';
const MODEL = 'claude-sonnet-5-5';

let server: MessagesApiServer;

beforeEach(async () => {
  server = await MessagesApiServer.start({ apiKey: KEY, respond: echoResponder });
});
afterEach(async () => {
  await server.close();
});

function client(): Anthropic {
  return new Anthropic({ apiKey: KEY, baseURL: server.url, maxRetries: 0, logLevel: 'off' });
}

const calculator: Tool = {
  name: 'calculator',
  description: 'Evaluates arithmetic.',
  input_schema: { type: 'object', properties: { expression: { type: 'string' } } },
};

async function streamed(
  messages: MessageParam[],
  extra: Partial<Anthropic.MessageCreateParamsNonStreaming> = {},
): Promise<{ message: Anthropic.Message; deltas: string[] }> {
  const deltas: string[] = [];
  const stream = client()
    .messages.stream({ model: MODEL, max_tokens: 100, messages, ...extra })
    .on('text', (delta) => deltas.push(delta));
  return { message: await stream.finalMessage(), deltas };
}

describe('echoResponder', () => {
  it('echoes the last user text, streaming and not', async () => {
    const plain = await client().messages.create({
      model: MODEL,
      max_tokens: 100,
      messages: [{ role: 'user', content: 'hello there' }],
    });
    expect(plain.content).toEqual([{ type: 'text', text: 'echo: hello there' }]);
    expect(plain.stop_reason).toBe('end_turn');

    const { message, deltas } = await streamed([
      { role: 'user', content: 'first' },
      { role: 'assistant', content: 'echo: first' },
      { role: 'user', content: [{ type: 'text', text: 'second one' }] },
    ]);
    expect(deltas.join('')).toBe('echo: second one');
    expect(message.content).toEqual([{ type: 'text', text: 'echo: second one' }]);
    expect(server.requests.map((r) => r.stream)).toEqual([false, true]);
  });

  it('asks for the tool named in the text, with a stable id, then reports its result', async () => {
    const prompt: MessageParam = {
      role: 'user',
      content: `please ${toolDirective('calculator', { expression: '6*7' })}`,
    };
    const first = await streamed([prompt], { tools: [calculator] });
    expect(first.message.stop_reason).toBe('tool_use');
    const [call] = first.message.content;
    if (call?.type !== 'tool_use') throw new Error(`expected a tool_use, got ${call?.type}`);
    expect(call).toMatchObject({ name: 'calculator', input: { expression: '6*7' } });
    expect(call.id).toMatch(/^toolu_echo_[0-9a-f]{24}$/u);

    // A retry of the same request (or a replay after a crash) gets the same call.
    const again = await client().messages.create({
      model: MODEL,
      max_tokens: 100,
      messages: [prompt],
      tools: [calculator],
    });
    expect(again.content).toEqual([call]);

    const after = await streamed(
      [
        prompt,
        { role: 'assistant', content: [call] },
        { role: 'user', content: [{ type: 'tool_result', tool_use_id: call.id, content: '42' }] },
      ],
      { tools: [calculator] },
    );
    expect(after.message.stop_reason).toBe('end_turn');
    expect(after.deltas.join('')).toBe('tool calculator said: 42');
  });

  it('runs several directives in order, aliases namespaced tools, honours tool_choice none', async () => {
    const issue: Tool = {
      name: 'github__create_issue',
      input_schema: { type: 'object', properties: { title: { type: 'string' } } },
    };
    const text = `${toolDirective('calculator', { expression: '1+1' })} then ${toolDirective('github/create_issue', { title: 'x' })}`;
    const prompt: MessageParam = { role: 'user', content: text };
    const tools = [calculator, issue];
    const first = await client().messages.create({
      model: MODEL,
      max_tokens: 100,
      messages: [prompt],
      tools,
    });
    const [one] = first.content;
    if (one?.type !== 'tool_use') throw new Error('expected a tool_use');
    expect(one.name).toBe('calculator');

    const history: MessageParam[] = [
      prompt,
      { role: 'assistant', content: [one] },
      {
        role: 'user',
        content: [
          { type: 'tool_result', tool_use_id: one.id, content: [{ type: 'text', text: '2' }] },
        ],
      },
    ];
    const second = await client().messages.create({
      model: MODEL,
      max_tokens: 100,
      messages: history,
      tools,
    });
    const [two] = second.content;
    if (two?.type !== 'tool_use') throw new Error('expected a second tool_use');
    expect(two).toMatchObject({ name: 'github__create_issue', input: { title: 'x' } });
    expect(two.id).not.toBe(one.id);

    const done = await client().messages.create({
      model: MODEL,
      max_tokens: 100,
      messages: [
        ...history,
        { role: 'assistant', content: [two] },
        {
          role: 'user',
          content: [
            { type: 'tool_result', tool_use_id: two.id, content: 'issue #7', is_error: false },
          ],
        },
      ],
      tools,
    });
    expect(done.content).toEqual([
      { type: 'text', text: 'tool github/create_issue said: issue #7' },
    ]);

    // A closing call offers no tools: the responder answers in text.
    const closing = await client().messages.create({
      model: MODEL,
      max_tokens: 100,
      messages: [prompt],
      tools,
      tool_choice: { type: 'none' },
    });
    expect(closing.content).toEqual([{ type: 'text', text: `echo: ${text}` }]);
  });

  it('says so when a directive’s input is not a JSON object', async () => {
    const reply = await client().messages.create({
      model: MODEL,
      max_tokens: 100,
      messages: [{ role: 'user', content: '[[tool:calculator {nope}]]' }],
    });
    expect(reply.content[0]).toMatchObject({
      type: 'text',
      text: expect.stringMatching(
        /^echo responder: cannot read the input of \[\[tool:calculator\]\]/u,
      ),
    });
  });

  it('streams a slow reply in pieces over the asked time, and stops when the client leaves', async () => {
    const started = Date.now();
    const arrivals: number[] = [];
    const deltas: string[] = [];
    const stream = client()
      .messages.stream({
        model: MODEL,
        max_tokens: 100,
        messages: [{ role: 'user', content: `take your time ${slowDirective(400)}` }],
      })
      .on('text', (delta) => {
        deltas.push(delta);
        arrivals.push(Date.now() - started);
      });
    await stream.finalMessage();
    expect(deltas.join('')).toBe('echo: take your time [[slow:400]]');
    expect(deltas).toHaveLength(10);
    expect((arrivals.at(-1) ?? 0) - (arrivals[0] ?? 0)).toBeGreaterThanOrEqual(200);

    // Not streaming: the whole answer waits.
    const t0 = Date.now();
    await client().messages.create({
      model: MODEL,
      max_tokens: 100,
      messages: [{ role: 'user', content: slowDirective(300) }],
    });
    expect(Date.now() - t0).toBeGreaterThanOrEqual(250);

    // A client that goes away mid-stream: the server stops writing.
    const leaving = client().messages.stream({
      model: MODEL,
      max_tokens: 100,
      messages: [{ role: 'user', content: `long ${slowDirective(5_000)}` }],
    });
    const ended = leaving.finalMessage().catch((e: unknown) => e);
    await new Promise<void>((resolve) => leaving.once('text', () => resolve()));
    leaving.abort();
    expect(await ended).toBeInstanceOf(Anthropic.APIUserAbortError);
    const last = server.requests.at(-1);
    const deadline = Date.now() + 2_000;
    while (last?.aborted !== true && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    expect(last?.aborted).toBe(true);
  });
});

describe('responder and queue together', () => {
  it('takes queued replies first, the responder when the queue is empty', async () => {
    server.enqueue({ kind: 'message', content: [{ type: 'text', text: 'scripted' }] });
    const ask = (): Promise<Anthropic.Message> =>
      client().messages.create({
        model: MODEL,
        max_tokens: 100,
        messages: [{ role: 'user', content: 'hi' }],
      });
    expect((await ask()).content).toEqual([{ type: 'text', text: 'scripted' }]);
    expect((await ask()).content).toEqual([{ type: 'text', text: 'echo: hi' }]);

    server.setResponder(() => Promise.reject(new Error('no answer for you')));
    const failed: unknown = await ask().catch((e: unknown) => e);
    expect(failed).toBeInstanceOf(Anthropic.InternalServerError);
    expect(String(failed)).toContain('the responder failed: no answer for you');

    server.setResponder(undefined);
    const empty: unknown = await ask().catch((e: unknown) => e);
    expect(String(empty)).toContain('no scripted reply left');

    server.setResponder(async (request) => {
      await new Promise((resolve) => setTimeout(resolve, 5));
      return {
        kind: 'message',
        content: [{ type: 'text', text: `saw ${server.requests.indexOf(request)}` }],
      };
    });
    expect((await ask()).content).toEqual([{ type: 'text', text: 'saw 4' }]);
  });
});
