import type { JsonObject } from '../canonical-json';

/**
 * The model port: the narrow interface the harness's turn loop and the control plane's
 * summarizer use to talk to a model, and the domain types it speaks. The Anthropic adapter
 * (`anthropic-provider.ts`, beside this file), the OpenAI-compatible one
 * (`openai-provider.ts`) and the harness's scripted provider implement it, and nothing
 * outside an adapter sees a vendor SDK type.
 */

/** Who wrote a message. Tool results travel in user messages, as in the Messages API. */
export const Role = {
  User: 'user',
  Assistant: 'assistant',
} as const;
export type Role = (typeof Role)[keyof typeof Role];

/** Plain text. */
export interface TextBlock {
  readonly type: 'text';
  readonly text: string;
}

/** The model asks for a tool call. `id` is the tool call id the rest of the system uses. */
export interface ToolUseBlock {
  readonly type: 'tool_use';
  readonly id: string;
  readonly name: string;
  readonly input: JsonObject;
}

/** The result of one tool call, given back to the model. */
export interface ToolResultBlock {
  readonly type: 'tool_result';
  readonly toolUseId: string;
  readonly content: string;
  readonly isError: boolean;
}

/** A block in a message. */
export type ContentBlock = TextBlock | ToolUseBlock | ToolResultBlock;

/** A block a model may produce. */
export type OutputBlock = TextBlock | ToolUseBlock;

/** One message of the conversation sent to the model. */
export interface Message {
  readonly role: Role;
  readonly content: readonly ContentBlock[];
}

/** A tool offered to the model. */
export interface ToolDefinition {
  readonly name: string;
  readonly description: string;
  /** JSON Schema of the arguments object (`type: "object"`). */
  readonly inputSchema: JsonObject;
}

/**
 * Whether the model may call tools on this request. `none` is used for the closing call
 * made when the step budget is spent: the tools stay declared (APIs such as Anthropic's
 * refuse tool blocks in history without tool definitions) but must not be called.
 */
export const ToolChoice = {
  Auto: 'auto',
  None: 'none',
} as const;
export type ToolChoice = (typeof ToolChoice)[keyof typeof ToolChoice];

/** Why the model stopped. Adapters map vendor reasons onto these; unknown ones become `other`. */
export const StopReason = {
  EndTurn: 'end_turn',
  ToolUse: 'tool_use',
  MaxTokens: 'max_tokens',
  StopSequence: 'stop_sequence',
  Refusal: 'refusal',
  Other: 'other',
} as const;
export type StopReason = (typeof StopReason)[keyof typeof StopReason];

/** Token counts of one model call. */
export interface Usage {
  readonly inputTokens: number;
  readonly outputTokens: number;
  /** Input tokens read from the provider's prompt cache, when it reports them (traces only). */
  readonly cacheReadInputTokens?: number;
  /** Input tokens written to the provider's prompt cache, when it reports them (traces only). */
  readonly cacheCreationInputTokens?: number;
}

/** The wire protocols a provider speaks (docs/replay.md maps a request onto each). */
export const ModelApi = {
  /** Anthropic's Messages API. */
  Anthropic: 'anthropic',
  /** OpenAI's Chat Completions API, and the servers that speak it. */
  OpenAi: 'openai',
} as const;
export type ModelApi = (typeof ModelApi)[keyof typeof ModelApi];

/** The model parameters a provider sends with every request (recorded in `agent_config`). */
export interface ModelParameters {
  /** The model id as the vendor names it. */
  readonly model: string;
  readonly maxTokens: number;
  /**
   * The protocol the request is sent in; absent means Anthropic's, so configurations
   * recorded before there was a choice keep their bytes and digests.
   */
  readonly provider?: ModelApi;
}

/** One request to the model. */
export interface ModelRequest {
  readonly system?: string;
  readonly messages: readonly Message[];
  readonly tools: readonly ToolDefinition[];
  readonly toolChoice: ToolChoice;
}

/** The settled answer to one request. */
export interface ModelResponse {
  /** The provider's id of this answer (Anthropic's message id), when it gives one (traces only). */
  readonly id?: string;
  /** The model that answered, as the vendor names it (recorded in `model_call`). */
  readonly model: string;
  readonly content: readonly OutputBlock[];
  readonly stopReason: StopReason;
  readonly usage: Usage;
}

/** Options of one model call. */
export interface ModelCallOptions {
  /** Aborting cancels the stream; the call then rejects with an AppError `cancelled`. */
  readonly signal: AbortSignal;
  /**
   * Called with each text fragment as it streams. Fragments are not committed; the
   * settled text arrives in the response. Must not throw.
   */
  readonly onTextDelta?: (text: string) => void;
  /**
   * The turn's model round trip this call is (1, 2, ...), when a turn makes it: a relayed
   * provider names it on the wire (harness.v1 `ModelRequest.step`). Adapters ignore it.
   */
  readonly step?: number;
  /** The delegation thread making the call (docs/turns.md, "Delegation"); absent at the top. */
  readonly thread?: string;
}

/**
 * A model the turn loop can call.
 *
 * Retries belong to the adapter: it retries what it classifies as transient (for
 * Anthropic, 429 and 5xx, with backoff and within the signal's lifetime) and rejects only
 * when it gives up. The turn loop never retries a model call; a rejection fails the turn.
 *
 * @throws AppError from `complete`: `cancelled` when the signal aborted; `unavailable`,
 *   `resource_exhausted` or `deadline_exceeded` when transient failures outlasted the
 *   adapter's retries (the control plane may re-dispatch the turn later);
 *   `invalid_argument`, `permission_denied`, `failed_precondition` or `internal` for
 *   failures that retrying will not fix.
 */
export interface ModelProvider {
  /**
   * What the adapter sends with every request besides the request itself. A turn is
   * recorded for replay (docs/replay.md) only when its provider states them.
   */
  readonly parameters?: ModelParameters;
  complete(request: ModelRequest, options: ModelCallOptions): Promise<ModelResponse>;
  /**
   * For traces (GenAI conventions): the provider's name (`anthropic`, `openai`) and the model it
   * requests when the turn names none.
   */
  readonly genAi?: { readonly provider: string; readonly model: string };
}
