import { afterAll, beforeAll, describe, expect, it, jest } from '@jest/globals';
import { join } from 'node:path';
import { canonicalJson } from '../../common/canonical-json';
import { AppError } from '../../common/errors';
import {
  EVERYTHING_SERVER,
  REPO_ROOT,
  freePort,
  startEverythingHttp,
  type EverythingHttpServer,
} from '../../test/support/mcp-servers/everything-http';
import { startTestHttpMcpServer } from '../../test/support/mcp-servers/http-server';
import { nodeEd25519Signer, nodeEd25519Verifier } from '../crypto/node-ed25519';
import { ScriptedProvider } from '../model/scripted-provider';
import { requestIds } from '../../common/request-ids';
import { runTurn } from '../turn/run-turn';
import type { TurnStep } from '../turn/turn-records';
import { mergeApprovalRules } from './approval-policy';
import { type McpTool } from './mcp-connection';
import { type McpServerConfig } from './mcp-server-config';
import { McpToolRunner, splitToolName, toTurnTools } from './mcp-tools';
import type { ToolCallRequest, ToolOutcome } from '../turn/ports/tool-port';

// Each server start spawns node (and tsx for our own servers); shared CI cores are slow.
jest.setTimeout(30_000);

const everythingStdio: McpServerConfig = {
  name: 'everything',
  transport: 'stdio',
  command: join(REPO_ROOT, 'node_modules', '.bin', 'mcp-server-everything'),
  args: ['stdio'],
  env: { POLYCHROME_MCP_MARKER: 'marker-42' },
};

const failureServer: McpServerConfig = {
  name: 'flaky',
  transport: 'stdio',
  command: process.execPath,
  args: ['--import', 'tsx', join(REPO_ROOT, 'test', 'support', 'mcp-servers', 'failure-server.ts')],
  cwd: REPO_ROOT,
  timeoutMs: 20_000,
};

let callCount = 0;
function request(name: string, input: Record<string, string | number> = {}): ToolCallRequest {
  callCount++;
  return {
    turnId: 'turn-1',
    toolCallId: `toolu_${callCount}`,
    name,
    input,
    argsJson: canonicalJson(input),
    step: 1,
    maxSteps: 8,
  };
}

function call(
  runner: McpToolRunner,
  name: string,
  input: Record<string, string | number> = {},
  options: { signal?: AbortSignal; timeoutMs?: number } = {},
): Promise<ToolOutcome> {
  return runner.call(request(name, input), {
    signal: options.signal ?? new AbortController().signal,
    timeoutMs: options.timeoutMs ?? 20_000,
  });
}

async function rejection(promise: Promise<unknown>): Promise<AppError> {
  try {
    await promise;
  } catch (error) {
    if (error instanceof AppError) return error;
    throw error;
  }
  throw new Error('expected a rejection');
}

async function eventually<T>(read: () => Promise<T>, ok: (value: T) => boolean): Promise<T> {
  const deadline = Date.now() + 10_000;
  for (;;) {
    const value = await read();
    if (ok(value) || Date.now() > deadline) return value;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

function byName(tools: readonly McpTool[], name: string): McpTool | undefined {
  return tools.find((tool) => tool.name === name);
}

describe('splitToolName', () => {
  it.each([
    ['github/create_issue', { server: 'github', tool: 'create_issue' }],
    ['files/dir/read', { server: 'files', tool: 'dir/read' }],
    ['calculator', undefined],
    ['/x', undefined],
    ['x/', undefined],
  ])('%s', (name, expected) => {
    expect(splitToolName(name)).toEqual(expected);
  });
});

describe('MCP over stdio: the reference server (server-everything)', () => {
  let runner: McpToolRunner;
  beforeAll(() => {
    process.env.POLYCHROME_HARNESS_ONLY = 'must-not-leak';
    runner = new McpToolRunner([everythingStdio]);
  });
  afterAll(async () => {
    delete process.env.POLYCHROME_HARNESS_ONLY;
    await runner.close();
  });

  it('lists tools as <server>/<tool> with schemas and effects from readOnlyHint', async () => {
    const tools = await runner.listTools();
    expect(byName(tools, 'everything/echo')).toEqual({
      name: 'everything/echo',
      server: 'everything',
      tool: 'echo',
      description: 'Echoes back the input string',
      inputSchema: expect.objectContaining({
        type: 'object',
        properties: { message: expect.objectContaining({ type: 'string' }) },
        required: ['message'],
      }),
      effect: 'pure',
    });
    // Not read-only (it changes server state): a side effect.
    expect(byName(tools, 'everything/toggle-simulated-logging')?.effect).toBe('side_effect');
    expect(tools.every((tool) => tool.name.startsWith('everything/'))).toBe(true);

    const rules = mergeApprovalRules(['everything/get-sum'], ['everything/echo']);
    const turnTools = toTurnTools(tools, rules);
    expect(turnTools.find((t) => t.name === 'everything/get-sum')?.needsApproval).toBe(true);
    expect(turnTools.find((t) => t.name === 'everything/echo')?.needsApproval).toBe(true);
    expect(turnTools.find((t) => t.name === 'everything/get-env')?.needsApproval).toBe(false);
  });

  it('calls echo and get-sum', async () => {
    expect(await call(runner, 'everything/echo', { message: 'hi there' })).toEqual({
      content: 'Echo: hi there',
      isError: false,
    });
    expect(await call(runner, 'everything/get-sum', { a: 2, b: 40 })).toEqual({
      content: 'The sum of 2 and 40 is 42.',
      isError: false,
    });
  });

  it('passes the configured env and nothing of the harness environment', async () => {
    const outcome = await call(runner, 'everything/get-env');
    expect(outcome.isError).toBe(false);
    expect(outcome.content).toContain('marker-42');
    expect(outcome.content).not.toContain('must-not-leak');
  });

  it('bad arguments and unknown tools are known failures (isError), not rejections', async () => {
    const bad = await call(runner, 'everything/get-sum', { a: 'two', b: 3 });
    expect(bad.isError).toBe(true);
    expect(bad.content).toMatch(/Input validation error/u);
    const unknown = await call(runner, 'everything/no-such-tool');
    expect(unknown.isError).toBe(true);
    expect(unknown.content).toMatch(/no-such-tool/u);
  });

  it('a tool of no configured server fails without running anything', async () => {
    expect(await call(runner, 'nowhere/echo', { message: 'x' })).toEqual({
      content: 'nowhere/echo is not a tool of a configured MCP server; it did not run.',
      isError: true,
    });
    expect(await call(runner, 'calculator')).toMatchObject({ isError: true });
  });
});

describe('MCP over streamable HTTP: the reference server', () => {
  let server: EverythingHttpServer;
  let runner: McpToolRunner;
  beforeAll(async () => {
    server = await startEverythingHttp();
    runner = new McpToolRunner([{ name: 'web', transport: 'http', url: server.url }]);
  });
  afterAll(async () => {
    await runner.close();
    await server.stop();
  });

  it('lists and calls tools', async () => {
    const tools = await runner.listTools();
    expect(byName(tools, 'web/echo')?.effect).toBe('pure');
    expect(await call(runner, 'web/echo', { message: 'over http' })).toEqual({
      content: 'Echo: over http',
      isError: false,
    });
    const bad = await call(runner, 'web/get-sum', { a: 'x', b: 1 });
    expect(bad.isError).toBe(true);
  });
});

describe('MCP over streamable HTTP: a server that dies mid-call', () => {
  it('rejects: the outcome is unknown', async () => {
    const server = await startTestHttpMcpServer();
    const runner = new McpToolRunner([
      { name: 'web', transport: 'http', url: server.url, timeoutMs: 3000 },
    ]);
    try {
      expect(await call(runner, 'web/echo')).toEqual({ content: 'echo over http', isError: false });
      const pending = call(runner, 'web/hang');
      await server.hangStarted;
      await server.kill();
      const error = await rejection(pending);
      // The request was sent and the stream broke: the call rejects, its outcome unknown.
      expect(error.code).toBe('unavailable');
      expect(error.message).toMatch(
        /^MCP tool web\/hang \(toolu_\d+\) failed without a readable answer \(.*\); its outcome is unknown$/u,
      );
    } finally {
      await runner.close();
    }
  });
});

describe('MCP trace context', () => {
  it('sends no trace context in params._meta while tracing is off', async () => {
    // With tracing on, params._meta.traceparent names the execute_tool span
    // (test/integration/tracing.test.ts).
    const runner = new McpToolRunner([
      {
        name: 'meta',
        transport: 'stdio',
        command: process.execPath,
        args: [
          '--import',
          'tsx',
          join(REPO_ROOT, 'test', 'support', 'mcp-servers', 'meta-server.ts'),
        ],
        cwd: REPO_ROOT,
        timeoutMs: 20_000,
      },
    ]);
    try {
      expect(await call(runner, 'meta/meta')).toEqual({ content: '{}', isError: false });
    } finally {
      await runner.close();
    }
  });
});

describe('MCP failure cases (our own stdio server)', () => {
  let runner: McpToolRunner;
  const stderr: string[] = [];
  beforeAll(() => {
    runner = new McpToolRunner([failureServer], { onStderr: (_s, text) => stderr.push(text) });
  });
  afterAll(async () => {
    await runner.close();
  });

  async function state(): Promise<{ cancelled: number; pid: number }> {
    const outcome = await call(runner, 'flaky/cancellations');
    const parsed: unknown = JSON.parse(outcome.content);
    if (
      typeof parsed === 'object' &&
      parsed !== null &&
      'cancelled' in parsed &&
      'pid' in parsed &&
      typeof parsed.cancelled === 'number' &&
      typeof parsed.pid === 'number'
    ) {
      return { cancelled: parsed.cancelled, pid: parsed.pid };
    }
    throw new Error(`unexpected state ${outcome.content}`);
  }

  it('tool errors are isError results: returned, and thrown in the handler', async () => {
    expect(await call(runner, 'flaky/fail')).toEqual({
      content: 'the widget is out of stock',
      isError: true,
    });
    expect(await call(runner, 'flaky/throws')).toEqual({
      content: 'handler exploded',
      isError: true,
    });
  });

  it('effects: read-only tools are pure, the rest side effects', async () => {
    const tools = await runner.listTools();
    expect(tools.map((t) => [t.name, t.effect])).toEqual([
      ['flaky/echo', 'pure'],
      ['flaky/write_note', 'side_effect'],
      ['flaky/crash', 'side_effect'],
      ['flaky/slow', 'side_effect'],
      ['flaky/cancellations', 'pure'],
      ['flaky/fail', 'side_effect'],
      ['flaky/throws', 'side_effect'],
    ]);
  });

  it('a slow tool past its timeout rejects deadline_exceeded and is cancelled on the server', async () => {
    const before = await state();
    const error = await rejection(call(runner, 'flaky/slow', { ms: 5000 }, { timeoutMs: 200 }));
    expect(error.code).toBe('deadline_exceeded');
    expect(error.message).toMatch(
      /^MCP tool flaky\/slow \(toolu_\d+\) gave no answer within 200 ms; the server was asked to cancel, but its outcome is unknown$/u,
    );
    const after = await eventually(state, (s) => s.cancelled > before.cancelled);
    expect(after.cancelled).toBe(before.cancelled + 1);
    expect(after.pid).toBe(before.pid);
  });

  it('aborting the signal mid-call rejects cancelled and cancels on the server', async () => {
    const before = await state();
    const abort = new AbortController();
    const pending = call(runner, 'flaky/slow', { ms: 5000 }, { signal: abort.signal });
    setTimeout(() => abort.abort(), 100);
    const error = await rejection(pending);
    expect(error.code).toBe('cancelled');
    expect(error.message).toContain('its outcome is unknown');
    const after = await eventually(state, (s) => s.cancelled > before.cancelled);
    expect(after.cancelled).toBe(before.cancelled + 1);
  });

  it('a crash mid-call rejects (outcome unknown); the next call restarts the server', async () => {
    const before = await state();
    const error = await rejection(call(runner, 'flaky/crash'));
    expect(error.code).toBe('unavailable');
    expect(error.message).toMatch(
      /^MCP server flaky closed the connection during flaky\/crash \(toolu_\d+\), for example by crashing; the outcome is unknown\. The next call restarts the server\.$/u,
    );
    const after = await state();
    expect(after.pid).not.toBe(before.pid);
    expect(after.cancelled).toBe(0);
    expect(await call(runner, 'flaky/write_note', { text: 'again' })).toEqual({
      content: 'saved note 1',
      isError: false,
    });
  });

  it('runTurn: a side-effecting MCP call whose server crashes makes the turn ambiguous', async () => {
    const tools = toTurnTools(await runner.listTools(), mergeApprovalRules([], []));
    const model = new ScriptedProvider({
      replies: [{ content: [{ tool_use: { id: 'toolu_x', name: 'flaky/crash', input: {} } }] }],
    });
    const committed: TurnStep[] = [];
    let now = 0;
    const outcome = await runTurn(
      {
        turnId: 'turn-crash',
        history: [],
        userMessage: 'crash it',
        tools,
        budget: {},
        recordedSteps: [],
        approvalAnswers: [],
        questionAnswers: [],
      },
      {
        modelFor: () => model,
        tools: runner,
        steps: {
          commit: (step) => {
            committed.push(step);
            return Promise.resolve();
          },
        },
        clock: { nowMs: () => now++ },
        ids: requestIds,
        approvalVerifier: nodeEd25519Verifier,
        approvalPublicKey: nodeEd25519Signer(new Uint8Array(32).fill(3)).publicKey,
        toolTimeoutMs: 20_000,
      },
    );
    expect(outcome).toMatchObject({ kind: 'ambiguous', toolCallId: 'toolu_x' });
    // The intent was committed before the call; no result exists.
    expect(committed.map((s) => s.kind)).toEqual(['model_call', 'tool_call']);
    expect(committed[1]).toMatchObject({
      record: { effect: 'side_effect', toolName: 'flaky/crash' },
    });
  });
});

describe('MCP servers that cannot be reached', () => {
  it('a command that does not exist: calls fail without running, listing names the server', async () => {
    const runner = new McpToolRunner([
      { name: 'ghost', transport: 'stdio', command: join(REPO_ROOT, 'no-such-mcp-server') },
    ]);
    try {
      const outcome = await call(runner, 'ghost/anything');
      expect(outcome.isError).toBe(true);
      expect(outcome.content).toMatch(
        /^MCP server ghost is not available \(MCP server ghost could not be started: .*\); ghost\/anything did not run\.$/u,
      );
      const error = await rejection(runner.listTools());
      expect(error.code).toBe('unavailable');
      expect(error.details).toEqual({ server: 'ghost' });
    } finally {
      await runner.close();
    }
  });

  it('an HTTP url where nothing listens', async () => {
    const port = await freePort();
    const runner = new McpToolRunner([
      { name: 'down', transport: 'http', url: `http://127.0.0.1:${port}/mcp`, timeoutMs: 5000 },
    ]);
    try {
      const outcome = await call(runner, 'down/echo', { message: 'x' });
      expect(outcome.isError).toBe(true);
      expect(outcome.content).toMatch(/^MCP server down is not available .*could not be reached/u);
    } finally {
      await runner.close();
    }
  });

  it('close is idempotent and later calls fail without running', async () => {
    const runner = new McpToolRunner([
      { name: 'e', transport: 'stdio', command: process.execPath, args: [EVERYTHING_SERVER] },
    ]);
    await runner.close();
    await runner.close();
    expect(await call(runner, 'e/echo', { message: 'x' })).toEqual({
      content: 'MCP tools are shut down; e/echo did not run.',
      isError: true,
    });
    await expect(runner.listTools()).rejects.toThrow('MCP tools are shut down');
  });

  it('rejects duplicate and malformed server names', () => {
    expect(
      () =>
        new McpToolRunner([
          { name: 'a', transport: 'http', url: 'http://127.0.0.1:1/mcp' },
          { name: 'a', transport: 'http', url: 'http://127.0.0.1:2/mcp' },
        ]),
    ).toThrow('MCP server a is configured twice; names must be unique');
    expect(
      () => new McpToolRunner([{ name: 'Bad/Name', transport: 'http', url: 'http://x/mcp' }]),
    ).toThrow('MCP server name "Bad/Name" is not a DNS label');
  });
});
