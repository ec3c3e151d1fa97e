import type { ContentBlockParam, MessageParam } from '@anthropic-ai/sdk/resources/messages';
import type { Message, ToolChoice } from './model-port';
import type { ToolNames } from './tool-names';

/**
 * Our requests in the Anthropic Messages API's words: messages and tool choice. Tool
 * names go out under the aliases of `tool-names.ts`.
 */

export function toToolChoice(choice: ToolChoice): { type: 'auto' } | { type: 'none' } {
  return choice === 'none' ? { type: 'none' } : { type: 'auto' };
}

export function toMessageParam(message: Message, names: ToolNames): MessageParam {
  const content = message.content.map((block): ContentBlockParam => {
    switch (block.type) {
      case 'text':
        return { type: 'text', text: block.text };
      case 'tool_use':
        return { type: 'tool_use', id: block.id, name: names.api(block.name), input: block.input };
      case 'tool_result':
        return {
          type: 'tool_result',
          tool_use_id: block.toolUseId,
          content: block.content,
          is_error: block.isError,
        };
      default: {
        const never: never = block;
        return never;
      }
    }
  });
  return message.role === 'user' ? { role: 'user', content } : { role: 'assistant', content };
}
