import { describe, expect, it } from '@jest/globals';
import { isAppError } from '../errors';
import {
  modelRequestFromJson,
  modelRequestToJson,
  modelResponseFromJson,
  modelResponseToJson,
} from './model-json';
import type { ModelRequest, ModelResponse } from './model-port';

const request: ModelRequest = {
  system: 'Be brief.',
  messages: [
    { role: 'user', content: [{ type: 'text', text: 'what is 2+2?' }] },
    {
      role: 'assistant',
      content: [{ type: 'tool_use', id: 't1', name: 'calculator', input: { expression: '2+2' } }],
    },
    {
      role: 'user',
      content: [{ type: 'tool_result', toolUseId: 't1', content: '4', isError: false }],
    },
  ],
  tools: [{ name: 'calculator', description: 'Adds.', inputSchema: { type: 'object' } }],
  toolChoice: 'auto',
};

const response: ModelResponse = {
  id: 'msg_1',
  model: 'claude-test',
  content: [{ type: 'text', text: 'It is 4.' }],
  stopReason: 'end_turn',
  usage: { inputTokens: 10, outputTokens: 3, cacheReadInputTokens: 2 },
};

function refusal(read: () => unknown): string {
  try {
    read();
  } catch (error) {
    if (isAppError(error) && error.code === 'invalid_argument') return error.message;
    throw error;
  }
  throw new Error('expected a refusal');
}

describe('model requests and responses as JSON', () => {
  it('round-trips both, the request as canonical JSON (sorted keys)', () => {
    const text = modelRequestToJson(request);
    expect(text.startsWith('{"messages":')).toBe(true);
    expect(modelRequestFromJson(text, 'f')).toEqual(request);
    expect(modelResponseFromJson(modelResponseToJson(response), 'f')).toEqual(response);
  });

  it.each([
    ['not JSON', 'nope', /^request_json is not JSON; it must hold a model request$/],
    [
      'an unknown role',
      JSON.stringify({ ...request, messages: [{ role: 'system', content: [] }] }),
      /^request_json\.messages\.0\.role .*: request_json must hold a model request/,
    ],
    [
      'a tool_use whose input is not an object',
      JSON.stringify({
        ...request,
        messages: [
          { role: 'assistant', content: [{ type: 'tool_use', id: 'a', name: 'b', input: 3 }] },
        ],
      }),
      /^request_json\.messages\.0\.content\.0\.input must be a JSON object/,
    ],
    [
      'a field the request does not have',
      JSON.stringify({ ...request, model: 'steer-me' }),
      /^request_json .*model/,
    ],
    [
      'an unknown tool choice',
      JSON.stringify({ ...request, toolChoice: 'any' }),
      /^request_json\.toolChoice /,
    ],
  ])('refuses a request with %s, naming the field', (_, text, message) => {
    expect(refusal(() => modelRequestFromJson(text, 'request_json'))).toMatch(message);
  });

  it('refuses a response with negative token counts or an unknown stop reason', () => {
    const bad = (patch: object) => JSON.stringify({ ...response, ...patch });
    expect(
      refusal(() =>
        modelResponseFromJson(bad({ usage: { inputTokens: -1, outputTokens: 0 } }), 'r'),
      ),
    ).toMatch(/^r\.usage\.inputTokens /);
    expect(refusal(() => modelResponseFromJson(bad({ stopReason: 'paused' }), 'r'))).toMatch(
      /^r\.stopReason /,
    );
  });
});
