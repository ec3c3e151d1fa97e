import { describe, expect, it } from '@jest/globals';
import { usageAttributes } from './usage-attributes';

describe('usageAttributes', () => {
  it('records the cache counts a provider reported, zero included', () => {
    expect(
      usageAttributes({
        inputTokens: 10,
        outputTokens: 5,
        cacheReadInputTokens: 0,
        cacheCreationInputTokens: 300,
      }),
    ).toEqual({
      'gen_ai.usage.input_tokens': 10,
      'gen_ai.usage.output_tokens': 5,
      'gen_ai.usage.cache_read.input_tokens': 0,
      'gen_ai.usage.cache_creation.input_tokens': 300,
    });
  });

  it('leaves out the cache counts a provider did not report', () => {
    expect(usageAttributes({ inputTokens: 10, outputTokens: 5 })).toEqual({
      'gen_ai.usage.input_tokens': 10,
      'gen_ai.usage.output_tokens': 5,
    });
  });
});
