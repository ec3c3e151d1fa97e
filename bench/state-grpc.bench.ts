/*
 * The state plane's whole write path over gRPC with mutual TLS: one turn = one Append of 3
 * events (the store adds the signed_root), i.e. validation, per-partition lock, MMR, an
 * ed25519 signature and a durable (fsynced, group-committed) LevelDB write, plus the TLS
 * and HTTP/2 round trip. Each figure is printed beside a baseline measured in the same run
 * on the same disk: the same appends straight on JournalStore in process.
 *
 * - 1 conversation: turns/s and p50/p99 latency (aim: p50 under 1.5 ms);
 * - 64 conversations appending concurrently: turns/s (aim: ≥ 3,000) and p50/p99.
 *
 * The server is the real state plane process (state/main.ts, as deployed: its own event
 * loop and LevelDB), the clients share this process; the baseline runs here alone. A
 * second baseline is the transport's floor on this machine: a bare grpc-js server in
 * another process (bench/fixtures/grpc-echo-server.ts, the same certificates) answering a
 * request of a turn's size at once.
 *
 * Tracing: the same single-caller appends on a second state plane that records a server
 * span for every call (sampler always_on, OTLP/HTTP to an endpoint in this process that
 * discards, bench/fixtures/otlp-sink.ts), against the untraced plane, alternating for
 * TRACING_ROUNDS rounds after TRACING_WARMUP_ROUNDS; beside each p50, the plane's CPU per
 * append (from /proc), which other work on the machine disturbs less than latency. Both
 * planes run with the images' Node flag when this Node takes it (docs/images.md). No aim:
 * the figure is the cost of one span inside a plane, for
 * docs/observability.md#the-cost-of-tracing.
 * Bounded in count and time. Usage:
 *   npx tsx bench/state-grpc.bench.ts [directory on the disk to measure]
 */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';

import { credentials, makeGenericClientConstructor } from '@grpc/grpc-js';

import { EventKind } from '../common/event-kinds';
import { StateClient } from '../common/state-client';
import type { NewJournalEvent } from '../common/state-journal';
import { ensureDevCerts } from '../hack/lib/dev-certs';
import { createNodeEd25519Signer } from '../state/journal/node-ed25519';
import { JournalStore } from '../state/store/journal-store';
import { startStateProcess } from '../test/support/state-process';
import { ECHO_SERVICE } from './fixtures/grpc-echo-server';
import { imageNodeFlags } from './fixtures/image-node-flags';
import { startOtlpSink } from './fixtures/otlp-sink';
import { cpuMs } from './fixtures/proc';

const PHASE_MS = 4000;
const MAX_TURNS = 40_000;
const WARMUP_TURNS = 200;
const PAYLOAD_BYTES = 200;
/**
 * Rounds of the traced-against-untraced comparison, each a phase on each plane, after as
 * many untimed rounds of warm-up: a traced plane's first few thousand spans cost several
 * times what later ones do (the SDK's code is not yet compiled by the JIT).
 */
const TRACING_WARMUP_ROUNDS = 3;
/** Rounds of the traced-against-untraced comparison that are reported. */
const TRACING_ROUNDS = 5;

type AppendFn = (partition: string, head: number, events: NewJournalEvent[]) => Promise<number>;

interface PhaseResult {
  readonly turnsPerSecond: number;
  readonly p50Ms: number;
  readonly p99Ms: number;
  readonly turns: number;
}

function turnEvents(seed: number): NewJournalEvent[] {
  const payload = (n: number): Uint8Array => {
    const out = new Uint8Array(PAYLOAD_BYTES);
    for (let i = 0; i < PAYLOAD_BYTES; i++) out[i] = (i * 31 + seed + n) & 0xff;
    return out;
  };
  return [
    { kind: EventKind.MessageReceived, payload: payload(0) },
    { kind: EventKind.ToolCall, payload: payload(1) },
    { kind: EventKind.TurnComplete, payload: payload(2) },
  ];
}

function percentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor((sorted.length * p) / 100))] ?? Number.NaN;
}

/** `conversations` loops, each appending turns to its own partition, for PHASE_MS. */
async function phase(append: AppendFn, conversations: number, tag: string): Promise<PhaseResult> {
  const latencies: number[] = [];
  const heads = new Map<string, number>();
  const name = (c: number): string => `conv-${tag}-${String(c)}`;
  // Warm up: first appends create the partitions and JIT the path.
  for (let c = 0; c < conversations; c++) {
    heads.set(name(c), await append(name(c), 0, turnEvents(c)));
  }
  for (let i = 0; i < WARMUP_TURNS / conversations; i++) {
    await Promise.all(
      Array.from({ length: conversations }, async (_, c) => {
        heads.set(name(c), await append(name(c), heads.get(name(c)) ?? 0, turnEvents(i)));
      }),
    );
  }
  const start = performance.now();
  let turns = 0;
  await Promise.all(
    Array.from({ length: conversations }, async (_, c) => {
      const partition = name(c);
      while (turns < MAX_TURNS && performance.now() - start < PHASE_MS) {
        const t0 = performance.now();
        heads.set(partition, await append(partition, heads.get(partition) ?? 0, turnEvents(turns)));
        latencies.push(performance.now() - t0);
        turns += 1;
      }
    }),
  );
  const elapsed = (performance.now() - start) / 1000;
  latencies.sort((a, b) => a - b);
  return {
    turnsPerSecond: turns / elapsed,
    p50Ms: percentile(latencies, 50),
    p99Ms: percentile(latencies, 99),
    turns,
  };
}

function fmt(n: number): string {
  return n >= 100 ? Math.round(n).toLocaleString('en-US') : n.toFixed(2);
}

function line(label: string, grpc: PhaseResult, base: PhaseResult, aim: string): void {
  console.log(
    `${label}: gRPC+mTLS ${fmt(grpc.turnsPerSecond)} turns/s (p50 ${fmt(grpc.p50Ms)} ms, p99 ${fmt(grpc.p99Ms)} ms, ${String(grpc.turns)} turns)` +
      ` | in-process store ${fmt(base.turnsPerSecond)} turns/s (p50 ${fmt(base.p50Ms)} ms, p99 ${fmt(base.p99Ms)} ms)` +
      ` | gRPC/store ${(grpc.turnsPerSecond / base.turnsPerSecond).toFixed(2)} | aim: ${aim}`,
  );
}

/**
 * Starts bench/fixtures/grpc-echo-server.ts and returns an AppendFn that makes one echo
 * call with a request of a turn's size (the head is passed through).
 */
async function bareGrpc(
  pki: string,
  tls: { ca: Buffer; cert: Buffer; key: Buffer },
): Promise<{ call: AppendFn; stop: () => Promise<void> }> {
  const child = spawn(
    process.execPath,
    ['--import', 'tsx', join(__dirname, 'fixtures', 'grpc-echo-server.ts'), pki],
    { stdio: ['ignore', 'pipe', 'inherit'] },
  );
  const exited = once(child, 'exit');
  const lines = createInterface({ input: child.stdout });
  const [first] = (await Promise.race([
    once(lines, 'line'),
    exited.then(() => {
      throw new Error('the echo server exited before printing its port');
    }),
  ])) as [string];
  const Echo = makeGenericClientConstructor(ECHO_SERVICE, 'Echo');
  const client = new Echo(
    `localhost:${first}`,
    credentials.createSsl(tls.ca, tls.key, tls.cert),
  ) as unknown as {
    echo: (request: Buffer, done: (error: Error | null) => void) => void;
    close: () => void;
  };
  const request = Buffer.alloc(3 * (PAYLOAD_BYTES + 32));
  return {
    call: (_partition, head) =>
      new Promise((resolve, reject) => {
        client.echo(request, (error) => (error === null ? resolve(head) : reject(error)));
      }),
    stop: async () => {
      client.close();
      child.kill('SIGTERM');
      await exited;
    },
  };
}

/** A plane for {@link tracingCost}: how to append to it, and its process for CPU. */
interface MeasuredPlane {
  readonly append: AppendFn;
  readonly pid: number | undefined;
}

interface TracingRound {
  readonly on: PhaseResult;
  readonly off: PhaseResult;
  /** CPU of the plane's process per append, µs. */
  readonly onCpuUs: number;
  readonly offCpuUs: number;
}

/** One 1-caller phase on `plane`, with the CPU its process spent per append. */
async function measuredPhase(
  plane: MeasuredPlane,
  tag: string,
): Promise<{ result: PhaseResult; cpuUs: number }> {
  const before = cpuMs(plane.pid);
  const result = await phase(plane.append, 1, tag);
  // The warm-up appends of the phase count too: CPU cannot be split at its start.
  const appends = result.turns + 1 + WARMUP_TURNS;
  return { result, cpuUs: ((cpuMs(plane.pid) - before) * 1000) / appends };
}

/**
 * {@link TRACING_WARMUP_ROUNDS} then {@link TRACING_ROUNDS} rounds, the traced plane first in
 * every other one; the warm-up rounds are dropped.
 */
async function tracingCost(on: MeasuredPlane, off: MeasuredPlane): Promise<TracingRound[]> {
  const rounds: TracingRound[] = [];
  for (let round = 0; round < TRACING_WARMUP_ROUNDS + TRACING_ROUNDS; round++) {
    const first = round % 2 === 0 ? 'on' : 'off';
    const results: Partial<Record<'on' | 'off', { result: PhaseResult; cpuUs: number }>> = {};
    for (const which of first === 'on' ? (['on', 'off'] as const) : (['off', 'on'] as const)) {
      results[which] = await measuredPhase(which === 'on' ? on : off, `${which}-${round}`);
    }
    const { on: traced, off: untraced } = results;
    if (traced === undefined || untraced === undefined) throw new Error('unreachable');
    rounds.push({
      on: traced.result,
      off: untraced.result,
      onCpuUs: traced.cpuUs,
      offCpuUs: untraced.cpuUs,
    });
  }
  return rounds.slice(TRACING_WARMUP_ROUNDS);
}

function reportTracing(rounds: readonly TracingRound[], nodeFlags: string): void {
  const median = (values: number[]): number => {
    const sorted = [...values].sort((a, b) => a - b);
    return sorted[Math.floor(sorted.length / 2)] ?? Number.NaN;
  };
  // Medians of the rounds' own comparisons: each round measures both planes side by side.
  const overhead = median(rounds.map((r) => (r.on.p50Ms / r.off.p50Ms - 1) * 100));
  const perSpan = median(rounds.map((r) => r.onCpuUs - r.offCpuUs));
  const offCpu = median(rounds.map((r) => r.offCpuUs));
  console.log(
    `tracing (a server span per call, always_on, OTLP/HTTP to a discarding endpoint; Node ` +
      `${process.version}${nodeFlags === '' ? '' : ` ${nodeFlags}`}), 1 caller, median of ` +
      `${String(rounds.length)} rounds after ${String(TRACING_WARMUP_ROUNDS)} of warm-up: ` +
      `p50 ${overhead >= 0 ? '+' : ''}${overhead.toFixed(1)}%; state plane CPU per append ` +
      `+${Math.round(perSpan)} µs a span (untraced ${Math.round(offCpu)} µs)`,
  );
  rounds.forEach((r, i) => {
    console.log(
      `  round ${String(i + 1)}: p50 on ${fmt(r.on.p50Ms)} ms, off ${fmt(r.off.p50Ms)} ms; ` +
        `CPU per append on ${Math.round(r.onCpuUs)} µs, off ${Math.round(r.offCpuUs)} µs ` +
        `(+${Math.round(r.onCpuUs - r.offCpuUs)})`,
    );
  });
}

async function main(): Promise<void> {
  const parent = process.argv[2] ?? tmpdir();
  const dir = await mkdtemp(join(parent, 'polychrome-bench-grpc-'));
  const signer = createNodeEd25519Signer(new Uint8Array(32).fill(3));
  try {
    console.log(
      `state-grpc: disk ${dir}, load average ${loadavg()
        .map((l) => l.toFixed(2))
        .join(' ')}`,
    );
    const certs = await ensureDevCerts(join(dir, 'pki'));

    // Baseline: the same appends on JournalStore in this process.
    const baseStore = new JournalStore({ location: join(dir, 'baseline-db'), signer });
    await baseStore.open();
    const direct: AppendFn = async (partition, head, events) =>
      (await baseStore.append(partition, head, events)).head;
    const base1 = await phase(direct, 1, 'one');
    const base64 = await phase(direct, 64, 'many');
    await baseStore.close();

    const tls = {
      ca: await readFile(certs.ca.certPath),
      cert: await readFile(certs.controlPlane.certPath),
      key: await readFile(certs.controlPlane.keyPath),
    };
    // Baseline: a bare grpc-js round trip between two processes.
    const bare = await bareGrpc(join(dir, 'pki'), tls);
    const bare1 = await phase(bare.call, 1, 'one');
    const bare64 = await phase(bare.call, 64, 'many');
    await bare.stop();

    const nodeFlags = imageNodeFlags();
    const planeEnv: Record<string, string> = nodeFlags === '' ? {} : { NODE_OPTIONS: nodeFlags };
    const server = await startStateProcess(certs, join(dir, 'grpc-db'), planeEnv);
    const client = new StateClient({ address: server.address, tls });
    await client.waitForReady(10_000);
    const overGrpc: AppendFn = async (partition, head, events) =>
      (await client.append(partition, head, events)).head;
    const grpc1 = await phase(overGrpc, 1, 'one');
    const grpc64 = await phase(overGrpc, 64, 'many');
    // The transport's floor on this machine: a Head call (no disk, no signing) over the
    // same mutual TLS channel, at the same concurrency.
    const headOnly: AppendFn = async (partition) => (await client.head(partition)).head;
    const floor1 = await phase(headOnly, 1, 'one');
    const floor64 = await phase(headOnly, 64, 'many');

    const sink = await startOtlpSink();
    const tracedServer = await startStateProcess(certs, join(dir, 'traced-db'), {
      ...planeEnv,
      OTEL_EXPORTER_OTLP_ENDPOINT: sink.url,
      OTEL_TRACES_SAMPLER: 'always_on',
      OTEL_SERVICE_NAME: 'polychrome-state-bench',
    });
    const tracedClient = new StateClient({ address: tracedServer.address, tls });
    await tracedClient.waitForReady(10_000);
    const tracing = await tracingCost(
      {
        append: async (partition, head, events) =>
          (await tracedClient.append(partition, head, events)).head,
        pid: tracedServer.child.pid,
      },
      { append: overGrpc, pid: server.child.pid },
    );
    tracedClient.close();
    tracedServer.child.kill('SIGTERM');
    await tracedServer.exited;
    const exported = sink.exports();
    await sink.close();
    client.close();
    server.child.kill('SIGTERM');
    await server.exited;

    line('1 conversation', grpc1, base1, 'p50 < 1.5 ms');
    line('64 conversations', grpc64, base64, '>= 3,000 turns/s');
    console.log(
      `bare grpc-js round trip between two processes (mTLS, no Polychrome): 1 caller p50 ` +
        `${fmt(bare1.p50Ms)} ms, 64 callers ${fmt(bare64.turnsPerSecond)} calls/s`,
    );
    console.log(
      `state plane Head calls (no disk, no signing): 1 caller p50 ${fmt(floor1.p50Ms)} ms, ` +
        `64 callers ${fmt(floor64.turnsPerSecond)} calls/s`,
    );
    console.log(
      `1 conversation: p50 ${fmt(grpc1.p50Ms)} ms = bare round trip ${fmt(bare1.p50Ms)} + ` +
        `in-process append ${fmt(base1.p50Ms)} + ${fmt(grpc1.p50Ms - bare1.p50Ms - base1.p50Ms)} ms of the ` +
        `state plane's own gRPC path`,
    );
    reportTracing(tracing, nodeFlags);
    if (exported === 0) throw new Error('the traced state plane exported no spans');
    const ok = grpc1.p50Ms < 1.5 && grpc64.turnsPerSecond >= 3000;
    console.log(`state-grpc: ${ok ? 'within aim' : 'BELOW AIM'}`);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
