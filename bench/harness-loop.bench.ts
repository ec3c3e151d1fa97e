/**
 * Harness benchmarks (run: `npx tsx bench/harness-loop.bench.ts`; about 20 s).
 *
 * 1. Turn-loop overhead per step. A step is one model round trip plus the tool call it
 *    asked for: the scripted provider answers with a `calculator` call (a pure built-in)
 *    until the last reply, which is text. The loop runs through `runTurn` with an
 *    in-memory step sink that acks at once. The baseline, measured in the same run on the
 *    same replies, calls the scripted provider and the tool directly with no loop, so the
 *    difference is what the loop adds: the pure machine, canonical JSON, commits, events.
 * 2. Memory of an idle harness process: spawn the entry point, wait for /readyz, read
 *    VmRSS from /proc/<pid>/status. Compiled JS under plain node is the honest measure
 *    (`dist/harness/main.js`, from `npm run build`); without it the TypeScript entry runs
 *    through tsx's loader, which adds the compiler's own memory, and the report says so.
 */
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { nodeEd25519Signer, nodeEd25519Verifier } from '../harness/crypto/node-ed25519';
import type { ModelRequest } from '../common/model/model-port';
import { ScriptedProvider, type ScriptReply } from '../harness/model/scripted-provider';
import { builtinToolRunner, calculatorTool } from '../harness/tools/builtin-tools';
import { requestIds } from '../common/request-ids';
import { runTurn, type StepSink } from '../harness/turn/run-turn';
import type { TurnInput } from '../harness/turn/turn-machine';
import { testHarnessCertificateFiles } from '../test/support/harness-tls';

const STEPS_PER_TURN = 50;
const TIME_BUDGET_MS = 4_000;
const WARMUP_TURNS = 30;
const ROOT = resolve(__dirname, '..');

const replies: ScriptReply[] = [
  ...Array.from({ length: STEPS_PER_TURN - 1 }, (_, i): ScriptReply => ({
    content: [
      { text: `Step ${i + 1}: computing.` },
      { tool_use: { name: 'calculator', input: { expression: `(${i} + 1) * 3 ^ 2` } } },
    ],
  })),
  { text: 'All steps done; the results are above.' },
];

const input: TurnInput = {
  turnId: 'bench-turn',
  history: [],
  userMessage: 'Run the benchmark.',
  tools: [calculatorTool],
  budget: { deployment: STEPS_PER_TURN },
  recordedSteps: [],
  approvalAnswers: [],
  questionAnswers: [],
};

const approvalKey = nodeEd25519Signer(new Uint8Array(32).fill(1));
const emptyRequest: ModelRequest = { messages: [], tools: [], toolChoice: 'auto' };
const signal = new AbortController().signal;

function quantile(sorted: readonly number[], q: number): number {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? Number.NaN;
}

interface Sample {
  turns: number;
  steps: number;
  elapsedMs: number;
  perStepMs: number[];
}

/** One turn through runTurn; per-step times are the gaps between model_call commits. */
async function loopTurn(perStepMs: number[]): Promise<number> {
  let last = performance.now();
  let steps = 0;
  const sink: StepSink = {
    commit(step) {
      if (step.kind === 'model_call') {
        const now = performance.now();
        perStepMs.push(now - last);
        last = now;
        steps++;
      }
      return Promise.resolve();
    },
  };
  const model = new ScriptedProvider({ replies }, 'bench');
  const outcome = await runTurn(input, {
    modelFor: () => model,
    tools: builtinToolRunner,
    steps: sink,
    clock: { nowMs: () => 0 },
    ids: requestIds,
    approvalVerifier: nodeEd25519Verifier,
    approvalPublicKey: approvalKey.publicKey,
  });
  if (outcome.kind !== 'completed' || outcome.steps !== STEPS_PER_TURN) {
    throw new Error(`bench turn ended ${outcome.kind}, not completed in ${STEPS_PER_TURN} steps`);
  }
  return steps;
}

/** The same replies and tool calls without the loop. */
async function baselineTurn(perStepMs: number[]): Promise<number> {
  const model = new ScriptedProvider({ replies }, 'bench');
  let steps = 0;
  for (let i = 0; i < STEPS_PER_TURN; i++) {
    const started = performance.now();
    const response = await model.complete(emptyRequest, { signal, onTextDelta: () => undefined });
    for (const block of response.content) {
      if (block.type !== 'tool_use') continue;
      await builtinToolRunner.call(
        {
          turnId: 'bench-turn',
          toolCallId: block.id,
          name: block.name,
          input: block.input,
          argsJson: JSON.stringify(block.input),
          step: i + 1,
          maxSteps: STEPS_PER_TURN,
        },
        { signal, timeoutMs: 1_000 },
      );
    }
    perStepMs.push(performance.now() - started);
    steps++;
  }
  return steps;
}

async function measure(turn: (perStepMs: number[]) => Promise<number>): Promise<Sample> {
  for (let i = 0; i < WARMUP_TURNS; i++) await turn([]);
  const perStepMs: number[] = [];
  let steps = 0;
  let turns = 0;
  const started = performance.now();
  while (performance.now() - started < TIME_BUDGET_MS) {
    steps += await turn(perStepMs);
    turns++;
  }
  return { turns, steps, elapsedMs: performance.now() - started, perStepMs };
}

function describe(
  label: string,
  sample: Sample,
): { stepsPerSecond: number; p50: number; p99: number } {
  const sorted = [...sample.perStepMs].sort((a, b) => a - b);
  const stepsPerSecond = sample.steps / (sample.elapsedMs / 1000);
  const p50 = quantile(sorted, 0.5);
  const p99 = quantile(sorted, 0.99);
  console.log(
    `${label.padEnd(28)} ${stepsPerSecond.toFixed(0).padStart(8)} steps/s   p50 ${(p50 * 1000).toFixed(1).padStart(7)} µs   p99 ${(p99 * 1000).toFixed(1).padStart(7)} µs   (${sample.turns} turns of ${STEPS_PER_TURN} steps)`,
  );
  return { stepsPerSecond, p50, p99 };
}

async function idleMemory(): Promise<void> {
  const compiled = join(ROOT, 'dist', 'harness', 'main.js');
  const useCompiled = existsSync(compiled);
  const dir = mkdtempSync(join(tmpdir(), 'harness-bench-'));
  const script = join(dir, 'script.yaml');
  writeFileSync(script, 'replies:\n  - text: idle\n');
  const tls = await testHarnessCertificateFiles('bench');
  // `node --import tsx` keeps the measured pid the node process itself (the tsx CLI would
  // put a parent process in between).
  const args = useCompiled ? [compiled] : ['--import', 'tsx', join(ROOT, 'harness', 'main.ts')];
  const child = spawn(process.execPath, args, {
    cwd: ROOT,
    env: {
      PATH: process.env.PATH ?? '',
      HARNESS_LISTEN_HOST: '127.0.0.1',
      HARNESS_PORT: '0',
      HARNESS_HEALTH_PORT: '0',
      HARNESS_NAMESPACE: 'bench',
      HARNESS_TLS_CERT_FILE: tls.certPath,
      HARNESS_TLS_KEY_FILE: tls.keyPath,
      HARNESS_APPROVAL_PUBLIC_KEY: Buffer.from(approvalKey.publicKey).toString('hex'),
      HARNESS_MODEL_SCRIPT: script,
      HARNESS_LOG_LEVEL: 'info',
    },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  try {
    const healthPort = await new Promise<number>((resolvePort, reject) => {
      let buffered = '';
      const timer = setTimeout(() => reject(new Error('harness not ready within 30 s')), 30_000);
      child.stdout.on('data', (chunk: Buffer) => {
        buffered += chunk.toString('utf8');
        const match = /"healthPort":(\d+).*"msg":"harness ready"/u.exec(buffered);
        if (match?.[1] !== undefined) {
          clearTimeout(timer);
          resolvePort(Number(match[1]));
        }
      });
      child.once('exit', (code) => reject(new Error(`harness exited with ${code} before ready`)));
    });
    const deadline = Date.now() + 10_000;
    for (;;) {
      const ready = await fetch(`http://127.0.0.1:${healthPort}/readyz`).then(
        (r) => r.status === 200,
        () => false,
      );
      if (ready) break;
      if (Date.now() > deadline) throw new Error('/readyz never answered 200');
      await new Promise((r) => setTimeout(r, 50));
    }
    // Let start-up garbage settle before reading the idle figure.
    await new Promise((r) => setTimeout(r, 1_500));
    const status = readFileSync(`/proc/${child.pid}/status`, 'utf8');
    const rssKiB = Number(/VmRSS:\s+(\d+)/u.exec(status)?.[1] ?? Number.NaN);
    const rssMiB = rssKiB / 1024;
    console.log(
      `idle harness RSS: ${rssMiB.toFixed(1)} MiB (${useCompiled ? 'compiled dist/harness/main.js under node' : 'dist/ missing: harness/main.ts through the tsx loader, which inflates the figure; run `npm run build` for the honest measure'}); target < 60 MiB: ${rssMiB < 60 ? 'met' : 'NOT met'}`,
    );
  } finally {
    child.kill('SIGTERM');
    await new Promise((r) => child.once('exit', r));
    rmSync(dir, { recursive: true, force: true });
  }
}

async function main(): Promise<void> {
  console.log(
    `node ${process.version}; ${STEPS_PER_TURN} steps per turn, ${TIME_BUDGET_MS / 1000} s per measurement`,
  );
  const baseline = describe('baseline (no loop)', await measure(baselineTurn));
  const loop = describe('runTurn loop', await measure(loopTurn));
  console.log(
    `loop overhead per step: p50 ${((loop.p50 - baseline.p50) * 1000).toFixed(1)} µs, p99 ${((loop.p99 - baseline.p99) * 1000).toFixed(1)} µs`,
  );
  await idleMemory();
}

main().catch((error: unknown) => {
  console.error(error);
  process.exitCode = 1;
});
