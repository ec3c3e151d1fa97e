import { AppError, isErrorCode, type ErrorCode, type ErrorDetails } from '../common/errors';
import { forbiddenHint } from './kube-transport';
import type { Transport } from './transport';

/*
 * The API's errors as the CLI sees them: an error answer (the public API's `{error}` body,
 * a Kubernetes `Status`, or neither) becomes an ApiCallError with the API's own code and
 * message; no answer at all is an ApiUnreachableError.
 */

/**
 * An error answer of the API (`{error: {code, message, details?}}`), or an answer that
 * did not have that shape (then the code follows the HTTP status).
 */
export class ApiCallError extends AppError {
  override readonly name: string = 'ApiCallError';
  /** The HTTP status; 0 for an `event: error` inside a stream that had answered 200. */
  readonly status: number;
  /** The `X-Request-Id` of the answer, to quote in a report. */
  readonly requestId: string | undefined;

  constructor(
    code: ErrorCode,
    message: string,
    options: { status: number; requestId?: string; details?: ErrorDetails },
  ) {
    super(code, message, options.details === undefined ? {} : { details: options.details });
    this.status = options.status;
    this.requestId = options.requestId;
  }
}

/** The API could not be reached at all (refused, no route, DNS, reset before an answer). */
export class ApiUnreachableError extends AppError {
  override readonly name: string = 'ApiUnreachableError';
  constructor(transport: Pick<Transport, 'description' | 'unreachableHint'>, cause: unknown) {
    super(
      'unavailable',
      `cannot reach ${transport.description}: ${describeFetchFailure(cause)}; ${transport.unreachableHint}`,
      { cause },
    );
  }
}

/**
 * Why fetch failed, from undici's `TypeError('fetch failed', {cause})` chain: the deepest
 * system error's code and message (`ECONNREFUSED (connect ECONNREFUSED 127.0.0.1:8080)`).
 * Read by shape, not `instanceof`: the error may come from another realm.
 */
function describeFetchFailure(error: unknown): string {
  let current: unknown = error;
  let message = 'unknown error';
  for (let depth = 0; depth < 5 && typeof current === 'object' && current !== null; depth++) {
    const text: unknown = Reflect.get(current, 'message');
    const code: unknown = Reflect.get(current, 'code');
    if (typeof text === 'string' && text !== '') {
      message = typeof code === 'string' ? `${code} (${text})` : text;
    } else if (typeof code === 'string') {
      message = code;
    }
    const errors: unknown = Reflect.get(current, 'errors');
    current =
      Array.isArray(errors) && errors.length > 0 ? errors[0] : Reflect.get(current, 'cause');
  }
  return message;
}

/**
 * The two error bodies the CLI reads, built once on the first error: zod is loaded only
 * when an answer has to be read as one, not by every command (bench/cli-start.bench.ts).
 */
async function buildSchemas() {
  const { z } = await import('zod');
  return {
    errorBody: z.object({
      error: z.object({
        code: z.string(),
        message: z.string(),
        details: z
          .record(z.string(), z.union([z.string(), z.number(), z.boolean(), z.null()]))
          .optional(),
      }),
    }),
    /**
     * A Kubernetes `Status` (the Kubernetes door's errors, and kube-apiserver's own
     * Forbidden and NotFound): the Polychrome code, when the door sent one, in
     * `details.causes[0].reason`.
     */
    kubeStatus: z.looseObject({
      kind: z.literal('Status'),
      message: z.string(),
      reason: z.string().optional(),
      details: z
        .looseObject({
          causes: z.array(z.looseObject({ reason: z.string().optional() })).optional(),
        })
        .optional(),
    }),
  };
}
let schemas: ReturnType<typeof buildSchemas> | undefined;

/** The code an HTTP status stands for when the body is not an API error. */
function codeOfStatus(status: number): ErrorCode {
  if (status === 400 || status === 405 || status === 415) return 'invalid_argument';
  if (status === 401) return 'unauthenticated';
  if (status === 403) return 'permission_denied';
  if (status === 404) return 'not_found';
  if (status === 409) return 'conflict';
  if (status === 412) return 'failed_precondition';
  if (status === 413 || status === 429) return 'resource_exhausted';
  if (status === 503) return 'unavailable';
  if (status === 504) return 'deadline_exceeded';
  return 'internal';
}

/**
 * The error an unsuccessful answer stands for: the API's `{error}` body when it has one,
 * else the status (a proxy's HTML page, an empty body).
 */
export async function apiErrorOf(response: Response): Promise<ApiCallError> {
  const requestId = response.headers.get('x-request-id') ?? undefined;
  const text = await response.text().catch(() => '');
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    body = undefined;
  }
  const { errorBody, kubeStatus } = await (schemas ??= buildSchemas());
  const parsed = errorBody.safeParse(body);
  if (parsed.success) {
    const { code, message, details } = parsed.data.error;
    return new ApiCallError(isErrorCode(code) ? code : codeOfStatus(response.status), message, {
      status: response.status,
      ...(requestId === undefined ? {} : { requestId }),
      ...(details === undefined ? {} : { details }),
    });
  }
  const status = kubeStatus.safeParse(body);
  if (status.success) {
    const cause = status.data.details?.causes?.[0]?.reason;
    const hint = response.status === 403 ? forbiddenHint(status.data.message) : undefined;
    return new ApiCallError(
      cause !== undefined && isErrorCode(cause) ? cause : codeOfStatus(response.status),
      hint === undefined ? status.data.message : `${status.data.message}; ${hint}`,
      { status: response.status, ...(requestId === undefined ? {} : { requestId }) },
    );
  }
  const excerpt = text.trim().slice(0, 200);
  return new ApiCallError(
    codeOfStatus(response.status),
    `the API answered ${String(response.status)} ${response.statusText}` +
      (excerpt === '' ? '' : `: ${excerpt}`),
    { status: response.status, ...(requestId === undefined ? {} : { requestId }) },
  );
}
