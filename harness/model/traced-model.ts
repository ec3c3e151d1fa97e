import { inSpan, isTracing, SpanKind } from '../../common/tracing';
import type { ModelProvider } from '../../common/model/model-port';

/**
 * `provider` with a span around every model call, after the OpenTelemetry GenAI semantic
 * conventions: `chat <model>`, kind CLIENT, `gen_ai.operation.name`,
 * `gen_ai.provider.name`, `gen_ai.request.model`, and from the answer
 * `gen_ai.response.model`, `gen_ai.usage.input_tokens`, `gen_ai.usage.output_tokens` and
 * `gen_ai.response.finish_reasons`. Prompts and replies are never recorded: they are the
 * conversation's, and the journal holds them. With tracing off, `provider` itself.
 *
 * @param requested the model the turn asked for; empty: the provider's default.
 */
export function tracedModel(provider: ModelProvider, requested: string): ModelProvider {
  if (!isTracing()) return provider;
  const model = requested === '' ? (provider.genAi?.model ?? '') : requested;
  const name = model === '' ? 'chat' : `chat ${model}`;
  return {
    ...(provider.genAi === undefined ? {} : { genAi: provider.genAi }),
    ...(provider.parameters === undefined ? {} : { parameters: provider.parameters }),
    complete: (request, options) =>
      inSpan(
        name,
        {
          kind: SpanKind.CLIENT,
          attributes: {
            'gen_ai.operation.name': 'chat',
            'gen_ai.provider.name': provider.genAi?.provider ?? '_OTHER',
            ...(model === '' ? {} : { 'gen_ai.request.model': model }),
          },
        },
        async (span) => {
          const response = await provider.complete(request, options);
          span?.setAttributes({
            'gen_ai.response.model': response.model,
            'gen_ai.usage.input_tokens': response.usage.inputTokens,
            'gen_ai.usage.output_tokens': response.usage.outputTokens,
            'gen_ai.response.finish_reasons': [response.stopReason],
          });
          return response;
        },
      ),
  };
}
