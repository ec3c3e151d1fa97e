import { afterEach, beforeEach, describe, expect, it } from '@jest/globals';
import { AnthropicProvider } from '../../common/model/anthropic-provider';
import type { ModelProvider } from '../../common/model/model-port';
import { OpenAiProvider } from '../../common/model/openai-provider';
import { requestIds } from '../../common/request-ids';
import { ChatCompletionsServer } from '../../test/support/chat-completions-server';
import { MessagesApiServer } from '../../test/support/messages-api-server';
import { nodeEd25519Signer, nodeEd25519Verifier } from '../crypto/node-ed25519';
import { builtinToolRunner, builtinTools } from '../tools/builtin-tools';
import { runTurn } from '../turn/run-turn';
import type { TurnOutcome } from '../turn/turn-outcome';
import type { TurnStep } from '../turn/turn-records';

// The turn loop with each model adapter (common/model/) against a local server that speaks
// its wire protocol: a builtin tool call, its result sent back, then the answer. Each
// adapter's own behaviour is tested beside it.

const KEY = 'sk-test-0123456789';

interface CalculatorTurn {
  readonly outcome: TurnOutcome;
  readonly committed: readonly TurnStep[];
  readonly deltas: readonly string[];
}

/** Runs "what is six times seven?" with `model`, whose server answers with a calculator call, then the text. */
async function calculatorTurn(model: ModelProvider): Promise<CalculatorTurn> {
  const approvalKey = nodeEd25519Signer(new Uint8Array(32).fill(7));
  const committed: TurnStep[] = [];
  const deltas: string[] = [];
  let now = 1000;
  const outcome = await runTurn(
    {
      turnId: 'turn-a',
      history: [],
      userMessage: 'What is six times seven?',
      tools: builtinTools,
      budget: {},
      recordedSteps: [],
      approvalAnswers: [],
      questionAnswers: [],
    },
    {
      modelFor: () => model,
      tools: builtinToolRunner,
      steps: {
        commit: (step) => {
          committed.push(step);
          return Promise.resolve();
        },
      },
      clock: { nowMs: () => now++ },
      ids: requestIds,
      approvalVerifier: nodeEd25519Verifier,
      approvalPublicKey: approvalKey.publicKey,
      onTextDelta: ({ step, text }) => deltas.push(`${step}:${text}`),
    },
  );
  return { outcome, committed, deltas };
}

function expectCalculatorTurn(turn: CalculatorTurn, model: string): void {
  expect(turn.outcome).toMatchObject({ kind: 'completed', text: 'It is 42.', steps: 2 });
  expect(turn.committed.map((s) => s.kind)).toEqual([
    'model_call',
    'tool_call',
    'tool_result',
    'model_call',
  ]);
  expect(turn.committed[0]).toMatchObject({
    record: { model, usage: { inputTokens: 30, outputTokens: 12 } },
  });
  expect(turn.deltas).toEqual(['1:Computing.', '2:It ', '2:is ', '2:42.']);
}

describe('runTurn with the Anthropic provider', () => {
  let server: MessagesApiServer;
  beforeEach(async () => {
    server = await MessagesApiServer.start({ apiKey: KEY });
  });
  afterEach(async () => {
    await server.close();
  });

  it('runs a builtin tool and sends its result back to the API', async () => {
    server.enqueue(
      {
        kind: 'message',
        content: [
          { type: 'text', text: 'Computing.' },
          { type: 'tool_use', id: 'toolu_calc', name: 'calculator', input: { expression: '6*7' } },
        ],
        usage: { input_tokens: 30, output_tokens: 12 },
      },
      {
        kind: 'message',
        content: [{ type: 'text', text: 'It is 42.' }],
        usage: { input_tokens: 21, output_tokens: 9 },
      },
    );
    const turn = await calculatorTurn(
      new AnthropicProvider({ apiKey: KEY, baseUrl: server.url, maxAttempts: 1 }),
    );
    expectCalculatorTurn(turn, 'claude-sonnet-5-5');
    expect(server.bodies).toHaveLength(2);
    expect(server.bodies[1]).toMatchObject({
      messages: [
        { role: 'user', content: [{ type: 'text', text: 'What is six times seven?' }] },
        {
          role: 'assistant',
          content: [
            { type: 'text', text: 'Computing.' },
            {
              type: 'tool_use',
              id: 'toolu_calc',
              name: 'calculator',
              input: { expression: '6*7' },
            },
          ],
        },
        {
          role: 'user',
          content: [{ type: 'tool_result', tool_use_id: 'toolu_calc', content: '42' }],
        },
      ],
    });
  });
});

describe('runTurn with the OpenAI-compatible provider', () => {
  let server: ChatCompletionsServer;
  beforeEach(async () => {
    server = await ChatCompletionsServer.start({ apiKey: KEY });
  });
  afterEach(async () => {
    await server.close();
  });

  it('runs a builtin tool and sends its result back to the API', async () => {
    server.enqueue(
      {
        kind: 'completion',
        text: 'Computing.',
        toolCalls: [{ id: 'call_calc', name: 'calculator', arguments: '{"expression":"6*7"}' }],
        usage: { prompt_tokens: 30, completion_tokens: 12, cached_tokens: 16 },
      },
      { kind: 'completion', text: 'It is 42.', usage: { prompt_tokens: 21, completion_tokens: 9 } },
    );
    const turn = await calculatorTurn(
      new OpenAiProvider({ apiKey: KEY, baseUrl: server.url, model: 'gpt-test', maxAttempts: 1 }),
    );
    expectCalculatorTurn(turn, 'gpt-test');
    expect(server.bodies).toHaveLength(2);
    expect(server.bodies[1]).toMatchObject({
      messages: [
        { role: 'user', content: 'What is six times seven?' },
        {
          role: 'assistant',
          content: 'Computing.',
          tool_calls: [
            {
              id: 'call_calc',
              type: 'function',
              function: { name: 'calculator', arguments: '{"expression":"6*7"}' },
            },
          ],
        },
        { role: 'tool', tool_call_id: 'call_calc', content: '42' },
      ],
    });
    expect(server.bodies[1]).toHaveProperty('messages.length', 3);
  });
});
