import { AppError } from '../errors';

/**
 * The retry loop of a model adapter: one call made up to `maxAttempts` times, each failure
 * classified by the adapter (AppError, retryable or not, and how long the API asked to
 * wait), exponential backoff with "equal jitter" between attempts, `retry-after` honoured
 * up to a limit, and the turn's signal cutting a backoff short. The sleep and the jitter
 * are injected so tests prove the policy without waiting.
 */

/** Waits `ms`, rejecting when `signal` aborts. Injected so tests do not wait. */
export type Sleep = (ms: number, signal: AbortSignal) => Promise<void>;

/** A failure classified for the retry loop. */
export interface Classified {
  readonly error: AppError;
  readonly retryable: boolean;
  /** What the API asked us to wait, when it said. */
  readonly retryAfterMs?: number;
}

/** How a call is retried. */
export interface RetryPolicy {
  /** Attempts per call, the first included. */
  readonly maxAttempts: number;
  /** Backoff before the first retry; doubles each retry. */
  readonly initialBackoffMs: number;
  /** Ceiling of one backoff. */
  readonly maxBackoffMs: number;
  /** The longest `retry-after` honoured; a longer one ends the retries at once. */
  readonly maxRetryAfterMs: number;
  readonly sleep: Sleep;
  /** Jitter source in [0, 1). */
  readonly random: () => number;
  /** The message of the `cancelled` AppError, e.g. `OpenAI model call cancelled`. */
  readonly cancelledMessage: string;
}

/**
 * Runs `attempt` until it succeeds, a failure is not retryable, the attempts run out or
 * `signal` aborts. The error thrown when giving up says so and how many attempts were made.
 *
 * @throws AppError: the classified error of the last attempt, or `cancelled`.
 */
export async function callWithRetries<T>(
  policy: RetryPolicy,
  signal: AbortSignal,
  attempt: (attempt: number) => Promise<T>,
  classify: (error: unknown, attempt: number) => Classified,
): Promise<T> {
  for (let n = 1; ; n++) {
    if (signal.aborted) throw new AppError('cancelled', policy.cancelledMessage);
    let classified: Classified;
    try {
      return await attempt(n);
    } catch (error) {
      classified = classify(error, n);
    }
    const { error, retryable, retryAfterMs } = classified;
    if (!retryable) throw error;
    if (n >= policy.maxAttempts) throw withAttempts(error, n, 'giving up after');
    if (retryAfterMs !== undefined && retryAfterMs > policy.maxRetryAfterMs) {
      throw withAttempts(
        error,
        n,
        `the API asked to wait ${Math.ceil(retryAfterMs / 1000)} s, longer than this turn waits; stopped after`,
      );
    }
    try {
      await policy.sleep(retryAfterMs ?? backoffMs(policy, n), signal);
    } catch {
      if (signal.aborted) throw new AppError('cancelled', policy.cancelledMessage);
      throw error;
    }
  }
}

/** Exponential backoff with "equal jitter": half fixed, half random. */
export function backoffMs(policy: RetryPolicy, attempt: number): number {
  const base = Math.min(policy.maxBackoffMs, policy.initialBackoffMs * 2 ** (attempt - 1));
  return Math.round(base / 2 + (base / 2) * policy.random());
}

function withAttempts(error: AppError, attempts: number, how: string): AppError {
  return new AppError(error.code, `${error.message} (${how} ${attempts} attempts)`, {
    cause: error.cause,
    details: { ...error.details, attempts },
  });
}

/** `retry-after-ms` (milliseconds) or `retry-after` (seconds or an HTTP date). */
export function retryAfter(headers: Headers, nowMs: number): { retryAfterMs?: number } {
  const ms = Number.parseFloat(headers.get('retry-after-ms') ?? '');
  if (Number.isFinite(ms) && ms >= 0) return { retryAfterMs: ms };
  const value = headers.get('retry-after');
  if (value === null) return {};
  const seconds = Number.parseFloat(value);
  if (Number.isFinite(seconds)) return seconds >= 0 ? { retryAfterMs: seconds * 1000 } : {};
  const date = Date.parse(value);
  return Number.isFinite(date) ? { retryAfterMs: Math.max(0, date - nowMs) } : {};
}

/** A {@link Sleep} on a timer; rejects with `cancelled` (`message`) when the signal aborts. */
export function abortableSleep(message: string): Sleep {
  return (ms, signal) =>
    new Promise((resolve, reject) => {
      if (signal.aborted) {
        reject(new AppError('cancelled', message));
        return;
      }
      const onAbort = (): void => {
        clearTimeout(timer);
        reject(new AppError('cancelled', message));
      };
      const timer = setTimeout(() => {
        signal.removeEventListener('abort', onAbort);
        resolve();
      }, ms);
      signal.addEventListener('abort', onAbort, { once: true });
    });
}
