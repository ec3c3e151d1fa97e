import { afterEach, beforeEach, describe, expect, it } from '@jest/globals';
import {
  ChatCompletionsServer,
  type CompletionReply,
} from '../../test/support/chat-completions-server';
import { OpenAiProvider } from '../../common/model/openai-provider';
import { requestIds } from '../../common/request-ids';
import { nodeEd25519Signer, nodeEd25519Verifier } from '../crypto/node-ed25519';
import { builtinToolRunner, builtinTools } from '../tools/builtin-tools';
import { runTurn } from '../turn/run-turn';
import type { TurnStep } from '../turn/turn-records';

// The turn loop with the OpenAI-compatible adapter (common/model/) against a local Chat
// Completions server: the adapter's own behaviour is tested beside it.

const KEY = 'sk-test-openai-0123456789';

let server: ChatCompletionsServer;

beforeEach(async () => {
  server = await ChatCompletionsServer.start({ apiKey: KEY });
});
afterEach(async () => {
  await server.close();
});

const provider = (): OpenAiProvider =>
  new OpenAiProvider({ apiKey: KEY, baseUrl: server.url, model: 'gpt-test', maxAttempts: 1 });

const text = (value: string): CompletionReply => ({
  kind: 'completion',
  text: value,
  usage: { prompt_tokens: 21, completion_tokens: 9 },
});

describe('runTurn with the OpenAI-compatible provider', () => {
  it('runs a builtin tool and sends its result back to the API', async () => {
    server.enqueue(
      {
        kind: 'completion',
        text: 'Computing.',
        toolCalls: [{ id: 'call_calc', name: 'calculator', arguments: '{"expression":"6*7"}' }],
        usage: { prompt_tokens: 30, completion_tokens: 12, cached_tokens: 16 },
      },
      text('It is 42.'),
    );
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
        model: provider(),
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
        onTextDelta: ({ step, text: t }) => deltas.push(`${step}:${t}`),
      },
    );
    expect(outcome).toMatchObject({ kind: 'completed', text: 'It is 42.', steps: 2 });
    expect(committed.map((s) => s.kind)).toEqual([
      'model_call',
      'tool_call',
      'tool_result',
      'model_call',
    ]);
    expect(committed[0]).toMatchObject({
      record: { model: 'gpt-test', usage: { inputTokens: 30, outputTokens: 12 } },
    });
    expect(deltas).toEqual(['1:Computing.', '2:It ', '2:is ', '2:42.']);
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
