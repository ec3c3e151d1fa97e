import type { ChatCompletionChunk } from 'openai/resources/chat/completions';
import { isJsonObject, type JsonObject } from '../canonical-json';
import { StopReason, type ModelResponse, type OutputBlock, type Usage } from './model-port';
import type { ToolNames } from './tool-names';

/**
 * One streamed Chat Completions answer read into a response: the first choice's text
 * forwarded as it arrives, tool calls assembled from their deltas by `index` (the id and
 * name come in the first delta of a call, the JSON of its arguments in pieces after), the
 * finish reason mapped, and usage read from the last chunk (`stream_options.include_usage`).
 */

/** The stream ended before a finish reason, broke the protocol, or sent unreadable arguments. */
export class StreamCutError extends Error {
  override readonly name = 'StreamCutError';
}

interface PendingCall {
  id: string;
  name: string;
  json: string;
}

type FinishReason = ChatCompletionChunk.Choice['finish_reason'];

/** Builds the response from chunks, forwarding text as it arrives. */
export class ChunkAccumulator {
  private model = '';
  private text = '';
  private refusal = '';
  private readonly calls = new Map<number, PendingCall>();
  private finishReason: FinishReason = null;
  private usage: Usage | undefined;

  constructor(
    private readonly names: ToolNames,
    private readonly onTextDelta: ((text: string) => void) | undefined,
  ) {}

  add(chunk: ChatCompletionChunk): void {
    if (this.model === '' && typeof chunk.model === 'string') this.model = chunk.model;
    if (chunk.usage !== undefined && chunk.usage !== null) this.usage = toUsage(chunk.usage);
    // One choice is asked for (no `n`); any other is ignored.
    const choice = chunk.choices.find((c) => c.index === 0);
    if (choice === undefined) return;
    const delta = choice.delta;
    if (typeof delta.content === 'string' && delta.content !== '') {
      this.text += delta.content;
      this.onTextDelta?.(delta.content);
    }
    if (typeof delta.refusal === 'string') this.refusal += delta.refusal;
    for (const call of delta.tool_calls ?? []) this.addCall(call);
    if (choice.finish_reason !== null && choice.finish_reason !== undefined) {
      this.finishReason = choice.finish_reason;
    }
  }

  private addCall(delta: ChatCompletionChunk.Choice.Delta.ToolCall): void {
    let call = this.calls.get(delta.index);
    if (call === undefined) {
      call = { id: '', name: '', json: '' };
      this.calls.set(delta.index, call);
    }
    // Some servers repeat the id and name on every delta of a call; the first one counts.
    if (call.id === '' && typeof delta.id === 'string') call.id = delta.id;
    if (call.name === '' && typeof delta.function?.name === 'string') {
      call.name = delta.function.name;
    }
    if (typeof delta.function?.arguments === 'string') call.json += delta.function.arguments;
  }

  /** @param fallbackModel the requested model, for a server whose chunks name none */
  finish(fallbackModel: string): ModelResponse {
    if (this.finishReason === null) {
      throw new StreamCutError('the response stream ended before a finish_reason');
    }
    const content: OutputBlock[] = [];
    // A refusal is the model's answer too: the user sees why nothing else came.
    const text = this.text + this.refusal;
    if (text !== '') content.push({ type: 'text', text });
    for (const index of [...this.calls.keys()].sort((a, b) => a - b)) {
      const call = this.calls.get(index);
      if (call === undefined) continue;
      if (call.id === '' || call.name === '') {
        throw new StreamCutError(`tool call ${index} of the stream came without an id or a name`);
      }
      const name = this.names.canonical(call.name);
      content.push({ type: 'tool_use', id: call.id, name, input: parseArguments(call.json, name) });
    }
    return {
      model: this.model === '' ? fallbackModel : this.model,
      content,
      stopReason: this.refusal === '' ? toStopReason(this.finishReason) : StopReason.Refusal,
      usage: this.usage ?? { inputTokens: 0, outputTokens: 0 },
    };
  }
}

/** A call's arguments arrive as JSON text in pieces; no text means no arguments. */
function parseArguments(json: string, name: string): JsonObject {
  if (json.trim() === '') return {};
  let value: unknown;
  try {
    value = JSON.parse(json);
  } catch (error) {
    throw new StreamCutError(`the arguments the model wrote for tool ${name} are not valid JSON`, {
      cause: error,
    });
  }
  if (!isJsonObject(value)) {
    throw new StreamCutError(
      `the arguments the model wrote for tool ${name} are JSON but not an object (${Array.isArray(value) ? 'an array' : typeof value})`,
    );
  }
  return value;
}

/**
 * `prompt_tokens` counts the cached tokens too (unlike Anthropic's `input_tokens`); the
 * cached share, and the tokens written to the cache where a server reports them, are kept
 * beside it for traces.
 */
function toUsage(usage: NonNullable<ChatCompletionChunk['usage']>): Usage {
  const details = usage.prompt_tokens_details;
  const cached = details?.cached_tokens;
  const written = details?.cache_write_tokens;
  return {
    inputTokens: usage.prompt_tokens,
    outputTokens: usage.completion_tokens,
    ...(typeof cached === 'number' ? { cacheReadInputTokens: cached } : {}),
    ...(typeof written === 'number' ? { cacheCreationInputTokens: written } : {}),
  };
}

function toStopReason(reason: FinishReason): StopReason {
  switch (reason) {
    case 'stop':
      return StopReason.EndTurn;
    case 'tool_calls':
      return StopReason.ToolUse;
    case 'length':
      return StopReason.MaxTokens;
    case 'content_filter':
      return StopReason.Refusal;
    default:
      return StopReason.Other;
  }
}
