import { afterEach, describe, expect, it } from '@jest/globals';

import { ALICE, BOB, TOKENS } from '../test/support/api-fixtures';
import { startApiStack, type ApiStack } from '../test/support/api-stack';
import { ExitCode } from './cli-support';
import { USAGE } from './run-cli';
import { envOf, expectApiError, served } from './testdata/api-expectations';
import { runCaptured } from './testdata/captured-run';

/*
 * How `polychrome` reaches the public API (public-api-door.ts): the URL and the token from
 * the flags or the environment, and the API's error answers as the user sees them, against
 * the real public API on 127.0.0.1:0.
 */

const UNKNOWN_CONV = '11111111-2222-4333-8444-555555555555';

let stack: ApiStack | undefined;

afterEach(async () => {
  await stack?.api.close();
  stack = undefined;
});

/** Starts the API with a conversation of Alice's. */
async function start(): Promise<ApiStack & { id: string }> {
  stack = await startApiStack();
  return { ...stack, id: stack.conversationId };
}

describe('connection settings and errors', () => {
  it('names --token and POLYCHROME_TOKEN when there is no token, and sends nothing', async () => {
    const s = await start();
    const run = await runCaptured(['send', s.id, 'hi'], { POLYCHROME_API_URL: s.api.base });
    expect(run.code).toBe(ExitCode.Usage);
    expect(run.stdout).toBe('');
    expect(run.stderr).toContain(
      'polychrome: no API token: pass --token T or set POLYCHROME_TOKEN',
    );
    expect(run.stderr).toContain(USAGE);
    expect(served(s.api)).toHaveLength(0);
  });

  it('takes the token from --token', async () => {
    const s = await start();
    const run = await runCaptured(['transcript', s.id, '--token', TOKENS.alice], {
      POLYCHROME_API_URL: s.api.base,
    });
    expect(run.code).toBe(ExitCode.Ok);
    expect(run.stdout).toBe(`conversation ${s.id}: 0 turns (journal head 0)\n`);
  });

  it("exits 3 with the API's message on 401, and the message commits nothing", async () => {
    const s = await start();
    const run = await runCaptured(['send', s.id, 'hi'], envOf(s.api, TOKENS.unknown));
    await expectApiError(s.api, run, {
      status: 401,
      code: 'unauthenticated',
      message: 'the bearer token is unknown, expired or revoked',
    });
    expect(s.api.head(s.id)).toBe(0);
  });

  it("exits 3 when a stranger sends to someone else's conversation, and commits nothing", async () => {
    const s = await start();
    const run = await runCaptured(['send', s.id, 'hi'], envOf(s.api, TOKENS.bob));
    await expectApiError(s.api, run, {
      status: 403,
      code: 'permission_denied',
      message: `${BOB.identity} may not use conversation ${s.id}: it belongs to ${ALICE.identity}`,
    });
    expect(s.api.head(s.id)).toBe(0);
  });

  it('exits 3 naming an unknown conversation (404)', async () => {
    const s = await start();
    const run = await runCaptured(['transcript', UNKNOWN_CONV], s.env);
    await expectApiError(s.api, run, {
      status: 404,
      code: 'not_found',
      message: `conversation ${UNKNOWN_CONV} does not exist`,
    });
  });

  it('exits 3 naming the URL when the API is down, with the command to retry', async () => {
    const s = await start();
    await s.api.server.close();
    const run = await runCaptured(['send', s.id, 'hi', '--key', 'k-2'], s.env);
    expect(run.code).toBe(ExitCode.Error);
    expect(run.stderr).toContain(
      `polychrome: cannot reach the Polychrome API at ${s.api.base}: ECONNREFUSED`,
    );
    expect(run.stderr).toContain(`then retry with: polychrome send ${s.id} --key k-2 -- hi`);
  });

  it('prefers --api over POLYCHROME_API_URL', async () => {
    const s = await start();
    const down = await startApiStack();
    await down.api.close();
    const run = await runCaptured(['transcript', s.id, '--api', s.api.base], down.env);
    expect(run.code).toBe(ExitCode.Ok);
    expect(served(s.api)).toHaveLength(1);
  });
});
