import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import type { ToolOutcome } from '../turn/ports/tool-port';

/** What an MCP tool answered, as the outcome the model sees. */

/** Text for the model: text as is, other content described in one line. */
export function renderResult(result: CallToolResult): string {
  const parts = result.content.map((block): string => {
    switch (block.type) {
      case 'text':
        return block.text;
      case 'image':
      case 'audio':
        return `[${block.type} ${block.mimeType}, ${Math.floor((block.data.length * 3) / 4)} bytes]`;
      case 'resource_link':
        return `[resource link ${block.name}: ${block.uri}]`;
      case 'resource':
        return 'text' in block.resource && typeof block.resource.text === 'string'
          ? block.resource.text
          : `[resource ${block.resource.uri}${block.resource.mimeType === undefined ? '' : `, ${block.resource.mimeType}`}]`;
      default: {
        const never: never = block;
        return String(never);
      }
    }
  });
  if (parts.length === 0 && result.structuredContent !== undefined) {
    return JSON.stringify(result.structuredContent);
  }
  return parts.join('\n');
}

export function truncate(outcome: ToolOutcome, maxChars: number): ToolOutcome {
  if (outcome.content.length <= maxChars) return outcome;
  return {
    ...outcome,
    content: `${outcome.content.slice(0, maxChars)}\n[result cut at ${maxChars} of ${outcome.content.length} characters]`,
  };
}

export function failed(content: string): ToolOutcome {
  return { content, isError: true };
}
