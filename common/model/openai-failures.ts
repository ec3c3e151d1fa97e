import { APIConnectionError, APIConnectionTimeoutError, APIError, APIUserAbortError } from 'openai';
import { AppError, type ErrorCode } from '../errors';
import { contextOverflowAdvice, isContextOverflow } from './context-overflow';
import { retryAfter, type Classified } from './model-retry';
import { StreamCutError } from './openai-stream';

/**
 * Every failure of a Chat Completions call classified once into an AppError, and whether
 * the retry loop may try again: 429 (`resource_exhausted`, except an exhausted quota), 5xx
 * and 409 (`unavailable`), 408/504 and timeouts (`deadline_exceeded`), connection failures and
 * streams cut short (`unavailable`) are retried; every other 4xx fails at once, with advice
 * on what to fix. A request over the model's context window is recognised by OpenAI's code
 * `context_length_exceeded` or by the wording gateways and self-hosted servers use
 * (`context-overflow.ts`), and fails with a message that says so.
 */

/** What classification needs to know of the provider. */
export interface FailureContext {
  readonly model: string;
  readonly attemptTimeoutMs: number;
  /** Removes the API key from text that could echo it. */
  readonly redact: (text: string) => string;
}

const API = 'OpenAI-compatible API';

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
      error: new AppError('cancelled', 'OpenAI model call cancelled', { cause: error, details }),
      retryable: false,
    };
  }
  if (error instanceof AppError) return { error, retryable: false };
  if (error instanceof APIConnectionTimeoutError) {
    return transient(
      'deadline_exceeded',
      `${API}: no complete answer within ${context.attemptTimeoutMs} ms`,
      error,
      details,
    );
  }
  if (error instanceof StreamCutError) {
    return transient('unavailable', `${API}: ${error.message}`, error, details);
  }
  if (error instanceof APIConnectionError) {
    return transient(
      'unavailable',
      `${API} unreachable (connection failed); check the network path and the configured base URL (OPENAI_BASE_URL)`,
      error,
      details,
    );
  }
  if (isApiError(error)) return classifyApiError(error, details, context);
  return {
    error: new AppError(
      'internal',
      `OpenAI model call failed unexpectedly: ${context.redact(error instanceof Error ? error.message : String(error))}`,
      { cause: error, details },
    ),
    retryable: false,
  };
}

function transient(
  code: ErrorCode,
  message: string,
  cause: unknown,
  details: { model: string; attempt: number },
): Classified {
  return { error: new AppError(code, message, { cause, details }), retryable: true };
}

type SdkApiError = APIError<number | undefined, Headers | undefined, object | undefined>;

/** `instanceof` alone narrows to `APIError<any, ...>`; this names the parameters. */
function isApiError(value: unknown): value is SdkApiError {
  return value instanceof APIError;
}

/** The `message` of the error body, whatever shape the server gave it. */
function apiMessageOf(error: SdkApiError): string {
  const body: unknown = error.error;
  if (typeof body === 'object' && body !== null && 'message' in body) {
    const message: unknown = body.message;
    if (typeof message === 'string') return message;
  }
  return '';
}

function classifyApiError(
  error: SdkApiError,
  base: { model: string; attempt: number },
  context: FailureContext,
): Classified {
  const status = typeof error.status === 'number' ? error.status : undefined;
  const code = typeof error.code === 'string' && error.code !== '' ? error.code : undefined;
  const apiMessage = context.redact(apiMessageOf(error));
  const details = {
    ...base,
    ...(status === undefined ? {} : { status }),
    ...(code === undefined ? {} : { apiCode: code }),
    ...(typeof error.requestID === 'string' ? { requestId: error.requestID } : {}),
  };
  const what = `${API} ${status === undefined ? 'stream error' : `returned ${status}`}${code === undefined ? '' : ` ${code}`}${apiMessage === '' ? '' : `: ${apiMessage}`}`;
  const rule = ruleFor(status, code, apiMessage, context.model);
  return {
    error: new AppError(rule.code, `${what}; ${rule.advice}`, { cause: error, details }),
    retryable: rule.retryable,
    ...(rule.retryable && error.headers !== undefined ? retryAfter(error.headers, Date.now()) : {}),
  };
}

interface Rule {
  readonly code: ErrorCode;
  readonly retryable: boolean;
  readonly advice: string;
}

const RETRY_LATER = 'retried with backoff; the turn can be dispatched again later';

/** Status (or, for an error inside a stream, its code) → AppError code, retry and advice. */
function ruleFor(
  status: number | undefined,
  apiCode: string | undefined,
  message: string,
  model: string,
): Rule {
  const refusal = status === undefined || status === 400 || status === 413 || status === 422;
  if (refusal && isContextOverflow(apiCode, message)) {
    return {
      code: 'invalid_argument',
      retryable: false,
      advice: contextOverflowAdvice(model),
    };
  }
  switch (status ?? (apiCode === 'rate_limit_exceeded' ? 429 : 500)) {
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
        code: 'permission_denied',
        retryable: false,
        advice:
          'the API key was rejected; check OPENAI_API_KEY in the harness configuration and that it belongs to the server OPENAI_BASE_URL names',
      };
    case 403:
      return {
        code: 'permission_denied',
        retryable: false,
        advice:
          "the API key may not use this model or endpoint; check the key's project, organization and model permissions",
      };
    case 404:
      return {
        code: 'not_found',
        retryable: false,
        advice:
          'check the model name (spec.agent.model or HARNESS_MODEL) and the base URL (OPENAI_BASE_URL usually ends in /v1)',
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
      // OpenAI answers an exhausted quota with 429 too; waiting will not refill it.
      return apiCode === 'insufficient_quota'
        ? {
            code: 'failed_precondition',
            retryable: false,
            advice: "the account's quota is used up; check its plan and billing settings",
          }
        : { code: 'resource_exhausted', retryable: true, advice: RETRY_LATER };
    case 409:
      return { code: 'unavailable', retryable: true, advice: RETRY_LATER };
    default: {
      const key = status ?? 500;
      if (key >= 500) return { code: 'unavailable', retryable: true, advice: RETRY_LATER };
      return {
        code: 'failed_precondition',
        retryable: false,
        advice: 'the API refused the request; a retry will not help',
      };
    }
  }
}
