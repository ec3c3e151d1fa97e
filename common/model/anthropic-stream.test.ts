import { describe, expect, it } from '@jest/globals';
import type { RawMessageStreamEvent, Usage } from '@anthropic-ai/sdk/resources/messages';
import { ToolNames } from './tool-names';
import { StreamAccumulator } from './anthropic-stream';

// The prompt-cache counts of a streamed answer: message_start reports them, and
// message_delta's cumulative usage replaces them when it states them (null: unsaid).

function start(usage: Partial<Usage>): RawMessageStreamEvent {
  return {
    type: 'message_start',
    message: {
      id: 'msg_cache',
      type: 'message',
      role: 'assistant',
      model: 'claude-sonnet-5-5',
      container: null,
      content: [],
      diagnostics: null,
      stop_details: null,
      stop_reason: null,
      stop_sequence: null,
      usage: {
        cache_creation: null,
        cache_creation_input_tokens: null,
        cache_read_input_tokens: null,
        inference_geo: null,
        input_tokens: 30,
        output_tokens: 1,
        output_tokens_details: null,
        server_tool_use: null,
        service_tier: 'standard',
        speed: null,
        ...usage,
      },
    },
  };
}

function delta(read: number | null, creation: number | null): RawMessageStreamEvent {
  return {
    type: 'message_delta',
    delta: { container: null, stop_details: null, stop_reason: 'end_turn', stop_sequence: null },
    usage: {
      cache_creation_input_tokens: creation,
      cache_read_input_tokens: read,
      input_tokens: null,
      output_tokens: 8,
      output_tokens_details: null,
      server_tool_use: null,
    },
  };
}

function usageOf(events: readonly RawMessageStreamEvent[]): unknown {
  const accumulator = new StreamAccumulator(new ToolNames([]), undefined);
  for (const event of [...events, { type: 'message_stop' } as const]) accumulator.add(event);
  return accumulator.finish().usage;
}

describe('StreamAccumulator prompt-cache counts', () => {
  it('takes them from message_start', () => {
    expect(
      usageOf([start({ cache_read_input_tokens: 500, cache_creation_input_tokens: 0 })]),
    ).toEqual({
      inputTokens: 30,
      outputTokens: 1,
      cacheReadInputTokens: 500,
      cacheCreationInputTokens: 0,
    });
  });

  it('message_delta totals replace them; a null total keeps what message_start said', () => {
    const events = [
      start({ cache_read_input_tokens: 500, cache_creation_input_tokens: 40 }),
      delta(null, 90),
    ];
    expect(usageOf(events)).toEqual({
      inputTokens: 30,
      outputTokens: 8,
      cacheReadInputTokens: 500,
      cacheCreationInputTokens: 90,
    });
  });

  it('leaves them out when the API never states them', () => {
    expect(usageOf([start({}), delta(null, null)])).toEqual({ inputTokens: 30, outputTokens: 8 });
  });
});
