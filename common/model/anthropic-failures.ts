import {
  APIConnectionError,
  APIConnectionTimeoutError,
  APIError,
  APIUserAbortError,
} from '@anthropic-ai/sdk';
import { AppError, type ErrorCode } from '../errors';
import { StreamCutError } from './anthropic-stream';
import { contextOverflowAdvice, isContextOverflow } from './context-overflow';
import { retryAfter, type Classified } from './model-retry';

/**
 * Every failure of an Anthropic model call classified once into an AppError, and whether
 * the retry loop may try again: 429 (`resource_exhausted`), 5xx and 529 (`unavailable`),
 * 408/504 and timeouts (`deadline_exceeded`), connection failures and streams cut short
 * (`unavailable`) are retried; every other 4xx fails at once, with advice on what to fix,
 * and a prompt over the model's context window says so (`context-overflow.ts`).
 */

/** What classification needs to know of the provider. */
export interface FailureContext {
  readonly model: string;
  readonly attemptTimeoutMs: number;
  /** Removes the API key from text that could echo it. */
  readonly redact: (text: string) => string;
}

/**
 * Classifies a failed attempt once: the AppError the turn sees, whether the retry loop
 * tries again, and how long the API asked it to wait.
 */
export function classifyFailure(
  error: unknown,
  signal: AbortSignal,
  attempt: number,
  context: FailureContext,
): Classified {
  const details = { model: context.model, attempt };
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
        `Anthropic Messages API: no complete answer within ${context.attemptTimeoutMs} ms`,
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
  if (isApiError(error)) return classifyApiError(error, details, context);
  return {
    error: new AppError(
      'internal',
      `Anthropic model call failed unexpectedly: ${context.redact(error instanceof Error ? error.message : String(error))}`,
      { cause: error, details },
    ),
    retryable: false,
  };
}

function classifyApiError(
  error: APIError,
  base: { model: string; attempt: number },
  context: FailureContext,
): Classified {
  const status = typeof error.status === 'number' ? error.status : undefined;
  const type = error.type ?? undefined;
  const apiMessage = context.redact(error.apiMessage ?? '');
  const details = {
    ...base,
    ...(status === undefined ? {} : { status }),
    ...(type === undefined ? {} : { type }),
    ...(typeof error.requestID === 'string' ? { requestId: error.requestID } : {}),
  };
  const what = `Anthropic Messages API ${status === undefined ? 'stream error' : `returned ${status}`}${type === undefined ? '' : ` ${type}`}${apiMessage === '' ? '' : `: ${apiMessage}`}`;
  const rule =
    (status === 400 || status === 413 || type === 'invalid_request_error') &&
    isContextOverflow(undefined, apiMessage)
      ? {
          code: 'invalid_argument' as const,
          retryable: false,
          advice: contextOverflowAdvice(context.model),
        }
      : ruleFor(status, type);
  return {
    error: new AppError(rule.code, `${what}; ${rule.advice}`, { cause: error, details }),
    retryable: rule.retryable,
    ...(rule.retryable && error.headers !== undefined ? retryAfter(error.headers, Date.now()) : {}),
  };
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
