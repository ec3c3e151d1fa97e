import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterEach, beforeAll, describe, expect, it } from '@jest/globals';
import { Metadata, status as GrpcStatus } from '@grpc/grpc-js';
import { HarnessClient, type TurnOutput } from '../../proto/gen/polychrome/harness/v1/harness';
import { nodeEd25519Signer } from '../crypto/node-ed25519';
import { turnRequestToProto, type TurnRequest } from './turn-start-codec';
import { testHarnessCertificateFiles, testHarnessChannel } from '../../test/support/harness-tls';
import {
  encodeHarnessCredential,
  HARNESS_CREDENTIAL_AUDIENCE,
  HARNESS_CREDENTIAL_METADATA,
} from '../../common/harness-credential';

/** The real entry point in its own process, configured through the environment. */

const ROOT = resolve(__dirname, '..', '..');
const TSX = join(ROOT, 'node_modules', '.bin', 'tsx');
const approvalKey = nodeEd25519Signer(new Uint8Array(32).fill(5));

interface Harness {
  child: ChildProcess;
  lines: Record<string, unknown>[];
  stderr: string[];
  exit: Promise<number | null>;
}

let running: Harness | undefined;

afterEach(() => {
  if (running?.child.exitCode === null) running.child.kill('SIGKILL');
  running = undefined;
});

function spawnHarness(env: Record<string, string>): Harness {
  const child = spawn(TSX, ['harness/main.ts'], {
    cwd: ROOT,
    env: { PATH: process.env.PATH ?? '', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const lines: Record<string, unknown>[] = [];
  const stderr: string[] = [];
  let partial = '';
  child.stdout?.on('data', (chunk: Buffer) => {
    partial += chunk.toString('utf8');
    const parts = partial.split('\n');
    partial = parts.pop() ?? '';
    for (const part of parts) {
      if (part.trim() === '') continue;
      const parsed: unknown = JSON.parse(part);
      if (typeof parsed === 'object' && parsed !== null)
        lines.push(Object.fromEntries(Object.entries(parsed)));
    }
  });
  child.stderr?.on('data', (chunk: Buffer) => stderr.push(chunk.toString('utf8')));
  const exit = new Promise<number | null>((done) => child.once('exit', (code) => done(code)));
  running = { child, lines, stderr, exit };
  return running;
}

async function eventually<T>(
  probe: () => T | undefined | Promise<T | undefined>,
  what: string,
  timeoutMs = 30_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** Runs one turn over gRPC, acking every step; the outputs and the final status code. */
async function runTurnOver(
  port: number,
  request: TurnRequest,
): Promise<{ outputs: TurnOutput[]; code: number }> {
  const channel = await testHarnessChannel('team-a');
  const client = new HarnessClient(`127.0.0.1:${port}`, channel.credentials, channel.options);
  const metadata = new Metadata();
  const now = Date.now();
  metadata.set(
    HARNESS_CREDENTIAL_METADATA,
    encodeHarnessCredential(
      {
        aud: HARNESS_CREDENTIAL_AUDIENCE,
        conversation: request.conversationId,
        namespace: 'team-a',
        iat: now,
        exp: now + 60_000,
      },
      (message) => approvalKey.sign(message),
    ),
  );
  const call = client.runTurn(metadata);
  const outputs: TurnOutput[] = [];
  call.on('data', (output: TurnOutput) => {
    outputs.push(output);
    if (output.output?.$case === 'step') {
      call.write({
        input: {
          $case: 'stepCommitted',
          value: { sequence: output.output.value.sequence, position: 0 },
        },
      });
    }
  });
  const status = new Promise<number>((done) =>
    call.on('status', (s: { code: number }) => done(s.code)),
  );
  call.on('error', () => undefined);
  call.write({ input: { $case: 'start', value: turnRequestToProto(request) } });
  const code = await status;
  call.end();
  client.close();
  return { outputs, code };
}

function scriptFile(lines: string[]): string {
  const dir = mkdtempSync(join(tmpdir(), 'harness-main-'));
  const script = join(dir, 'script.yaml');
  writeFileSync(script, lines.join('\n'));
  return script;
}

/** What every spawned harness gets: loopback ports, namespace team-a and its certificate. */
let BASE_ENV: Record<string, string>;

beforeAll(async () => {
  const tls = await testHarnessCertificateFiles('team-a');
  BASE_ENV = {
    HARNESS_LISTEN_HOST: '127.0.0.1',
    HARNESS_PORT: '0',
    HARNESS_HEALTH_PORT: '0',
    HARNESS_NAMESPACE: 'team-a',
    HARNESS_TLS_CERT_FILE: tls.certPath,
    HARNESS_TLS_KEY_FILE: tls.keyPath,
    HARNESS_APPROVAL_PUBLIC_KEY: Buffer.from(approvalKey.publicKey).toString('hex'),
    HARNESS_SHUTDOWN_GRACE_MS: '2000',
  };
});

describe('harness/main.ts as a process', () => {
  it('serves /readyz and a turn over gRPC, then drains on SIGTERM and exits 0', async () => {
    const script = scriptFile([
      'replies:',
      '  - content:',
      '      - tool_use: { id: toolu_1, name: calculator, input: { expression: "6 * 7" } }',
      '  - text: The answer is 42.',
    ]);
    const harness = spawnHarness({ ...BASE_ENV, HARNESS_MODEL_SCRIPT: script });
    const ready = await eventually(
      () => harness.lines.find((l) => l.msg === 'harness ready'),
      'the ready line',
    );
    const port = Number(ready.port);
    const healthPort = Number(ready.healthPort);
    await eventually(async () => {
      const response = await fetch(`http://127.0.0.1:${healthPort}/readyz`);
      return response.status === 200 ? true : undefined;
    }, '/readyz');

    const { outputs, code } = await runTurnOver(port, {
      conversationId: 'c-1',
      turnId: 't-1',
      attempt: 1,
      model: '',
      input: {
        turnId: 't-1',
        history: [],
        userMessage: 'What is 6 * 7?',
        tools: [
          {
            name: 'calculator',
            description: 'Arithmetic.',
            inputSchema: { type: 'object' },
            effect: 'pure',
            needsApproval: false,
          },
        ],
        budget: {},
        recordedSteps: [],
        approvalAnswers: [],
        questionAnswers: [],
      },
    });
    expect(code).toBe(GrpcStatus.OK);
    expect(outputs.at(-1)?.output).toMatchObject({
      $case: 'result',
      value: { outcome: { $case: 'complete', value: { text: 'The answer is 42.', steps: 2 } } },
    });
    const metrics = await (await fetch(`http://127.0.0.1:${healthPort}/metrics`)).text();
    expect(metrics).toContain('polychrome_harness_turns_total{outcome="completed"} 1');
    expect(metrics).toContain('polychrome_harness_steps_total{kind="tool_result"} 1');

    harness.child.kill('SIGTERM');
    expect(await harness.exit).toBe(0);
    expect(harness.lines.map((l) => l.msg)).toEqual(
      expect.arrayContaining(['harness shutting down', 'harness stopped']),
    );
  }, 60_000);

  it('offers the tools of HARNESS_MCP_SERVERS, gated by HARNESS_REQUIRE_APPROVAL', async () => {
    const script = scriptFile([
      'replies:',
      '  - content:',
      '      - tool_use: { id: toolu_1, name: flaky/echo, input: { text: from main } }',
      '  - content:',
      '      - tool_use: { id: toolu_2, name: flaky/write_note, input: { text: gated } }',
    ]);
    const harness = spawnHarness({
      ...BASE_ENV,
      HARNESS_MODEL_SCRIPT: script,
      HARNESS_MCP_SERVERS: JSON.stringify([
        {
          name: 'flaky',
          transport: 'stdio',
          command: process.execPath,
          args: [
            '--import',
            'tsx',
            join(ROOT, 'test', 'support', 'mcp-servers', 'failure-server.ts'),
          ],
          cwd: ROOT,
          timeoutMs: 20_000,
        },
      ]),
      HARNESS_REQUIRE_APPROVAL: 'flaky/write_note',
    });
    const ready = await eventually(
      () => harness.lines.find((l) => l.msg === 'harness ready'),
      'the ready line',
    );
    const { outputs, code } = await runTurnOver(Number(ready.port), {
      conversationId: 'c-1',
      turnId: 't-1',
      attempt: 1,
      model: '',
      input: {
        turnId: 't-1',
        history: [],
        userMessage: 'Echo, then write a note.',
        tools: [],
        budget: {},
        recordedSteps: [],
        approvalAnswers: [],
        questionAnswers: [],
      },
      // As the control plane sends built-ins: by reference.
      toolReferences: [{ name: 'calculator', needsApproval: false }],
    });
    expect(code).toBe(GrpcStatus.OK);
    const results = outputs.flatMap((o) =>
      o.output?.$case === 'step' && o.output.value.step?.$case === 'toolResult'
        ? [o.output.value.step.value.content]
        : [],
    );
    expect(results).toEqual(['from main']);
    expect(outputs.at(-1)?.output).toMatchObject({
      $case: 'paused',
      value: { request: { $case: 'approvalRequest', value: { toolName: 'flaky/write_note' } } },
    });
    expect(harness.lines.find((l) => l.msg === 'turn started')).toMatchObject({
      tools: 8,
      mcpTools: 7,
    });
    harness.child.kill('SIGTERM');
    expect(await harness.exit).toBe(0);
  }, 60_000);

  it('exits 2 and names every bad variable when the configuration is wrong', async () => {
    const harness = spawnHarness({ HARNESS_PORT: 'x', HARNESS_MAX_STEPS: '0' });
    expect(await harness.exit).toBe(2);
    const message = harness.stderr.join('');
    expect(message).toContain('harness configuration has 5 problems');
    expect(message).toContain('HARNESS_PORT: must be a whole number');
    expect(message).toContain('HARNESS_TLS_CERT_FILE: is required');
    expect(message).toContain('HARNESS_NAMESPACE: is required');
    expect(message).toContain('HARNESS_MAX_STEPS: must be a whole number from 1 to 100');
  }, 60_000);

  it("exits 2 before listening when its certificate names another namespace's harness", async () => {
    const script = scriptFile(['replies:', '  - text: never']);
    const harness = spawnHarness({
      ...BASE_ENV,
      HARNESS_NAMESPACE: 'team-b',
      HARNESS_MODEL_SCRIPT: script,
    });
    expect(await harness.exit).toBe(2);
    expect(harness.stderr.join('')).toMatch(
      /harness's serving certificate .* not usable \(it names DNS:polychrome-harness\.team-a, not DNS:polychrome-harness\.team-b.*mount the Secret polychrome-harness-tls of namespace team-b/,
    );
    expect(harness.lines.find((l) => l.msg === 'harness server listening')).toBeUndefined();
  }, 60_000);
});
