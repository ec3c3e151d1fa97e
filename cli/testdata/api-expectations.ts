import { expect } from '@jest/globals';

import { pollUntil, type TestApi } from '../../test/support/api-fixtures';
import { ExitCode } from '../cli-support';
import type { Captured } from './captured-run';

/* What the tests of the `polychrome` conversation commands check against the real public API. */

/** The environment that reaches `api` with `token`. */
export function envOf(api: TestApi, token: string): Record<string, string> {
  return { POLYCHROME_API_URL: api.base, POLYCHROME_TOKEN: token };
}

/** Requests the API served (its own log line per request). */
export function served(api: TestApi): Record<string, unknown>[] {
  return api.logs.filter((line) => line.msg === 'request served');
}

/**
 * A run that failed on the API's answer: exit 3, nothing on stdout, and on stderr the API's
 * own message with its code, status and request id, the id being the one the API logged
 * with that status (the one a user quotes in a report).
 */
export async function expectApiError(
  api: TestApi,
  run: Captured,
  answer: { readonly status: number; readonly code: string; readonly message: string },
): Promise<void> {
  expect(run.code).toBe(ExitCode.Error);
  expect(run.stdout).toBe('');
  const requestId = /request id ([0-9a-f-]{36})\)\n$/u.exec(run.stderr)?.[1];
  expect(run.stderr).toBe(
    `polychrome: ${answer.message} (${answer.code}, HTTP ${String(answer.status)}, ` +
      `request id ${String(requestId)})\n`,
  );
  await pollUntil(`request ${String(requestId)} in the API's log`, () =>
    served(api).some((line) => line.requestId === requestId && line.status === answer.status),
  );
}
