import type { Sleep } from './model-retry';

/**
 * What every model adapter is built with (`anthropic-provider.ts`, `openai-provider.ts`);
 * the harness config and the control plane's summary config supply it, and nothing in an
 * adapter reads the environment. Each adapter states its own default base URL and model.
 */

/** Receives an SDK's own diagnostics (a pino logger fits). */
export interface SdkLogger {
  error(message: string, ...rest: unknown[]): void;
  warn(message: string, ...rest: unknown[]): void;
  info(message: string, ...rest: unknown[]): void;
  debug(message: string, ...rest: unknown[]): void;
}

/** Construction options of a model adapter. */
export interface ProviderOptions {
  /** The API key. Never logged, never put in an error message. */
  readonly apiKey: string;
  /**
   * The API's base URL; default: the adapter's vendor endpoint. For an OpenAI-compatible
   * server, up to and including the version path, e.g. `http://vllm:8000/v1`.
   */
  readonly baseUrl?: string;
  /** The model every request names; default: the adapter's default model. */
  readonly model?: string;
  /** The most output tokens of every request. @default 8192 */
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
