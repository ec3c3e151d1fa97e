import type {
  RawMessageStreamEvent,
  StopReason as ApiStopReason,
} from '@anthropic-ai/sdk/resources/messages';
import { isJsonObject, type JsonObject } from '../canonical-json';
import { StopReason, type ModelResponse, type OutputBlock, type Usage } from './model-port';
import type { ToolNames } from './tool-names';

/**
 * One streamed answer of the Anthropic Messages API read into a response: raw stream
 * events accumulated block by block, text forwarded as it arrives, tool inputs parsed once
 * complete, and a stream that ends early or breaks the protocol reported as cut.
 */

/** The stream ended before `message_stop`, or broke the protocol. */
export class StreamCutError extends Error {
  override readonly name = 'StreamCutError';
}

type Pending =
  | { readonly type: 'text'; text: string }
  | { readonly type: 'tool_use'; readonly id: string; readonly name: string; json: string }
  | { readonly type: 'other' };

/** Builds the response from raw stream events, forwarding text as it arrives. */
export class StreamAccumulator {
  private id = '';
  private model = '';
  private readonly blocks = new Map<number, Pending>();
  private stopReason: ApiStopReason | null = null;
  private inputTokens = 0;
  private outputTokens = 0;
  private cacheReadInputTokens: number | undefined;
  private cacheCreationInputTokens: number | undefined;
  private started = false;
  private stopped = false;

  constructor(
    private readonly names: ToolNames,
    private readonly onTextDelta: ((text: string) => void) | undefined,
  ) {}

  add(event: RawMessageStreamEvent): void {
    switch (event.type) {
      case 'message_start':
        this.started = true;
        this.id = event.message.id;
        this.model = event.message.model;
        this.inputTokens = event.message.usage.input_tokens;
        this.outputTokens = event.message.usage.output_tokens;
        this.noteCache(event.message.usage);
        return;
      case 'content_block_start': {
        const block = event.content_block;
        this.blocks.set(
          event.index,
          block.type === 'text'
            ? { type: 'text', text: block.text }
            : block.type === 'tool_use'
              ? { type: 'tool_use', id: block.id, name: block.name, json: '' }
              : // Thinking and server-tool blocks are not requested; skip any that come.
                { type: 'other' },
        );
        return;
      }
      case 'content_block_delta': {
        const block = this.blocks.get(event.index);
        if (block === undefined) {
          throw new StreamCutError(`stream sent a delta for unknown block ${event.index}`);
        }
        if (event.delta.type === 'text_delta' && block.type === 'text') {
          block.text += event.delta.text;
          if (event.delta.text !== '') this.onTextDelta?.(event.delta.text);
        } else if (event.delta.type === 'input_json_delta' && block.type === 'tool_use') {
          block.json += event.delta.partial_json;
        }
        return;
      }
      case 'content_block_stop':
        return;
      case 'message_delta':
        this.stopReason = event.delta.stop_reason;
        // message_delta carries cumulative totals; input tokens only when they changed.
        this.outputTokens = event.usage.output_tokens;
        if (event.usage.input_tokens !== null && event.usage.input_tokens !== undefined) {
          this.inputTokens = event.usage.input_tokens;
        }
        this.noteCache(event.usage);
        return;
      case 'message_stop':
        this.stopped = true;
        return;
      default: {
        const never: never = event;
        return never;
      }
    }
  }

  /** The prompt-cache counts of message_start, then message_delta's totals; null is unsaid. */
  private noteCache(usage: {
    readonly cache_read_input_tokens?: number | null;
    readonly cache_creation_input_tokens?: number | null;
  }): void {
    this.cacheReadInputTokens = usage.cache_read_input_tokens ?? this.cacheReadInputTokens;
    this.cacheCreationInputTokens =
      usage.cache_creation_input_tokens ?? this.cacheCreationInputTokens;
  }

  private usage(): Usage {
    return {
      inputTokens: this.inputTokens,
      outputTokens: this.outputTokens,
      ...(this.cacheReadInputTokens === undefined
        ? {}
        : { cacheReadInputTokens: this.cacheReadInputTokens }),
      ...(this.cacheCreationInputTokens === undefined
        ? {}
        : { cacheCreationInputTokens: this.cacheCreationInputTokens }),
    };
  }

  finish(): ModelResponse {
    if (!this.started || !this.stopped) {
      throw new StreamCutError('the response stream ended before message_stop');
    }
    const content: OutputBlock[] = [];
    for (const index of [...this.blocks.keys()].sort((a, b) => a - b)) {
      const block = this.blocks.get(index);
      if (block === undefined || block.type === 'other') continue;
      if (block.type === 'text') {
        // The API refuses empty text blocks in later requests; an empty one says nothing.
        if (block.text !== '') content.push({ type: 'text', text: block.text });
        continue;
      }
      content.push({
        type: 'tool_use',
        id: block.id,
        name: this.names.canonical(block.name),
        input: parseToolInput(block.json, block.name),
      });
    }
    return {
      ...(this.id === '' ? {} : { id: this.id }),
      model: this.model,
      content,
      stopReason: toStopReason(this.stopReason),
      usage: this.usage(),
    };
  }
}

/** A tool's input arrives as JSON text in pieces; no pieces means no arguments. */
function parseToolInput(json: string, name: string): JsonObject {
  if (json.trim() === '') return {};
  let value: unknown;
  try {
    value = JSON.parse(json);
  } catch (error) {
    throw new StreamCutError(`the input of tool call ${name} is not valid JSON`, {
      cause: error,
    });
  }
  if (!isJsonObject(value)) {
    throw new StreamCutError(`the input of tool call ${name} is not a JSON object`);
  }
  return value;
}

function toStopReason(reason: ApiStopReason | null): StopReason {
  switch (reason) {
    case 'end_turn':
      return StopReason.EndTurn;
    case 'tool_use':
      return StopReason.ToolUse;
    case 'max_tokens':
      return StopReason.MaxTokens;
    case 'stop_sequence':
      return StopReason.StopSequence;
    case 'refusal':
      return StopReason.Refusal;
    default:
      return StopReason.Other;
  }
}
