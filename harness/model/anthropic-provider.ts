import { createHash } from 'node:crypto';
import Anthropic, {
  APIConnectionError,
  APIConnectionTimeoutError,
  APIError,
  APIUserAbortError,
} from '@anthropic-ai/sdk';
import type {
  ContentBlockParam,
  MessageCreateParamsStreaming,
  MessageParam,
  RawMessageStreamEvent,
  StopReason as ApiStopReason,
  Tool,
} from '@anthropic-ai/sdk/resources/messages';
import { isJsonObject, type JsonObject } from '../../common/canonical-json';
import { AppError, type ErrorCode } from '../../common/errors';
import {
  StopReason,
  type Message,
  type ModelCallOptions,
  type ModelParameters,
  type ModelProvider,
  type ModelRequest,
  type ModelResponse,
  type OutputBlock,
  type ToolChoice,
} from '../turn/ports/model-port';

/**
 * The model provider for the Anthropic Messages API, over the official SDK. This file is
 * the only one that imports `@anthropic-ai/sdk`; it turns our domain types into API
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
 * Tool names: the API accepts `^[a-zA-Z0-9_-]{1,64}$`, but our canonical names include
 * MCP tools as `<server>/<tool>` (and MCP tool names may contain `.`). Such names are
 * sent under a deterministic alias (see {@link apiToolName}) and mapped back on the way
 * in, so nothing outside this adapter sees an alias.
 */

/** The model used when none is configured. */
export const DEFAULT_ANTHROPIC_MODEL = 'claude-sonnet-5-5';
/** The API endpoint used when none is configured. */
export const DEFAULT_ANTHROPIC_BASE_URL = 'https://api.anthropic.com';

/** Waits `ms`, rejecting when `signal` aborts. Injected so tests do not wait. */
export type Sleep = (ms: number, signal: AbortSignal) => Promise<void>;

/** Receives the SDK's own diagnostics (a pino logger fits). */
export interface SdkLogger {
  error(message: string, ...rest: unknown[]): void;
  warn(message: string, ...rest: unknown[]): void;
  info(message: string, ...rest: unknown[]): void;
  debug(message: string, ...rest: unknown[]): void;
}

/** Construction options; the harness config supplies them (nothing here reads the environment). */
export interface AnthropicProviderOptions {
  /** The API key. Never logged, never put in an error message. */
  readonly apiKey: string;
  /** @default {@link DEFAULT_ANTHROPIC_BASE_URL} */
  readonly baseUrl?: string;
  /** @default {@link DEFAULT_ANTHROPIC_MODEL} */
  readonly model?: string;
  /** The `max_tokens` of every request. @default 8192 */
  readonly maxTokens?: number;
  /** Attempts per call, the first included. @default 4 */
  readonly maxAttempts?: number;
  /** Backoff before the first retry; doubles each retry. @default 500 */
  readonly initialBackoffMs?: number;
  /** Ceiling of one backoff. @default 8000 */
  readonly maxBackoffMs?: number;
  /**
   * The longest `retry-after` honoured; a longer one ends the retries at once (waiting
   * would outlast the turn) and the error says how long the API asked to wait.
   * @default 60000
   */
  readonly maxRetryAfterMs?: number;
  /** How long one attempt (connect plus the whole stream) may take. @default 600000 */
  readonly attemptTimeoutMs?: number;
  /** @default a timer that rejects when the signal aborts */
  readonly sleep?: Sleep;
  /** Jitter source in [0, 1). @default Math.random */
  readonly random?: () => number;
  /** Where the SDK's warnings go (for example deprecated-model notices). @default none */
  readonly logger?: SdkLogger;
}

/** A failure classified for the retry loop. */
interface Classified {
  readonly error: AppError;
  readonly retryable: boolean;
  /** What the API asked us to wait, when it said. */
  readonly retryAfterMs?: number;
}

const DEFAULTS = {
  maxTokens: 8192,
  maxAttempts: 4,
  initialBackoffMs: 500,
  maxBackoffMs: 8000,
  maxRetryAfterMs: 60_000,
  attemptTimeoutMs: 600_000,
} as const;

const API_TOOL_NAME = /^[a-zA-Z0-9_-]{1,64}$/u;

/**
 * The name a tool is sent under: the canonical name when the API accepts it; otherwise
 * `/` becomes `__`, any other character outside `[a-zA-Z0-9_-]` becomes `_`, and a name
 * that is then too long gets a hash suffix. Deterministic, so a tool keeps its alias
 * across the requests of a conversation and history blocks map the same way.
 */
export function apiToolName(name: string): string {
  if (API_TOOL_NAME.test(name)) return name;
  const safe = name.replaceAll('/', '__').replace(/[^a-zA-Z0-9_-]/gu, '_');
  if (safe.length >= 1 && safe.length <= 64) return safe;
  return `${safe.slice(0, 55)}_${createHash('sha256').update(name).digest('hex').slice(0, 8)}`;
}

/** Canonical name ↔ alias for one request; collisions fall back to a hashed alias. */
class ToolNames {
  private readonly toApi = new Map<string, string>();
  private readonly fromApi = new Map<string, string>();

  constructor(canonicalNames: readonly string[]) {
    for (const name of canonicalNames) {
      let alias = apiToolName(name);
      if (this.fromApi.has(alias) && this.fromApi.get(alias) !== name) {
        alias = `${alias.slice(0, 55)}_${createHash('sha256').update(name).digest('hex').slice(0, 8)}`;
      }
      this.toApi.set(name, alias);
      this.fromApi.set(alias, name);
    }
  }

  api(name: string): string {
    return this.toApi.get(name) ?? apiToolName(name);
  }

  canonical(alias: string): string {
    return this.fromApi.get(alias) ?? alias;
  }
}

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
  private readonly maxAttempts: number;
  private readonly initialBackoffMs: number;
  private readonly maxBackoffMs: number;
  private readonly maxRetryAfterMs: number;
  private readonly attemptTimeoutMs: number;
  private readonly sleep: Sleep;
  private readonly random: () => number;

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
    this.maxAttempts = positiveInt('maxAttempts', options.maxAttempts ?? DEFAULTS.maxAttempts);
    this.initialBackoffMs = options.initialBackoffMs ?? DEFAULTS.initialBackoffMs;
    this.maxBackoffMs = options.maxBackoffMs ?? DEFAULTS.maxBackoffMs;
    this.maxRetryAfterMs = options.maxRetryAfterMs ?? DEFAULTS.maxRetryAfterMs;
    this.attemptTimeoutMs = positiveInt(
      'attemptTimeoutMs',
      options.attemptTimeoutMs ?? DEFAULTS.attemptTimeoutMs,
    );
    this.sleep = options.sleep ?? abortableSleep;
    this.random = options.random ?? Math.random;
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
    for (let attempt = 1; ; attempt++) {
      throwIfCancelled(options.signal);
      let classified: Classified;
      try {
        return await this.attempt(params, names, options);
      } catch (error) {
        classified = this.classify(error, options.signal, attempt);
      }
      const { error, retryable, retryAfterMs } = classified;
      if (!retryable) throw error;
      if (attempt >= this.maxAttempts) {
        throw this.withAttempts(error, attempt, 'giving up after');
      }
      if (retryAfterMs !== undefined && retryAfterMs > this.maxRetryAfterMs) {
        throw this.withAttempts(
          error,
          attempt,
          `the API asked to wait ${Math.ceil(retryAfterMs / 1000)} s, longer than this turn waits; stopped after`,
        );
      }
      const delayMs = retryAfterMs ?? this.backoffMs(attempt);
      try {
        await this.sleep(delayMs, options.signal);
      } catch {
        throwIfCancelled(options.signal);
        throw error;
      }
    }
  }

  /** Exponential backoff with "equal jitter": half fixed, half random. */
  private backoffMs(attempt: number): number {
    const base = Math.min(this.maxBackoffMs, this.initialBackoffMs * 2 ** (attempt - 1));
    return Math.round(base / 2 + (base / 2) * this.random());
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

  private classify(error: unknown, signal: AbortSignal, attempt: number): Classified {
    const details = { model: this.model, attempt };
    if (signal.aborted || error instanceof APIUserAbortError) {
      return {
        error: new AppError('cancelled', 'Anthropic model call cancelled', {
          cause: error,
          details,
        }),
        retryable: false,
      };
    }
    if (error instanceof AppError) return { error, retryable: false };
    if (error instanceof APIConnectionTimeoutError) {
      return {
        error: new AppError(
          'deadline_exceeded',
          `Anthropic Messages API: no complete answer within ${this.attemptTimeoutMs} ms`,
          { cause: error, details },
        ),
        retryable: true,
      };
    }
    if (error instanceof StreamCutError) {
      return {
        error: new AppError('unavailable', `Anthropic Messages API: ${error.message}`, {
          cause: error,
          details,
        }),
        retryable: true,
      };
    }
    if (error instanceof APIConnectionError) {
      return {
        error: new AppError(
          'unavailable',
          'Anthropic Messages API unreachable (connection failed); check the network path and the configured base URL',
          { cause: error, details },
        ),
        retryable: true,
      };
    }
    if (isApiError(error)) return this.classifyApiError(error, details);
    return {
      error: new AppError(
        'internal',
        `Anthropic model call failed unexpectedly: ${this.redact(error instanceof Error ? error.message : String(error))}`,
        { cause: error, details },
      ),
      retryable: false,
    };
  }

  private classifyApiError(error: APIError, base: { model: string; attempt: number }): Classified {
    const status = typeof error.status === 'number' ? error.status : undefined;
    const type = error.type ?? undefined;
    const apiMessage = this.redact(error.apiMessage ?? '');
    const details = {
      ...base,
      ...(status === undefined ? {} : { status }),
      ...(type === undefined ? {} : { type }),
      ...(typeof error.requestID === 'string' ? { requestId: error.requestID } : {}),
    };
    const what = `Anthropic Messages API ${status === undefined ? 'stream error' : `returned ${status}`}${type === undefined ? '' : ` ${type}`}${apiMessage === '' ? '' : `: ${apiMessage}`}`;
    const rule = ruleFor(status, type);
    return {
      error: new AppError(rule.code, `${what}; ${rule.advice}`, { cause: error, details }),
      retryable: rule.retryable,
      ...(rule.retryable && error.headers !== undefined
        ? retryAfter(error.headers, Date.now())
        : {}),
    };
  }

  private withAttempts(error: AppError, attempts: number, how: string): AppError {
    return new AppError(error.code, `${error.message} (${how} ${attempts} attempts)`, {
      cause: error.cause,
      details: { ...error.details, attempts },
    });
  }

  /** Belt and braces: a proxy could echo the key back in an error body. */
  private redact(text: string): string {
    return text.replaceAll(this.apiKey, '[redacted]');
  }
}

type SdkApiError = APIError<number | undefined, Headers | undefined, object | undefined>;

/** `instanceof` alone narrows to `APIError<any, ...>`; this names the parameters. */
function isApiError(value: unknown): value is SdkApiError {
  return value instanceof APIError;
}

interface Rule {
  readonly code: ErrorCode;
  readonly retryable: boolean;
  readonly advice: string;
}

const RETRY_LATER = 'retried with backoff; the turn can be dispatched again later';

/** Status (or, for an error inside a stream, the error type) → code, retry and advice. */
function ruleFor(status: number | undefined, type: string | undefined): Rule {
  const key = status ?? STREAM_ERROR_STATUS[type ?? ''] ?? 500;
  switch (key) {
    case 400:
    case 413:
    case 422:
      return {
        code: 'invalid_argument',
        retryable: false,
        advice:
          'the request is malformed or too large; a retry will not help (check the transcript, tools and model settings)',
      };
    case 401:
      return {
        code: 'unauthenticated',
        retryable: false,
        advice: 'the API key was rejected; check the key in the harness configuration',
      };
    case 403:
      return {
        code: 'permission_denied',
        retryable: false,
        advice:
          'the API key may not use this model or feature; check its workspace and permissions',
      };
    case 404:
      return {
        code: 'not_found',
        retryable: false,
        advice: 'check the model name (spec.agent.model) and the base URL',
      };
    case 402:
      return {
        code: 'failed_precondition',
        retryable: false,
        advice: 'the account cannot be billed; check its credit and billing settings',
      };
    case 408:
    case 504:
      return { code: 'deadline_exceeded', retryable: true, advice: RETRY_LATER };
    case 429:
      return { code: 'resource_exhausted', retryable: true, advice: RETRY_LATER };
    default:
      if (key >= 500) return { code: 'unavailable', retryable: true, advice: RETRY_LATER };
      return {
        code: 'failed_precondition',
        retryable: false,
        advice: 'the API refused the request; a retry will not help',
      };
  }
}

/** An `error` event inside a 200 stream carries only a type; read it as the status it stands for. */
const STREAM_ERROR_STATUS: Readonly<Record<string, number>> = {
  invalid_request_error: 400,
  authentication_error: 401,
  billing_error: 402,
  permission_error: 403,
  not_found_error: 404,
  request_too_large: 413,
  rate_limit_error: 429,
  api_error: 500,
  timeout_error: 504,
  overloaded_error: 529,
};

/** `retry-after-ms` (milliseconds) or `retry-after` (seconds or an HTTP date). */
function retryAfter(headers: Headers, nowMs: number): { retryAfterMs?: number } {
  const ms = Number.parseFloat(headers.get('retry-after-ms') ?? '');
  if (Number.isFinite(ms) && ms >= 0) return { retryAfterMs: ms };
  const value = headers.get('retry-after');
  if (value === null) return {};
  const seconds = Number.parseFloat(value);
  if (Number.isFinite(seconds)) return seconds >= 0 ? { retryAfterMs: seconds * 1000 } : {};
  const date = Date.parse(value);
  return Number.isFinite(date) ? { retryAfterMs: Math.max(0, date - nowMs) } : {};
}

/** The stream ended before `message_stop`, or broke the protocol. */
class StreamCutError extends Error {
  override readonly name = 'StreamCutError';
}

type Pending =
  | { readonly type: 'text'; text: string }
  | { readonly type: 'tool_use'; readonly id: string; readonly name: string; json: string }
  | { readonly type: 'other' };

/** Builds the response from raw stream events, forwarding text as it arrives. */
class StreamAccumulator {
  private model = '';
  private readonly blocks = new Map<number, Pending>();
  private stopReason: ApiStopReason | null = null;
  private inputTokens = 0;
  private outputTokens = 0;
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
        this.model = event.message.model;
        this.inputTokens = event.message.usage.input_tokens;
        this.outputTokens = event.message.usage.output_tokens;
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
      model: this.model,
      content,
      stopReason: toStopReason(this.stopReason),
      usage: { inputTokens: this.inputTokens, outputTokens: this.outputTokens },
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

function toToolChoice(choice: ToolChoice): { type: 'auto' } | { type: 'none' } {
  return choice === 'none' ? { type: 'none' } : { type: 'auto' };
}

function toMessageParam(message: Message, names: ToolNames): MessageParam {
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

function throwIfCancelled(signal: AbortSignal): void {
  if (signal.aborted) throw new AppError('cancelled', 'Anthropic model call cancelled');
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

const abortableSleep: Sleep = (ms, signal) =>
  new Promise((resolve, reject) => {
    if (signal.aborted) {
      reject(new AppError('cancelled', 'Anthropic model call cancelled'));
      return;
    }
    const onAbort = (): void => {
      clearTimeout(timer);
      reject(new AppError('cancelled', 'Anthropic model call cancelled'));
    };
    const timer = setTimeout(() => {
      signal.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal.addEventListener('abort', onAbort, { once: true });
  });
