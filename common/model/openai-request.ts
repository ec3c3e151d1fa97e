import type {
  ChatCompletionContentPartText,
  ChatCompletionCreateParamsStreaming,
  ChatCompletionFunctionTool,
  ChatCompletionMessageFunctionToolCall,
  ChatCompletionMessageParam,
} from 'openai/resources/chat/completions';
import type { Message, ModelRequest, TextBlock } from './model-port';
import type { ToolNames } from './tool-names';

/**
 * Our requests in the words of OpenAI's Chat Completions API (and the servers that copy it:
 * vLLM, Ollama, LiteLLM, ...). docs/replay.md ("Model request bytes") gives the same
 * mapping as a table; change both together.
 *
 * - The system prompt is the first message, `role: "system"` (none when it is empty).
 * - A user message's `tool_result` blocks become `role: "tool"` messages, one per block,
 *   in order and before the message's text: the API wants tool answers right after the
 *   assistant message that asked for them. The text blocks that remain become one
 *   `role: "user"` message (see {@link textContent}).
 * - The protocol has no error flag on a tool answer, so a failed call's content is sent as
 *   {@link TOOL_ERROR_PREFIX} followed by the result text; a successful one as it is.
 * - An assistant message's text becomes its `content` (`null` when it has none, as the
 *   API itself writes it) and its `tool_use` blocks its `tool_calls`: `type: "function"`,
 *   the block's id, the tool's API name, and `arguments` = `JSON.stringify` of the input.
 * - Tools are `type: "function"` with `parameters` = the input schema (`type: "object"`
 *   forced); `tool_choice` is `"auto"` or `"none"`, and both are left out when the request
 *   offers no tools (the API refuses a tool choice without tools).
 */

/** Put before the content of a tool answer whose call failed. */
export const TOOL_ERROR_PREFIX = '[tool error] ';

/**
 * One text block is sent as a string; several as text parts (nothing is joined, so what
 * was sent can be told from the request); none as the empty string.
 */
function textContent(blocks: readonly TextBlock[]): string | ChatCompletionContentPartText[] {
  if (blocks.length === 1) return blocks[0]?.text ?? '';
  if (blocks.length === 0) return '';
  return blocks.map((block) => ({ type: 'text', text: block.text }));
}

/** The wire messages of one of our messages (a user message may become several). */
export function toChatMessages(message: Message, names: ToolNames): ChatCompletionMessageParam[] {
  const texts = message.content.filter((block) => block.type === 'text');
  if (message.role === 'assistant') {
    const calls = message.content
      .filter((block) => block.type === 'tool_use')
      .map((block): ChatCompletionMessageFunctionToolCall => ({
        id: block.id,
        type: 'function',
        function: { name: names.api(block.name), arguments: JSON.stringify(block.input) },
      }));
    return [
      {
        role: 'assistant',
        content: texts.length === 0 ? null : textContent(texts),
        ...(calls.length === 0 ? {} : { tool_calls: calls }),
      },
    ];
  }
  const answers: ChatCompletionMessageParam[] = message.content
    .filter((block) => block.type === 'tool_result')
    .map((block) => ({
      role: 'tool',
      tool_call_id: block.toolUseId,
      content: block.isError ? `${TOOL_ERROR_PREFIX}${block.content}` : block.content,
    }));
  if (texts.length === 0 && answers.length > 0) return answers;
  return [...answers, { role: 'user', content: textContent(texts) }];
}

/**
 * The streaming request for `request`.
 *
 * The output limit goes in `max_completion_tokens`, not `max_tokens`: OpenAI deprecated
 * `max_tokens` for Chat Completions and its reasoning models refuse it with a 400, while
 * `max_completion_tokens` is accepted by OpenAI for every model and by vLLM and LiteLLM
 * (which translates it for the backends behind it). A server that does not know the field
 * (older Ollama, llama.cpp) ignores it as it ignores any unknown field, so the request
 * still succeeds there, only without the limit; sending `max_tokens` instead would fail
 * outright against OpenAI's own newest models.
 */
export function toChatParams(
  request: ModelRequest,
  names: ToolNames,
  model: string,
  maxTokens: number,
): ChatCompletionCreateParamsStreaming {
  const tools = request.tools.map((tool): ChatCompletionFunctionTool => ({
    type: 'function',
    function: {
      name: names.api(tool.name),
      description: tool.description,
      parameters: { ...tool.inputSchema, type: 'object' },
    },
  }));
  const system: ChatCompletionMessageParam[] =
    request.system === undefined || request.system === ''
      ? []
      : [{ role: 'system', content: request.system }];
  return {
    model,
    max_completion_tokens: maxTokens,
    stream: true,
    stream_options: { include_usage: true },
    messages: [...system, ...request.messages.flatMap((message) => toChatMessages(message, names))],
    ...(tools.length === 0 ? {} : { tools, tool_choice: request.toolChoice }),
  };
}
