import Anthropic, { APIConnectionTimeoutError, APIUserAbortError } from '@anthropic-ai/sdk';
import type { MessageCreateParamsStreaming, Tool } from '@anthropic-ai/sdk/resources/messages';
import { AppError } from '../errors';
import type {
  ModelCallOptions,
  ModelParameters,
  ModelProvider,
  ModelRequest,
  ModelResponse,
} from './model-port';
import { classifyFailure, type FailureContext } from './anthropic-failures';
import type { ProviderOptions } from './provider-options';
import { abortableSleep, callWithRetries, type RetryPolicy } from './model-retry';
import { toMessageParam, toToolChoice } from './anthropic-request';
import { ToolNames } from './tool-names';
import { StreamAccumulator } from './anthropic-stream';

/**
 * The model provider for the Anthropic Messages API, over the official SDK. Only the
 * `anthropic-*` files import `@anthropic-ai/sdk`; this one turns our domain types into API
 * parameters, streams the answer, and classifies every failure once into an AppError.
 *
 * Retries are ours, not the SDK's (`maxRetries: 0` on the client): the sleep and the
 * jitter are injected so tests prove the policy without waiting, the policy covers
 * failures inside a stream (an `overloaded_error` event after a 200) exactly as failures
 * before it, and the turn's signal cuts a backoff short.
 *
 * Policy: 429 (`resource_exhausted`), 5xx and 529 (`unavailable`), 408/504 and timeouts
 * (`deadline_exceeded`), connection failures and streams cut short (`unavailable`) are
 * retried with exponential backoff and jitter, honouring `retry-after`, up to
 * `maxAttempts` attempts in all; every other 4xx fails at once. A retried stream starts
 * again from its first delta, so `onTextDelta` may see the text of a failed attempt
 * before the text of the one that succeeds; only the response is authoritative.
 *
 * Tool names are sent under an alias the API accepts (`tool-names.ts`); the retry loop is `model-retry.ts`, shared with the OpenAI adapter; the answer
 * is read from the stream by `anthropic-stream.ts`; failures are classified by
 * `anthropic-failures.ts`.
 */

/** The model used when none is configured. */
export const DEFAULT_ANTHROPIC_MODEL = 'claude-sonnet-5-5';
/** The API endpoint used when none is configured. */
export const DEFAULT_ANTHROPIC_BASE_URL = 'https://api.anthropic.com';

/** Construction options (provider-options.ts). */
export type AnthropicProviderOptions = ProviderOptions;

const CANCELLED = 'Anthropic model call cancelled';

const DEFAULTS = {
  maxTokens: 8192,
  maxAttempts: 4,
  initialBackoffMs: 500,
  maxBackoffMs: 8000,
  maxRetryAfterMs: 60_000,
  attemptTimeoutMs: 600_000,
} as const;

/** A {@link ModelProvider} over the Anthropic Messages API (streaming). */
export class AnthropicProvider implements ModelProvider {
  /** The model requests name. */
  readonly model: string;
  readonly parameters: ModelParameters;
  /** For traces: `gen_ai.provider.name` and the requested model. */
  get genAi(): { readonly provider: string; readonly model: string } {
    return { provider: 'anthropic', model: this.model };
  }
  private readonly client: Anthropic;
  private readonly apiKey: string;
  private readonly maxTokens: number;
  private readonly attemptTimeoutMs: number;
  private readonly policy: RetryPolicy;
  private readonly failureContext: FailureContext;

  /**
   * @throws AppError `invalid_argument` when the key is empty or a number option is out of range.
   */
  constructor(options: AnthropicProviderOptions) {
    if (options.apiKey.trim() === '') {
      throw new AppError(
        'invalid_argument',
        'Anthropic provider: the API key is empty; set it in the harness configuration',
      );
    }
    this.apiKey = options.apiKey;
    this.model = options.model ?? DEFAULT_ANTHROPIC_MODEL;
    this.maxTokens = positiveInt('maxTokens', options.maxTokens ?? DEFAULTS.maxTokens);
    this.parameters = { model: this.model, maxTokens: this.maxTokens };
    this.policy = {
      maxAttempts: positiveInt('maxAttempts', options.maxAttempts ?? DEFAULTS.maxAttempts),
      initialBackoffMs: options.initialBackoffMs ?? DEFAULTS.initialBackoffMs,
      maxBackoffMs: options.maxBackoffMs ?? DEFAULTS.maxBackoffMs,
      maxRetryAfterMs: options.maxRetryAfterMs ?? DEFAULTS.maxRetryAfterMs,
      sleep: options.sleep ?? abortableSleep(CANCELLED),
      random: options.random ?? Math.random,
      cancelledMessage: CANCELLED,
    };
    this.attemptTimeoutMs = positiveInt(
      'attemptTimeoutMs',
      options.attemptTimeoutMs ?? DEFAULTS.attemptTimeoutMs,
    );
    this.failureContext = {
      model: this.model,
      attemptTimeoutMs: this.attemptTimeoutMs,
      redact: (text) => this.redact(text),
    };
    const logger = options.logger;
    this.client = new Anthropic({
      apiKey: options.apiKey,
      // Explicit nulls and `false` keep the SDK from reading ANTHROPIC_* variables or
      // profile files: configuration reaches this adapter only through its options.
      authToken: null,
      webhookKey: null,
      baseURL: options.baseUrl ?? DEFAULT_ANTHROPIC_BASE_URL,
      maxRetries: 0,
      timeout: this.attemptTimeoutMs,
      openTelemetry: false,
      ...(logger === undefined ? { logLevel: 'off' } : { logger, logLevel: 'warn' }),
    });
  }

  /**
   * Streams one model call, retrying transient failures (see the file comment).
   *
   * @throws AppError `cancelled` when `options.signal` aborts (the HTTP stream is aborted
   *   too); `resource_exhausted`, `unavailable` or `deadline_exceeded` when transient
   *   failures outlasted the retries; `invalid_argument`, `unauthenticated`,
   *   `permission_denied`, `not_found`, `failed_precondition` or `internal` at once for
   *   failures a retry will not fix.
   */
  async complete(request: ModelRequest, options: ModelCallOptions): Promise<ModelResponse> {
    const names = new ToolNames(request.tools.map((tool) => tool.name));
    const params = this.toParams(request, names);
    return callWithRetries(
      this.policy,
      options.signal,
      () => this.attempt(params, names, options),
      (error, attempt) => classifyFailure(error, options.signal, attempt, this.failureContext),
    );
  }

  private async attempt(
    params: MessageCreateParamsStreaming,
    names: ToolNames,
    options: ModelCallOptions,
  ): Promise<ModelResponse> {
    // One signal for the whole attempt (connect and stream): the SDK's own timeout covers
    // only the wait for response headers.
    const timeout = AbortSignal.timeout(this.attemptTimeoutMs);
    const signal = AbortSignal.any([options.signal, timeout]);
    const accumulator = new StreamAccumulator(names, options.onTextDelta);
    try {
      const stream = await this.client.messages.create(params, { signal });
      for await (const event of stream) accumulator.add(event);
    } catch (error) {
      // The SDK reports our timeout as a user abort: tell the two apart here.
      if (timeout.aborted && !options.signal.aborted) throw new APIConnectionTimeoutError();
      throw error;
    }
    // The SDK ends the iteration quietly when its signal aborts; say why it ended.
    if (options.signal.aborted) throw new APIUserAbortError();
    if (timeout.aborted) throw new APIConnectionTimeoutError();
    return accumulator.finish();
  }

  private toParams(request: ModelRequest, names: ToolNames): MessageCreateParamsStreaming {
    const tools: Tool[] = request.tools.map((tool) => ({
      name: names.api(tool.name),
      description: tool.description,
      input_schema: { ...tool.inputSchema, type: 'object' },
    }));
    return {
      model: this.model,
      max_tokens: this.maxTokens,
      stream: true,
      ...(request.system === undefined || request.system === '' ? {} : { system: request.system }),
      messages: request.messages.map((message) => toMessageParam(message, names)),
      // The API refuses tool_choice without tools; an empty list means no tools at all.
      ...(tools.length === 0 ? {} : { tools, tool_choice: toToolChoice(request.toolChoice) }),
    };
  }

  /** Belt and braces: a proxy could echo the key back in an error body. */
  private redact(text: string): string {
    return text.replaceAll(this.apiKey, '[redacted]');
  }
}

function positiveInt(name: string, value: number): number {
  if (!Number.isInteger(value) || value < 1) {
    throw new AppError(
      'invalid_argument',
      `Anthropic provider: ${name} must be a positive integer, got ${value}`,
      { details: { field: name } },
    );
  }
  return value;
}
