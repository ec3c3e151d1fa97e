/**
 * What a failed @kubernetes/client-node call says: its HTTP status, its Status message for
 * logs and conditions, and the Status fields `classifyCreateFailure` reads.
 */
import { ApiException } from '@kubernetes/client-node';
import type { ApiFailure } from './classify-create-failure';
import { fieldAt } from './read-objects';

/** HTTP status of a client-node API error, or undefined for anything else. */
export function apiStatusCode(err: unknown): number | undefined {
  return err instanceof ApiException && typeof err.code === 'number' ? err.code : undefined;
}

/** The Status message of an API error, else the error's message. */
export function apiErrorMessage(err: unknown): string {
  if (err instanceof ApiException) {
    const body: unknown = err.body;
    const parsed: unknown = typeof body === 'string' ? safeParse(body) : body;
    const message = fieldAt(parsed, 'message');
    if (typeof message === 'string') return `${err.code}: ${message}`;
    return `HTTP ${err.code}`;
  }
  return err instanceof Error ? err.message : String(err);
}

/**
 * The Status fields of a failed call, for `classifyCreateFailure`: `code` and
 * `reason` from the Status body (the code falls back to the HTTP status), `message` as
 * {@link apiErrorMessage} gives it without the code prefix.
 */
export function apiFailureOf(err: unknown): ApiFailure {
  if (err instanceof ApiException) {
    const body: unknown = err.body;
    const parsed: unknown = typeof body === 'string' ? safeParse(body) : body;
    const code = fieldAt(parsed, 'code');
    const reason = fieldAt(parsed, 'reason');
    const message = fieldAt(parsed, 'message');
    return {
      ...(typeof code === 'number'
        ? { code }
        : typeof err.code === 'number'
          ? { code: err.code }
          : {}),
      ...(typeof reason === 'string' && reason !== '' ? { reason } : {}),
      message: typeof message === 'string' ? message : `HTTP ${err.code}`,
    };
  }
  return { message: err instanceof Error ? err.message : String(err) };
}

function safeParse(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

/** Runs `write`; a failure with one of `codes` (an HTTP status) is undefined. */
export async function ignoringStatus(
  codes: readonly number[],
  write: () => Promise<unknown>,
): Promise<unknown> {
  try {
    return await write();
  } catch (err: unknown) {
    const code = apiStatusCode(err);
    if (code !== undefined && codes.includes(code)) return undefined;
    throw err;
  }
}
