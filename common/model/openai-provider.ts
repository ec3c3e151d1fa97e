import OpenAI, { APIConnectionTimeoutError, APIUserAbortError } from 'openai';
import type { ChatCompletionCreateParamsStreaming } from 'openai/resources/chat/completions';
import { AppError } from '../errors';
import {
  ModelApi,
  type ModelCallOptions,
  type ModelParameters,
  type ModelProvider,
  type ModelRequest,
  type ModelResponse,
} from './model-port';
import type { ProviderOptions } from './provider-options';
import { abortableSleep, callWithRetries, type RetryPolicy } from './model-retry';
import { classifyFailure, type FailureContext } from './openai-failures';
import { toChatParams } from './openai-request';
import { ChunkAccumulator } from './openai-stream';
import { ToolNames } from './tool-names';

/**
 * The model provider for OpenAI's Chat Completions API and the servers that speak it
 * (vLLM, Ollama, LiteLLM, gateways), over the official `openai` SDK. Only the `openai-*`
 * files import `openai`; this one turns our domain types into API parameters
 * (`openai-request.ts`), streams the answer (`openai-stream.ts`), and classifies every
 * failure once into an AppError (`openai-failures.ts`).
 *
 * Retries are ours, not the SDK's (`maxRetries: 0`), with the policy of the Anthropic
 * adapter (`model-retry.ts`): 429, 5xx, timeouts, connection failures and streams cut
 * short are retried with exponential backoff and jitter, honouring `retry-after`, up to
 * `maxAttempts` attempts, within the turn's signal; every other 4xx fails at once, a
 * request over the model's context window with a message that says so. A retried stream
 * starts again from its first delta, so `onTextDelta` may see the text of a failed attempt
 * before the text of the one that succeeds; only the response is authoritative.
 */

/** The model used when none is configured (set HARNESS_MODEL for any other server). */
export const DEFAULT_OPENAI_MODEL = 'gpt-5';
/** The API endpoint used when none is configured. */
export const DEFAULT_OPENAI_BASE_URL = 'https://api.openai.com/v1';

/** Construction options (provider-options.ts). */
export type OpenAiProviderOptions = ProviderOptions;

const CANCELLED = 'OpenAI model call cancelled';

/** A {@link ModelProvider} over the Chat Completions API (streaming). */
export class OpenAiProvider implements ModelProvider {
  /** The model requests name. */
  readonly model: string;
  readonly parameters: ModelParameters;
  /** For traces: `gen_ai.provider.name` and the requested model. */
  get genAi(): { readonly provider: string; readonly model: string } {
    return { provider: 'openai', model: this.model };
  }
  private readonly client: OpenAI;
  private readonly apiKey: string;
  private readonly maxTokens: number;
  private readonly attemptTimeoutMs: number;
  private readonly policy: RetryPolicy;
  private readonly failureContext: FailureContext;

  /**
   * @throws AppError `invalid_argument` when the key is empty or a number option is out of range.
   */
  constructor(options: OpenAiProviderOptions) {
    if (options.apiKey.trim() === '') {
      throw new AppError(
        'invalid_argument',
        'OpenAI provider: the API key is empty; set OPENAI_API_KEY in the harness configuration',
      );
    }
    this.apiKey = options.apiKey;
    this.model = options.model ?? DEFAULT_OPENAI_MODEL;
    this.maxTokens = positiveInt('maxTokens', options.maxTokens ?? 8192);
    this.parameters = { model: this.model, maxTokens: this.maxTokens, provider: ModelApi.OpenAi };
    this.attemptTimeoutMs = positiveInt('attemptTimeoutMs', options.attemptTimeoutMs ?? 600_000);
    this.policy = {
      maxAttempts: positiveInt('maxAttempts', options.maxAttempts ?? 4),
      initialBackoffMs: options.initialBackoffMs ?? 500,
      maxBackoffMs: options.maxBackoffMs ?? 8000,
      maxRetryAfterMs: options.maxRetryAfterMs ?? 60_000,
      sleep: options.sleep ?? abortableSleep(CANCELLED),
      random: options.random ?? Math.random,
      cancelledMessage: CANCELLED,
    };
    this.failureContext = {
      model: this.model,
      attemptTimeoutMs: this.attemptTimeoutMs,
      redact: (text) => text.replaceAll(this.apiKey, '[redacted]'),
    };
    const logger = options.logger;
    this.client = new OpenAI({
      apiKey: options.apiKey,
      // Explicit values and nulls keep the SDK from reading OPENAI_* variables (base URL,
      // organization, project, admin key, webhook secret, log level): configuration reaches
      // this adapter through its options. The one the SDK reads regardless is
      // OPENAI_CUSTOM_HEADERS (extra request headers), which the harness's pod spec does not set.
      baseURL: options.baseUrl ?? DEFAULT_OPENAI_BASE_URL,
      adminAPIKey: null,
      organization: null,
      project: null,
      webhookSecret: null,
      maxRetries: 0,
      timeout: this.attemptTimeoutMs,
      ...(logger === undefined ? { logLevel: 'off' } : { logger, logLevel: 'warn' }),
    });
  }

  /**
   * Streams one model call, retrying transient failures (see the file comment).
   *
   * @throws AppError `cancelled` when `options.signal` aborts (the HTTP stream is aborted
   *   too); `resource_exhausted`, `unavailable` or `deadline_exceeded` when transient
   *   failures outlasted the retries; `invalid_argument` (a malformed request, or one over
   *   the model's context window), `permission_denied`, `not_found`, `failed_precondition`
   *   or `internal` at once for failures a retry will not fix.
   */
  async complete(request: ModelRequest, options: ModelCallOptions): Promise<ModelResponse> {
    const names = new ToolNames(request.tools.map((tool) => tool.name));
    const params = toChatParams(request, names, this.model, this.maxTokens);
    return callWithRetries(
      this.policy,
      options.signal,
      () => this.attempt(params, names, options),
      (error, attempt) => classifyFailure(error, options.signal, attempt, this.failureContext),
    );
  }

  private async attempt(
    params: ChatCompletionCreateParamsStreaming,
    names: ToolNames,
    options: ModelCallOptions,
  ): Promise<ModelResponse> {
    // One signal for the whole attempt (connect and stream): the SDK's own timeout covers
    // only the wait for response headers.
    const timeout = AbortSignal.timeout(this.attemptTimeoutMs);
    const signal = AbortSignal.any([options.signal, timeout]);
    const accumulator = new ChunkAccumulator(names, options.onTextDelta);
    try {
      const stream = await this.client.chat.completions.create(params, { signal });
      for await (const chunk of stream) {
        // Chunks already buffered still arrive after an abort; none is forwarded.
        if (signal.aborted) break;
        accumulator.add(chunk);
      }
    } catch (error) {
      // The SDK reports our timeout as a user abort: tell the two apart here.
      if (timeout.aborted && !options.signal.aborted) throw new APIConnectionTimeoutError();
      throw error;
    }
    // The SDK may end the iteration quietly when its signal aborts; say why it ended.
    if (options.signal.aborted) throw new APIUserAbortError();
    if (timeout.aborted) throw new APIConnectionTimeoutError();
    return accumulator.finish(this.model);
  }
}

function positiveInt(name: string, value: number): number {
  if (!Number.isInteger(value) || value < 1) {
    throw new AppError(
      'invalid_argument',
      `OpenAI provider: ${name} must be a positive integer, got ${value}`,
      { details: { field: name } },
    );
  }
  return value;
}
