import {
  conversationAttributes,
  GenAiOperation,
  type GenAiSpanScope,
} from '../../common/genai-attributes';
import { usageAttributes } from '../../common/model/usage-attributes';
import { inSpan, isTracing, SpanKind } from '../../common/tracing';
import type { ModelProvider } from '../../common/model/model-port';

/** The model a call asks for: the turn's, else the provider's default; empty when neither. */
export function requestedModel(provider: ModelProvider, requested: string): string {
  return requested === '' ? (provider.genAi?.model ?? '') : requested;
}

/**
 * `provider` with a span around every model call, after the OpenTelemetry GenAI semantic
 * conventions: `chat <model>`, kind CLIENT, a child of the agent's span (`scope`), with
 * `gen_ai.operation.name`, `gen_ai.provider.name`, `gen_ai.request.model`, the
 * conversation, and from the answer `gen_ai.response.id`, `gen_ai.response.model`, the
 * token counts (the prompt-cache ones when reported) and `gen_ai.response.finish_reasons`.
 * Prompts and replies are never recorded: they are the conversation's, and the journal
 * holds them. With tracing off, `provider` itself.
 *
 * @param requested the model the turn asked for; empty: the provider's default.
 */
export function tracedModel(
  provider: ModelProvider,
  requested: string,
  scope: GenAiSpanScope,
): ModelProvider {
  if (!isTracing()) return provider;
  const model = requestedModel(provider, requested);
  const name = model === '' ? GenAiOperation.Chat : `${GenAiOperation.Chat} ${model}`;
  return {
    ...(provider.genAi === undefined ? {} : { genAi: provider.genAi }),
    ...(provider.parameters === undefined ? {} : { parameters: provider.parameters }),
    complete: (request, options) => {
      const parent = scope.parent(options.thread);
      return inSpan(
        name,
        {
          kind: SpanKind.CLIENT,
          ...(parent === undefined ? {} : { parent }),
          attributes: {
            'gen_ai.operation.name': GenAiOperation.Chat,
            'gen_ai.provider.name': provider.genAi?.provider ?? '_OTHER',
            ...(model === '' ? {} : { 'gen_ai.request.model': model }),
            ...conversationAttributes(scope.conversationId),
          },
        },
        async (span) => {
          const response = await provider.complete(request, options);
          span?.setAttributes({
            ...(response.id === undefined ? {} : { 'gen_ai.response.id': response.id }),
            'gen_ai.response.model': response.model,
            ...usageAttributes(response.usage),
            'gen_ai.response.finish_reasons': [response.stopReason],
          });
          return response;
        },
      );
    },
  };
}
