import { afterEach, beforeEach, describe, expect, it } from '@jest/globals';
import { MessagesApiServer, type MessageReply } from '../../test/support/messages-api-server';
import { AnthropicProvider } from '../../common/model/anthropic-provider';
import { requestIds } from '../../common/request-ids';
import { nodeEd25519Signer, nodeEd25519Verifier } from '../crypto/node-ed25519';
import { builtinToolRunner, builtinTools } from '../tools/builtin-tools';
import { runTurn } from '../turn/run-turn';
import type { TurnStep } from '../turn/turn-records';

// The turn loop with the Anthropic adapter (common/model/) against a local Messages API
// server: the adapter's own behaviour is tested beside it.

const KEY = 'sk-ant-test-0123456789';

let server: MessagesApiServer;

beforeEach(async () => {
  server = await MessagesApiServer.start({ apiKey: KEY });
});
afterEach(async () => {
  await server.close();
});

const provider = (): AnthropicProvider =>
  new AnthropicProvider({ apiKey: KEY, baseUrl: server.url, maxAttempts: 1 });

const text = (value: string): MessageReply => ({
  kind: 'message',
  content: [{ type: 'text', text: value }],
  usage: { input_tokens: 21, output_tokens: 9 },
});

describe('runTurn with the Anthropic provider', () => {
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
      record: { model: 'claude-sonnet-5-5', usage: { inputTokens: 30, outputTokens: 12 } },
    });
    expect(deltas).toEqual(['1:Computing.', '2:It ', '2:is ', '2:42.']);
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
