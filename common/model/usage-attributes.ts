import type { Usage } from './model-port';

/**
 * GenAI span attributes of a model call's usage (docs/observability.md#spans): beside the
 * model port, so the span code of both planes reads one rule.
 */

/**
 * A model call's token counts: input and output always, the prompt-cache counts
 * (`gen_ai.usage.cache_read.input_tokens`, `gen_ai.usage.cache_creation.input_tokens`)
 * only when the provider reported them.
 */
export function usageAttributes(usage: Usage): Readonly<Record<string, number>> {
  return {
    'gen_ai.usage.input_tokens': usage.inputTokens,
    'gen_ai.usage.output_tokens': usage.outputTokens,
    ...(usage.cacheReadInputTokens === undefined
      ? {}
      : { 'gen_ai.usage.cache_read.input_tokens': usage.cacheReadInputTokens }),
    ...(usage.cacheCreationInputTokens === undefined
      ? {}
      : { 'gen_ai.usage.cache_creation.input_tokens': usage.cacheCreationInputTokens }),
  };
}
