/*
 * Turns on the whole real stack: what Polychrome adds to a turn, how many turns/s 50
 * conversations get, and how fast one replica fans committed events out to 1,000 SSE
 * streams. Started here, all on loopback: a local Kubernetes control plane (kube-apiserver
 * and etcd from hack/bin), the real state-plane process, one real control-plane process
 * (public API + turn coordinator + reconciler, as the operator's ServiceAccount), hack's
 * local node running each harness pod as a real process, and the Messages API server with
 * the echo responder answering at once (no delay): the model's own time is near zero, so
 * what remains is Polychrome's. The stack is test/integration/support/turn-stack.ts, given
 * this benchmark's cluster.
 *
 * 1. Latency: one conversation, sequential POST .../messages (warm-up first), p50/p99 from
 *    POST to reply. Baselines measured in the same run:
 *    (a) the raw durable commit: state-plane Appends over mutual TLS as the control plane's
 *        identity, replaying the batches a real turn of this run wrote (same kinds and
 *        payloads) into a fresh `conv-<uuid>` partition;
 *    (b) the bare model round trip: the Anthropic SDK in this process calling the Messages
 *        API server (streaming, as the harness does), the floor of the harness's call.
 *    A turn without tools makes two durable commits, each closed by the state plane's
 *    `signed_root`: batch one (`message_received`, `turn_dispatched`) and batch two (the
 *    reply's `model_call`, carried there, and `turn_complete`). So
 *      added = turn p50 − model p50 − 2 × commit p50   (aim: under 10 ms).
 *    The commits' share of turn time comes from the control plane's own histogram
 *    `polychrome_journal_commit_duration_seconds`, read before and after.
 * 2. SSE fan-out: N streams (plain node http, in a child process: bench/fixtures/
 *    sse-clients.ts) on the one replica follow one conversation while turns are posted
 *    (the next turn once every stream has the last one). Delivery delay of a committed
 *    event on a stream = when that stream received it − when a direct state-plane follow
 *    in this process (StateClient `read` with `follow`, mutual TLS) received it. The state
 *    plane wakes its followers when the batch is durable, as it answers the Append, so
 *    the direct follow stands for "the append was acknowledged"; the delay is what the
 *    control plane's stream path adds (its own follow per stream, JSON, HTTP). Both clocks
 *    are CLOCK_MONOTONIC (process.hrtime). Baseline: the same with 1 stream. Aim: p99 under
 *    100 ms for 1,000 streams. Also the control plane's RSS (from /proc) and the fd limit.
 * 3. Throughput: 50 conversations (50 harness processes, started together, Ready within a
 *    bound), one client each posting sequentially for a fixed time: turns/s, p50/p99.
 *    Baseline: the one-conversation rate of phase 1 (1 / mean latency).
 *
 * Where a turn's time goes is printed beside it: the stretches between the turn's two
 * commits as a direct follow sees them, CPU per turn of each process (from /proc), the
 * Kubernetes API requests per turn (kube-apiserver's apiserver_request_total) and the
 * control plane's reconcile passes.
 *
 * The harness pods get addresses of a loopback block other than 127.0.0.0/16 (see
 * reserveLoopbackBlocks), so a test stack running meanwhile does not share them. Everything
 * is bounded in count and time (a watchdog ends the run; each cleanup step is bounded too)
 * and cleaned up, on failure and on SIGINT/SIGTERM too. Needs an open-file limit above the
 * stream count (one socket per stream in the control plane and in the client process).
 * Usage (defaults are the full sizes; about 6 minutes on 2 cores):
 *   npx tsx bench/turns.bench.ts [--turns=200] [--warmup=20] [--conversations=50]
 *     [--seconds=20] [--streams=1000] [--stream-turns=20] [--rounds=3] [--plane-warmup=0]
 *     [--small] [--tracing [--control]]
 * --small: 20 turns after 5, 4 conversations for 5 s, 50 streams over 5 turns.
 * --tracing: only phase 1b, tracing on against off (--rounds rounds of --turns turns each,
 *   after --plane-warmup turns on other conversations and --warmup on the measured one);
 *   POLYCHROME_BENCH_CPU_PROF_DIR=<dir> also writes every plane's CPU profile into
 *   <dir>/on and <dir>/off. --control adds a third stack, untraced like the second, to the
 *   same rotation: how far two stacks with tracing off on both differ in that run, the floor
 *   under which an on/off figure means nothing.
 * --kube-sse: only phase 2b, SSE delivery through the Kubernetes door against the public
 *   API, in the same run: the control plane serves its door (docs/kube-api.md), registered
 *   with this cluster's kube-apiserver as make dev registers it (hack/lib/kube-door.ts), and
 *   --rounds rounds each open --streams streams (default 100 here) on the public API
 *   (`/v1/conversations/{uid}/stream`, bearer token) and on the aggregated path
 *   (`/apis/api.polychrome.dev/v1alpha1/namespaces/NS/conversations/NAME/log` on
 *   kube-apiserver, as a Kubernetes user with a client certificate whom RBAC allows `get
 *   conversations/log`), the order swapped every round, over --stream-turns turns each. The
 *   delay is measured as in phase 2, against the same direct state-plane follow.
 */
import Anthropic from '@anthropic-ai/sdk';
import { CustomObjectsApi, KubeConfig, RbacAuthorizationV1Api } from '@kubernetes/client-node';
import { spawn, type ChildProcessByStdio } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { Agent } from 'node:http';
import { get as httpsGet, type RequestOptions as HttpsRequestOptions } from 'node:https';
import { availableParallelism, loadavg } from 'node:os';
import { join } from 'node:path';
import { createInterface, type Interface } from 'node:readline';
import type { Readable, Writable } from 'node:stream';

import { loadStateClientTls } from '../common/state-channel';
import { StateClient } from '../common/state-client';
import type { NewJournalEvent } from '../common/state-journal';
import { EventKind } from '../common/event-kinds';
import { DEFAULT_ANTHROPIC_MODEL } from '../common/model/anthropic-provider';
import { repoRoot } from '../hack/lib/paths';
import type { LocalCluster } from '../hack/lib/local-cluster';
import { freePort, pollUntil, sleep } from '../hack/lib/processes';
import {
  applyKubeDoorRbac,
  ensureDoorCertificate,
  registerKubeDoor,
  type DoorCertificate,
} from '../hack/lib/kube-door';
import { field } from '../test/integration/support/kube';
import { imageNodeFlags } from './fixtures/image-node-flags';
import { startOtlpSink } from './fixtures/otlp-sink';
import { cpuMs } from './fixtures/proc';
import { runBench } from './fixtures/bench-main';
import { controlPlaneStateClient, lastTurnBatches } from './fixtures/journal-batches';
import { NO_CALLER_LIMITS, post, startBenchCluster, type Client } from './fixtures/bench-stack';
import { hrMs, mean, ms, quantile, timed, verdict } from './fixtures/stats';
import { createConversation } from './fixtures/conversations';
import {
  DEFAULT_CONVERSATION_SPEC,
  isReady,
  startTurnStack,
  type TurnStack,
} from '../test/integration/support/turn-stack';
import type { MessagesApiServer } from '../test/support/messages-api-server';

// ---- sizes and bounds ----

interface Sizes {
  readonly turns: number;
  readonly warmup: number;
  readonly conversations: number;
  readonly seconds: number;
  readonly streams: number;
  readonly streamTurns: number;
  /** Rounds of the tracing comparison (phase 1b). */
  readonly rounds: number;
  /**
   * Phase 1b: turns on other conversations first, so the shared planes (control plane,
   * state plane) are past the JIT's warm-up, as in a long-running deployment, while the
   * measured conversation keeps a short history and its own harness.
   */
  readonly planeWarmup: number;
}

/** Runs only the tracing comparison (phase 1b) on the one-conversation stack. */
const TRACING_ONLY = '--tracing';
/** With {@link TRACING_ONLY}: a second untraced stack, the comparison's noise floor. */
const TRACING_CONTROL = '--control';
/** Runs only the SSE comparison of the two doors (phase 2b). */
const KUBE_SSE_ONLY = '--kube-sse';

/** Streams per door in phase 2b unless --streams says otherwise. */
const KUBE_SSE_STREAMS = 100;

function parseSizes(argv: readonly string[]): Sizes {
  const small = argv.includes('--small');
  const sizes: Record<keyof Sizes, number> = small
    ? {
        turns: 20,
        warmup: 5,
        conversations: 4,
        seconds: 5,
        streams: 50,
        streamTurns: 5,
        rounds: 3,
        planeWarmup: 0,
      }
    : {
        turns: 200,
        warmup: 20,
        conversations: 50,
        seconds: 20,
        streams: 1000,
        streamTurns: 20,
        rounds: 3,
        planeWarmup: 0,
      };
  const names: Record<string, keyof Sizes> = {
    turns: 'turns',
    warmup: 'warmup',
    conversations: 'conversations',
    seconds: 'seconds',
    streams: 'streams',
    'stream-turns': 'streamTurns',
    rounds: 'rounds',
    'plane-warmup': 'planeWarmup',
  };
  if (argv.includes(KUBE_SSE_ONLY)) sizes.streams = KUBE_SSE_STREAMS;
  for (const arg of argv) {
    if (
      arg === '--small' ||
      arg === TRACING_ONLY ||
      arg === TRACING_CONTROL ||
      arg === KUBE_SSE_ONLY
    )
      continue;
    const match = /^--([a-z-]+)=(\d+)$/u.exec(arg);
    const key = match === null ? undefined : names[match[1] ?? ''];
    if (match === null || key === undefined) {
      throw new Error(`unknown argument ${arg}; see the usage at the top of bench/turns.bench.ts`);
    }
    sizes[key] = Number(match[2]);
  }
  if (
    sizes.turns < 1 ||
    sizes.conversations < 1 ||
    sizes.streams < 1 ||
    sizes.streamTurns < 1 ||
    sizes.rounds < 1
  ) {
    throw new Error('turns, conversations, streams, stream-turns and rounds must be at least 1');
  }
  if (
    sizes.seconds > 120 ||
    sizes.streams > 5000 ||
    sizes.conversations > 200 ||
    sizes.planeWarmup > 10_000
  ) {
    throw new Error(
      'bounded: at most 120 seconds, 5,000 streams, 200 conversations and 10,000 plane warm-up turns',
    );
  }
  return sizes;
}

/** The whole run; past it the watchdog stops everything and exits non-zero. */
const RUN_LIMIT_MS = 25 * 60_000;
/** Starting every harness of the throughput phase. */
const HARNESS_START_LIMIT_MS = 300_000;
/** Every stream having a turn's last event. */
const FAN_OUT_WAIT_MS = 20_000;
const BASELINE_SAMPLES = 200;
const OWNER = 'bench:owner';

/** kube-apiserver and etcd of this run's cluster. */
let clusterPids: number[] = [];

const progress = (line: string): void => void process.stderr.write(`turns: ${line}\n`);

// ---- the control plane's metrics ----

type Scrape = Map<string, number>;

async function scrape(port: number): Promise<Scrape> {
  const res = await fetch(`http://127.0.0.1:${port}/metrics`, {
    signal: AbortSignal.timeout(10_000),
  });
  const text = await res.text();
  const out: Scrape = new Map();
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const cut = line.lastIndexOf(' ');
    out.set(line.slice(0, cut), Number(line.slice(cut + 1)));
  }
  return out;
}

/** The sum of every series of a metric (all label values). */
function sumOf(scraped: Scrape, name: string): number {
  let sum = 0;
  for (const [key, value] of scraped) {
    if (key === name || key.startsWith(`${name}{`)) sum += value;
  }
  return sum;
}

interface HistogramDelta {
  readonly count: number;
  readonly sumSeconds: number;
  /** [upper bound in seconds, observations at or below it], ascending. */
  readonly buckets: readonly (readonly [number, number])[];
}

function histogramDelta(before: Scrape, after: Scrape, name: string): HistogramDelta {
  const diff = (key: string): number => (after.get(key) ?? 0) - (before.get(key) ?? 0);
  const buckets: [number, number][] = [];
  for (const key of after.keys()) {
    const match = new RegExp(`^${name}_bucket\\{le="([^"]+)"\\}$`, 'u').exec(key);
    if (match === null) continue;
    const le = match[1] === '+Inf' ? Number.POSITIVE_INFINITY : Number(match[1]);
    buckets.push([le, diff(key)]);
  }
  buckets.sort((a, b) => a[0] - b[0]);
  return { count: diff(`${name}_count`), sumSeconds: diff(`${name}_sum`), buckets };
}

/** The bucket range holding the median, e.g. "1–2.5 ms". */
function medianBucket(h: HistogramDelta): string {
  let lower = 0;
  for (const [le, cumulative] of h.buckets) {
    if (cumulative >= h.count / 2) {
      const hi = Number.isFinite(le) ? `${le * 1000} ms` : '∞';
      return `${lower * 1000}–${hi}`;
    }
    lower = le;
  }
  return 'n/a';
}

// ---- processes ----

function rssMiB(pid: number | undefined): number {
  if (pid === undefined) return Number.NaN;
  try {
    const status = readFileSync(`/proc/${pid}/status`, 'utf8');
    return Number(/VmRSS:\s+(\d+)/u.exec(status)?.[1] ?? Number.NaN) / 1024;
  } catch {
    return Number.NaN;
  }
}

/** How many files (sockets included) a process has open. */
function openFiles(pid: number | undefined): number {
  if (pid === undefined) return Number.NaN;
  try {
    return readdirSync(`/proc/${pid}/fd`).length;
  } catch {
    return Number.NaN;
  }
}

/** The soft limit on open files of this process (children inherit it). */
function openFileLimit(): number {
  try {
    const limits = readFileSync('/proc/self/limits', 'utf8');
    const match = /^Max open files\s+(\S+)/mu.exec(limits);
    return match?.[1] === 'unlimited' ? Number.POSITIVE_INFINITY : Number(match?.[1]);
  } catch {
    return Number.NaN;
  }
}

/** The processes of the stack by role, for CPU accounting. */
type CpuGroups = Readonly<Record<string, readonly (number | undefined)[]>>;

function cpuSnapshot(groups: CpuGroups): Map<string, number> {
  const out = new Map<string, number>();
  for (const [group, pids] of Object.entries(groups)) {
    out.set(
      group,
      group === 'bench'
        ? (process.cpuUsage().user + process.cpuUsage().system) / 1000
        : pids.reduce<number>((sum, pid) => sum + (cpuMs(pid) || 0), 0),
    );
  }
  return out;
}

/** "control plane 12.3 ms, ..." per turn between two snapshots, and the total. */
function cpuPerTurn(
  before: Map<string, number>,
  after: Map<string, number>,
  turns: number,
): { text: string; totalMs: number } {
  let total = 0;
  const parts: string[] = [];
  for (const [group, end] of after) {
    const used = (end - (before.get(group) ?? 0)) / turns;
    total += used;
    parts.push(`${group} ${used.toFixed(1)}`);
  }
  return { text: `${parts.join(', ')} ms`, totalMs: total };
}

async function cpuGroups(stack: TurnStack, harnesses: readonly string[]): Promise<CpuGroups> {
  const pids = await Promise.all(harnesses.map(async (name) => (await stack.harness(name)).pid));
  return {
    'control plane': [stack.controlPlane(0).child?.pid],
    'state plane': [stack.state.process?.child.pid],
    [harnesses.length === 1 ? 'harness' : 'harnesses']: pids,
    'kube-apiserver+etcd': clusterPids,
    bench: [process.pid],
  };
}

/**
 * Requests the API server has served so far by "verb resource[/subresource]", from its
 * own `apiserver_request_total` (every client together: the control plane, the node, us).
 */
async function apiserverRequests(kc: KubeConfig): Promise<Map<string, number>> {
  const options: HttpsRequestOptions = {};
  await kc.applyToHTTPSOptions(options);
  const server = kc.getCurrentCluster()?.server ?? '';
  const text = await new Promise<string>((resolve, reject) => {
    const req = httpsGet(`${server}/metrics`, { ...options, timeout: 10_000 }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (body += chunk));
      res.on('end', () => resolve(body));
      res.on('error', reject);
    });
    req.on('timeout', () => req.destroy(new Error('kube-apiserver /metrics timed out')));
    req.on('error', reject);
  });
  const out = new Map<string, number>();
  for (const line of text.split('\n')) {
    if (!line.startsWith('apiserver_request_total{')) continue;
    const label = (name: string): string =>
      new RegExp(`[{,]${name}="([^"]*)"`, 'u').exec(line)?.[1] ?? '';
    const sub = label('subresource');
    const key = `${label('verb')} ${label('resource')}${sub === '' ? '' : `/${sub}`}`;
    out.set(key, (out.get(key) ?? 0) + Number(line.slice(line.lastIndexOf(' ') + 1)));
  }
  return out;
}

/** "12.0 GET conversations, ..." per turn, the largest first, and the total per turn. */
function requestsPerTurn(
  before: Map<string, number>,
  after: Map<string, number>,
  turns: number,
): string {
  const rows: [string, number][] = [];
  let total = 0;
  for (const [key, end] of after) {
    const n = (end - (before.get(key) ?? 0)) / turns;
    if (n <= 0) continue;
    rows.push([key, n]);
    total += n;
  }
  rows.sort((a, b) => b[1] - a[1]);
  const top = rows
    .filter(([, n]) => n >= 0.05)
    .map(([key, n]) => `${n.toFixed(1)} ${key}`)
    .join(', ');
  return `${total.toFixed(1)} (${top})`;
}

/**
 * A direct follow of a conversation's journal on the state plane, from its current head:
 * when each committed event reached this process.
 */
class DirectFollow {
  readonly committed = new Map<number, { readonly at: number; readonly kind: string }>();
  private readonly stop = new AbortController();
  private readonly done: Promise<void>;

  private constructor(
    private readonly client: StateClient,
    uid: string,
    readonly head: number,
  ) {
    const partition = `conv-${uid}`;
    this.done = (async () => {
      for await (const entry of client.read(partition, head, 0, {
        follow: true,
        signal: this.stop.signal,
      })) {
        this.committed.set(entry.position, { at: hrMs(), kind: entry.kind });
      }
    })().catch(() => undefined);
  }

  static async open(stack: TurnStack, uid: string): Promise<DirectFollow> {
    const head = (await stack.journal(uid)).length;
    const client = new StateClient({
      address: stack.state.address,
      tls: await loadStateClientTls({
        ca: stack.certs.ca.certPath,
        cert: stack.certs.verifier.certPath,
        key: stack.certs.verifier.keyPath,
      }),
    });
    return new DirectFollow(client, uid, head);
  }

  /** When the event at `position` arrived, once it has (within 10 s). */
  async at(position: number, kind?: string): Promise<number> {
    const event = await pollUntil(
      `position ${position} on the direct follow`,
      () => Promise.resolve(this.committed.get(position)),
      { timeoutMs: 10_000, intervalMs: 2 },
    );
    if (kind !== undefined && event.kind !== kind) {
      throw new Error(`expected ${kind} at position ${position}, found ${event.kind}`);
    }
    return event.at;
  }

  async close(): Promise<void> {
    this.stop.abort();
    await this.done;
    this.client.close();
  }
}

// ---- the public API ----

// ---- phase 1: latency ----

interface LatencyResult {
  readonly samples: number[];
  readonly commits: HistogramDelta;
  readonly turnDurations: HistogramDelta;
  /** Per turn, from the direct follow: where the time between POST and reply went. */
  readonly segments: Record<'toBatchOne' | 'toBatchTwo' | 'toReply', number[]>;
  readonly cpu: { readonly text: string; readonly totalMs: number };
  /** Kubernetes API requests per turn (all clients), by verb and resource. */
  readonly kube: string;
  /** Reconcile passes of the control plane per turn. */
  readonly reconciles: number;
}

/** The result of {@link tracingPhase}, per round and pooled. */
interface TracingResult {
  readonly turns: number;
  readonly rounds: readonly {
    readonly onP50: number;
    readonly offP50: number;
    /** CPU per turn of the three planes, tracing on and off. */
    readonly onCpuMs: number;
    readonly offCpuMs: number;
  }[];
  readonly onP50: number;
  readonly offP50: number;
  readonly onP99: number;
  readonly offP99: number;
  readonly onCpu: string;
  readonly offCpu: string;
  readonly exports: number;
  /** Bytes the planes exported, and spans by "service name" (OTLP/JSON only). */
  readonly bytes: number;
  readonly spans: ReadonlyMap<string, number>;
  /**
   * With {@link TRACING_CONTROL}: the second untraced stack's p50 per round and pooled, and
   * the p50 of both untraced stacks' turns together (the traced one started between them).
   */
  readonly control?: {
    readonly p50: number;
    readonly rounds: readonly number[];
    readonly untracedP50: number;
  };
}

/** The three planes' processes of a stack (not the shared cluster nor this process). */
async function planeGroups(stack: TurnStack, harness: string): Promise<CpuGroups> {
  const {
    bench: _bench,
    'kube-apiserver+etcd': _cluster,
    ...planes
  } = await cpuGroups(stack, [harness]);
  return planes;
}

/**
 * Turn latency with tracing on against off in the same run: two stacks started alike here
 * (each its own state plane, control plane and harness on the same cluster and model
 * server; the bench's first stack idles meanwhile), of which one exports every
 * span over OTLP/HTTP to an endpoint in this process that discards them; turns alternate
 * between the stacks so drift and load from other work fall on both alike, and the whole
 * is repeated `sizes.rounds` times (each round reports its own p50s and CPU per turn).
 * With POLYCHROME_BENCH_CPU_PROF_DIR set, every process of the traced stack writes a CPU
 * profile into its `on/` subdirectory when it exits (the untraced one, and the bench's
 * first stack, into `off/`; a control stack into `control/`).
 */
async function tracingPhase(
  cluster: LocalCluster,
  messages: MessagesApiServer,
  main: Client,
  sizes: Sizes,
  cleanups: (() => Promise<unknown>)[],
  dirs: string[],
): Promise<TracingResult> {
  // With OTEL_EXPORTER_OTLP_PROTOCOL=http/json the sink also counts the spans by service
  // and name (the default protobuf is only counted in bytes).
  const sink = await startOtlpSink();
  cleanups.push(() => sink.close());
  const otel = {
    OTEL_EXPORTER_OTLP_ENDPOINT: sink.url,
    // Every span recorded and exported: the worst case. POLYCHROME_BENCH_TRACES_SAMPLER
    // measures another (always_off: context propagation alone, nothing recorded).
    OTEL_TRACES_SAMPLER: process.env.POLYCHROME_BENCH_TRACES_SAMPLER ?? 'always_on',
    // e.g. 0.1 with parentbased_traceidratio, the sampling docs/observability.md advises.
    ...(process.env.POLYCHROME_BENCH_TRACES_SAMPLER_ARG === undefined
      ? {}
      : { OTEL_TRACES_SAMPLER_ARG: process.env.POLYCHROME_BENCH_TRACES_SAMPLER_ARG }),
    OTEL_EXPORTER_OTLP_PROTOCOL: process.env.POLYCHROME_BENCH_OTLP_PROTOCOL ?? 'http/protobuf',
    ...profileEnv('on'),
  };
  const startTraced = async (): Promise<Client> => {
    const traced = await startTurnStack({
      cluster,
      messages,
      namespacePrefix: 'bench-traced',
      timeoutMs: 180_000,
      leaseDurationMs: 15_000,
      controlPlaneEnv: { POLYCHROME_LEASE_RENEW_MS: '5000', ...NO_CALLER_LIMITS, ...otel },
      harnessEnv: otel,
      stateEnv: otel,
    });
    cleanups.push(() => traced.stop());
    dirs.push(traced.dir);
    return { stack: traced, token: await traced.mintToken(OWNER), agent: main.agent };
  };
  // The untraced side is a stack started here as the traced one is, not the bench's first
  // stack: that one, started first and holding other conversations, measured 1.4 to 2.5%
  // slower than a second untraced stack, which flattered tracing by as much. With
  // --control the traced stack starts between the two untraced ones, so an effect of the
  // order the stacks were started in falls on both sides of it.
  const withControl = process.argv.includes(TRACING_CONTROL);
  const first = withControl
    ? await untracedStack(cluster, messages, main, 'bench-untraced', 'off', cleanups, dirs)
    : undefined;
  const on = await startTraced();
  const off =
    first ??
    (await untracedStack(cluster, messages, main, 'bench-untraced', 'off', cleanups, dirs));
  const control = withControl
    ? await untracedStack(cluster, messages, main, 'bench-control', 'control', cleanups, dirs)
    : undefined;
  const stack = on.stack;
  const onUid = await stack.createConversation('bench-traced', { owner: OWNER }, 120_000);
  const offUid = await off.stack.createConversation('bench-untraced', { owner: OWNER }, 120_000);
  const controlUid = await control?.stack.createConversation(
    'bench-control',
    { owner: OWNER },
    120_000,
  );
  const onGroups = await planeGroups(stack, 'bench-traced');
  const offGroups = await planeGroups(off.stack, 'bench-untraced');
  await warmPlanes(on, off, sizes.planeWarmup);
  for (let i = 0; i < sizes.warmup; i++) {
    await post(on, onUid, `warm-up ${i}`, `tr-w-${i}`);
    await post(off, offUid, `warm-up ${i}`, `un-w-${i}`);
    if (control !== undefined && controlUid !== undefined)
      await post(control, controlUid, `warm-up ${i}`, `ct-w-${i}`);
  }
  const onSamples: number[] = [];
  const offSamples: number[] = [];
  const controlSamples: number[] = [];
  const controlRounds: number[] = [];
  const rounds: TracingResult['rounds'][number][] = [];
  const onCpuStart = cpuSnapshot(onGroups);
  const offCpuStart = cpuSnapshot(offGroups);
  for (let round = 0; round < sizes.rounds; round++) {
    const onRound: number[] = [];
    const offRound: number[] = [];
    const controlRound: number[] = [];
    const onCpuBefore = cpuSnapshot(onGroups);
    const offCpuBefore = cpuSnapshot(offGroups);
    const arms: (readonly [Client, string, number[], string])[] = [
      [on, onUid, onRound, 'tr'],
      [off, offUid, offRound, 'un'],
    ];
    if (control !== undefined && controlUid !== undefined)
      arms.push([control, controlUid, controlRound, 'ct']);
    for (let i = 0; i < sizes.turns; i++) {
      // Each goes first in turn: a later one in a set can find the machine busier.
      const shift = i % arms.length;
      for (const [client, uid, samples, key] of [...arms.slice(shift), ...arms.slice(0, shift)]) {
        const started = hrMs();
        await post(client, uid, `bench turn ${round}.${i}`, `${key}-${round}-${i}`);
        samples.push(hrMs() - started);
      }
    }
    if (control !== undefined) {
      controlRounds.push(quantile(controlRound, 0.5));
      controlSamples.push(...controlRound);
    }
    rounds.push({
      onP50: quantile(onRound, 0.5),
      offP50: quantile(offRound, 0.5),
      onCpuMs: cpuPerTurn(onCpuBefore, cpuSnapshot(onGroups), sizes.turns).totalMs,
      offCpuMs: cpuPerTurn(offCpuBefore, cpuSnapshot(offGroups), sizes.turns).totalMs,
    });
    onSamples.push(...onRound);
    offSamples.push(...offRound);
  }
  const all = sizes.turns * sizes.rounds;
  return {
    turns: sizes.turns,
    rounds,
    onP50: quantile(onSamples, 0.5),
    offP50: quantile(offSamples, 0.5),
    onP99: quantile(onSamples, 0.99),
    offP99: quantile(offSamples, 0.99),
    onCpu: cpuPerTurn(onCpuStart, cpuSnapshot(onGroups), all).text,
    offCpu: cpuPerTurn(offCpuStart, cpuSnapshot(offGroups), all).text,
    exports: sink.exports(),
    bytes: sink.bytes(),
    spans: sink.spans,
    ...(control === undefined
      ? {}
      : {
          control: {
            p50: quantile(controlSamples, 0.5),
            rounds: controlRounds,
            untracedP50: quantile([...offSamples, ...controlSamples], 0.5),
          },
        }),
  };
}

/**
 * A stack started as the traced one is but without OTEL_* (its Node flags only): the
 * untraced side of {@link tracingPhase}, and with {@link TRACING_CONTROL} a second one, to
 * show what separates two stacks that differ in nothing. `profile` names its CPU profiles'
 * directory.
 */
async function untracedStack(
  cluster: LocalCluster,
  messages: MessagesApiServer,
  main: Client,
  namespacePrefix: string,
  profile: string,
  cleanups: (() => Promise<unknown>)[],
  dirs: string[],
): Promise<Client> {
  const stack = await startTurnStack({
    cluster,
    messages,
    namespacePrefix,
    timeoutMs: 180_000,
    leaseDurationMs: 15_000,
    controlPlaneEnv: {
      POLYCHROME_LEASE_RENEW_MS: '5000',
      ...NO_CALLER_LIMITS,
      ...profileEnv(profile),
    },
    harnessEnv: profileEnv(profile),
    stateEnv: profileEnv(profile),
  });
  cleanups.push(() => stack.stop());
  dirs.push(stack.dir);
  return { stack, token: await stack.mintToken(OWNER), agent: main.agent };
}

/**
 * The Node flags of the planes: POLYCHROME_BENCH_NODE_OPTIONS when set (empty for none),
 * else the images' flag when this Node takes it (22.7 and later; Node 20 refuses it).
 */
function planeNodeOptions(): string {
  const chosen = process.env.POLYCHROME_BENCH_NODE_OPTIONS;
  if (chosen !== undefined) return chosen.trim();
  return imageNodeFlags();
}

/**
 * The environment both stacks' planes get: NODE_OPTIONS of {@link planeNodeOptions}, and
 * with POLYCHROME_BENCH_CPU_PROF_DIR a CPU profile of each process written into
 * `<dir>/<name>` when it exits cleanly.
 */
function profileEnv(name: string): Record<string, string> {
  const dir = process.env.POLYCHROME_BENCH_CPU_PROF_DIR;
  const options = planeNodeOptions();
  // NODE_OPTIONS refuses --cpu-prof: an --import'ed module runs the profiler instead.
  const profile =
    dir === undefined || dir === ''
      ? undefined
      : `--import=${join(repoRoot, 'bench', 'fixtures', 'cpu-profile.mjs')}`;
  const nodeOptions = [options, profile].filter((o) => o !== undefined && o !== '').join(' ');
  return {
    ...(nodeOptions === '' ? {} : { NODE_OPTIONS: nodeOptions }),
    ...(profile === undefined ? {} : { POLYCHROME_CPU_PROFILE_DIR: join(dir ?? '', name) }),
  };
}

/** Turns on a conversation before a new one takes over (its history stays short). */
const PLANE_WARMUP_PER_CONVERSATION = 400;

/**
 * `turns` turns on each stack, alternating, on warm-up conversations of their own
 * ({@link Sizes.planeWarmup}); their harnesses stay, idle, while the measured turns run.
 */
async function warmPlanes(on: Client, off: Client, turns: number): Promise<void> {
  if (turns === 0) return;
  const conversations = Math.ceil(turns / PLANE_WARMUP_PER_CONVERSATION);
  progress(`tracing: ${turns} turns on ${conversations} warm-up conversations a stack first`);
  for (let c = 0; c < conversations; c++) {
    const [onUid, offUid] = await Promise.all([
      on.stack.createConversation(`bench-traced-warm-${c}`, { owner: OWNER }, 120_000),
      off.stack.createConversation(`bench-untraced-warm-${c}`, { owner: OWNER }, 120_000),
    ]);
    const count = Math.min(
      PLANE_WARMUP_PER_CONVERSATION,
      turns - c * PLANE_WARMUP_PER_CONVERSATION,
    );
    for (let i = 0; i < count; i++) {
      await post(on, onUid, `plane warm-up ${i}`, `tr-pw-${c}-${i}`);
      await post(off, offUid, `plane warm-up ${i}`, `un-pw-${c}-${i}`);
    }
  }
}

/** Prints the tracing comparison of {@link tracingPhase}; true when it is within its aim. */
function reportTracing(traced: TracingResult): boolean {
  const overhead = (traced.onP50 / traced.offP50 - 1) * 100;
  console.log(
    `tracing on (OTLP/HTTP to an in-process endpoint that discards, sampler ${process.env.POLYCHROME_BENCH_TRACES_SAMPLER ?? 'always_on'}${process.env.POLYCHROME_BENCH_TRACES_SAMPLER_ARG === undefined ? '' : ` ${process.env.POLYCHROME_BENCH_TRACES_SAMPLER_ARG}`}; planes on Node ${process.version}${planeNodeOptions() === '' ? '' : ` ${planeNodeOptions()}`}) against off, ${traced.rounds.length} rounds of ${traced.turns} turns each, alternating: p50 on ${ms(traced.onP50)}, off ${ms(traced.offP50)}, overhead ${overhead.toFixed(1)}% (aim < 5%) ${verdict(overhead < 5)}; p99 on ${ms(traced.onP99)}, off ${ms(traced.offP99)}; ${traced.exports} export requests`,
  );
  traced.rounds.forEach((round, i) => {
    console.log(
      `  round ${i + 1}: p50 on ${ms(round.onP50)}, off ${ms(round.offP50)} (${((round.onP50 / round.offP50 - 1) * 100).toFixed(1)}%); CPU per turn of the planes on ${round.onCpuMs.toFixed(1)} ms, off ${round.offCpuMs.toFixed(1)} ms (${((round.onCpuMs / round.offCpuMs - 1) * 100).toFixed(1)}%)`,
    );
  });
  console.log(`  CPU per turn, on: ${traced.onCpu}; off: ${traced.offCpu}`);
  if (traced.control !== undefined) {
    const { p50, rounds, untracedP50 } = traced.control;
    const percent = (a: number, b: number): string => `${((a / b - 1) * 100).toFixed(1)}%`;
    console.log(
      `  control, a second stack with tracing off: p50 ${ms(p50)} against off ${ms(traced.offP50)} (${percent(p50, traced.offP50)}); per round ${rounds.map((value, i) => percent(value, traced.rounds[i]?.offP50 ?? value)).join(', ')}. An on/off figure within this of the aim does not decide it`,
    );
    console.log(
      `  on against both untraced stacks' turns together (started before and after it): p50 ${ms(traced.onP50)} against ${ms(untracedP50)} (${percent(traced.onP50, untracedP50)})`,
    );
  }
  const turns = traced.turns * traced.rounds.length;
  const perTurn = [...traced.spans]
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([name, count]) => `${name} ${(count / turns).toFixed(1)}`);
  console.log(
    `  exported ${(traced.bytes / turns / 1024).toFixed(1)} KiB per turn${perTurn.length === 0 ? '' : `; spans per turn (warm-up included): ${perTurn.join(', ')}`}`,
  );
  return overhead < 5;
}

async function latencyPhase(client: Client, uid: string, sizes: Sizes): Promise<LatencyResult> {
  const { stack } = client;
  const port = stack.controlPlane(0).healthPort;
  for (let i = 0; i < sizes.warmup; i++) await post(client, uid, `warm-up ${i}`, `lat-w-${i}`);
  const follow = await DirectFollow.open(stack, uid);
  try {
    const groups = await cpuGroups(stack, ['bench-0']);
    const before = await scrape(port);
    const kubeBefore = await apiserverRequests(stack.admin);
    const cpuBefore = cpuSnapshot(groups);
    const turns: { started: number; arrived: number; at: number }[] = [];
    for (let i = 0; i < sizes.turns; i++) {
      const started = hrMs();
      const reply = await post(client, uid, `bench turn ${i}`, `lat-${i}`);
      turns.push({ started, arrived: hrMs(), at: reply.requestedAt });
    }
    const cpuAfter = cpuSnapshot(groups);
    const after = await scrape(port);
    const kubeAfter = await apiserverRequests(stack.admin);
    const segments: LatencyResult['segments'] = { toBatchOne: [], toBatchTwo: [], toReply: [] };
    // Positions of a turn: 0 message_received, 1 turn_dispatched, 2 signed_root (batch
    // one), 3 model_call (the reply, carried with batch two), 4 turn_complete, 5
    // signed_root (batch two).
    for (const turn of turns) {
      const one = await follow.at(turn.at + 2, EventKind.SignedRoot);
      const two = await follow.at(turn.at + 5, EventKind.SignedRoot);
      segments.toBatchOne.push(one - turn.started);
      segments.toBatchTwo.push(two - one);
      segments.toReply.push(turn.arrived - two);
    }
    return {
      samples: turns.map((t) => t.arrived - t.started),
      commits: histogramDelta(before, after, 'polychrome_journal_commit_duration_seconds'),
      turnDurations: histogramDelta(before, after, 'polychrome_turn_duration_seconds'),
      segments,
      cpu: cpuPerTurn(cpuBefore, cpuAfter, turns.length),
      kube: requestsPerTurn(kubeBefore, kubeAfter, turns.length),
      reconciles:
        (sumOf(after, 'polychrome_reconcile_total') - sumOf(before, 'polychrome_reconcile_total')) /
        turns.length,
    };
  } finally {
    await follow.close();
  }
}

/** Baseline (a): the turn's batches appended again, in turn order, to a fresh partition. */
async function commitBaseline(stack: TurnStack, batches: NewJournalEvent[][]): Promise<number[]> {
  const state = await controlPlaneStateClient(stack);
  try {
    const partition = `conv-${randomUUID()}`;
    let head = 0;
    const appendOne = async (i: number): Promise<void> => {
      head = (await state.append(partition, head, batches[i % batches.length] ?? [])).head;
    };
    const rounds = Math.ceil(BASELINE_SAMPLES / batches.length) * batches.length;
    return await timed(30, rounds, appendOne);
  } finally {
    state.close();
  }
}

/** Baseline (b): the Messages API round trip through the SDK, streaming like the harness. */
async function modelBaseline(messages: MessagesApiServer): Promise<number[]> {
  const anthropic = new Anthropic({
    apiKey: messages.apiKey,
    baseURL: messages.url,
    maxRetries: 0,
    logLevel: 'off',
  });
  return timed(30, BASELINE_SAMPLES, async (i) => {
    const stream = await anthropic.messages.create({
      model: DEFAULT_ANTHROPIC_MODEL,
      max_tokens: 8192,
      stream: true,
      system: String(field(DEFAULT_CONVERSATION_SPEC, 'agent', 'systemPrompt')),
      messages: [{ role: 'user', content: `bench turn ${i}` }],
    });
    for await (const event of stream) void event;
  });
}

// ---- phase 2: SSE fan-out ----

type SseChild = ChildProcessByStdio<Writable, Readable, null>;

/** Lines of the SSE client process, awaited by prefix. */
class ChildLines {
  private readonly queue: string[] = [];
  private readonly waiters: { prefix: string; resolve: (line: string) => void }[] = [];
  private closed = false;
  private readonly lines: Interface;

  constructor(child: SseChild) {
    this.lines = createInterface({ input: child.stdout });
    this.lines.on('line', (line) => {
      const waiter = this.waiters.findIndex((w) => line.startsWith(w.prefix));
      if (waiter >= 0) this.waiters.splice(waiter, 1)[0]?.resolve(line);
      else this.queue.push(line);
    });
    this.lines.on('close', () => {
      this.closed = true;
    });
  }

  /** The next line starting with `prefix` (or `fail`), within `timeoutMs`. */
  async next(prefix: string, timeoutMs: number): Promise<string> {
    const queued = this.queue.findIndex((l) => l.startsWith(prefix) || l.startsWith('fail'));
    if (queued >= 0) return this.check(this.queue.splice(queued, 1)[0] ?? '');
    if (this.closed) throw new Error(`the SSE clients exited before "${prefix}"`);
    let timer: NodeJS.Timeout | undefined;
    const line = await Promise.race([
      new Promise<string>((resolve) => {
        this.waiters.push({ prefix, resolve }, { prefix: 'fail', resolve });
      }),
      new Promise<never>((_, reject) => {
        timer = setTimeout(
          () => reject(new Error(`no "${prefix}" from the SSE clients in ${timeoutMs} ms`)),
          timeoutMs,
        );
      }),
    ]);
    clearTimeout(timer);
    this.waiters.length = 0;
    return this.check(line);
  }

  private check(line: string): string {
    if (line.startsWith('fail')) throw new Error(`SSE clients: ${line}`);
    return line;
  }
}

interface FanOutResult {
  readonly streams: number;
  readonly turns: number;
  readonly events: number;
  /** Per delivery: receipt on the stream − receipt on the direct state-plane follow. */
  readonly delays: number[];
  /** Per turn_complete delivery: receipt − arrival of the POST's reply. */
  readonly afterReply: number[];
  readonly missing: number;
  /** Streams still short of a turn's last event when the wait for it ended. */
  readonly lagging: number;
  readonly ended: number;
  readonly openMs: number;
  readonly postSamples: number[];
  readonly rssBefore: number;
  readonly rssOpen: number;
  readonly rssPeak: number;
  readonly openGauge: number;
  /** CPU per turn while the streams were open (the waits for every stream included). */
  readonly cpu: { readonly text: string; readonly totalMs: number };
  /** Open file descriptors of the control plane before and with the streams open. */
  readonly fdsBefore: number;
  readonly fdsOpen: number;
  /** ... and of the client process with the streams open. */
  readonly fdsClients: number;
}

/** Where the SSE clients open their streams (the public API unless given). */
interface StreamDoor {
  /** The stream's URL, from journal position `since` on. */
  url(since: number): string;
  readonly token?: string;
  /** A Kubernetes user's client certificate and the cluster CA (PEM). */
  readonly tls?: { readonly ca: string; readonly cert: string; readonly key: string };
}

function publicApiDoor(client: Client, uid: string): StreamDoor {
  return {
    url: (since) => `${client.stack.apiUrl}/v1/conversations/${uid}/stream?since=${since}`,
    token: client.token,
  };
}

async function fanOutPhase(
  client: Client,
  uid: string,
  streams: number,
  turns: number,
  tag: string,
  children: Set<SseChild>,
  door: StreamDoor = publicApiDoor(client, uid),
): Promise<FanOutResult> {
  const { stack } = client;
  const plane = stack.controlPlane(0);
  const pid = plane.child?.pid;
  // The reference: a direct follow of the partition on the state plane, opened first.
  const follow = await DirectFollow.open(stack, uid);
  const { head, committed } = follow;

  const rssBefore = rssMiB(pid);
  const fdsBefore = openFiles(pid);
  let rssPeak = rssBefore;
  const sampler = setInterval(() => {
    rssPeak = Math.max(rssPeak, rssMiB(pid) || 0);
  }, 100);
  const child: SseChild = spawn(
    process.execPath,
    [
      '--import',
      'tsx',
      join(__dirname, 'fixtures', 'sse-clients.ts'),
      JSON.stringify({
        url: door.url(head),
        token: door.token,
        tls: door.tls,
        streams,
        concurrency: 50,
        openTimeoutMs: 120_000,
        maxLifetimeMs: 15 * 60_000,
      }),
    ],
    { cwd: repoRoot, stdio: ['pipe', 'pipe', 'inherit'] },
  );
  children.add(child);
  try {
    const lines = new ChildLines(child);
    const openMs = Number((await lines.next('open', 150_000)).split(' ')[2]);
    const rssOpen = rssMiB(pid);
    const fdsOpen = openFiles(pid);
    const fdsClients = openFiles(child.pid);
    const openGauge = (await scrape(plane.healthPort)).get('polychrome_api_open_streams') ?? 0;
    progress(`${tag}: ${streams} streams open in ${openMs} ms; posting ${turns} turns`);
    await sleep(500);
    const groups = { ...(await cpuGroups(stack, ['bench-0'])), 'SSE clients': [child.pid] };
    const cpuBefore = cpuSnapshot(groups);

    const replyAt = new Map<number, number>();
    const postSamples: number[] = [];
    let lagging = 0;
    const completes: number[] = [];
    for (let i = 0; i < turns; i++) {
      const text = `${tag} turn ${i}`;
      const started = hrMs();
      const reply = await post(client, uid, text, `${tag}-${i}`);
      const arrived = hrMs();
      postSamples.push(arrived - started);
      // The turn's batch two: its turn_complete and the signed_root that closes it.
      const complete = await pollUntil(
        `turn_complete of ${text} on the direct follow`,
        () => {
          for (const [position, e] of committed) {
            if (position > reply.requestedAt && e.kind === EventKind.TurnComplete) {
              return Promise.resolve(position);
            }
          }
          return Promise.resolve(undefined);
        },
        { timeoutMs: 10_000, intervalMs: 2 },
      );
      replyAt.set(complete, arrived);
      completes.push(complete);
      child.stdin.write(`until ${complete + 1} ${FAN_OUT_WAIT_MS}\n`);
      const reached = await lines.next(`reached ${complete + 1}`, FAN_OUT_WAIT_MS + 10_000);
      lagging += Number(reached.split(' ')[2]);
    }
    const cpu = cpuPerTurn(cpuBefore, cpuSnapshot(groups), turns);
    child.stdin.write('dump\n');
    const dump = JSON.parse((await lines.next('data ', 60_000)).slice(5)) as {
      receipts: Record<string, number[]>;
      ended: number;
    };
    const delays: number[] = [];
    const afterReply: number[] = [];
    let events = 0;
    const last = (completes.at(-1) ?? head) + 1;
    for (let position = head; position <= last; position++) {
      const reference = committed.get(position);
      if (reference === undefined) continue;
      events += 1;
      const times = dump.receipts[String(position)] ?? [];
      for (const at of times) delays.push(at - reference.at);
      const reply = replyAt.get(position);
      if (reply !== undefined) for (const at of times) afterReply.push(at - reply);
    }
    return {
      streams,
      turns,
      events,
      delays,
      afterReply,
      missing: events * streams - delays.length,
      lagging,
      ended: dump.ended,
      openMs,
      postSamples,
      rssBefore,
      rssOpen,
      rssPeak,
      openGauge,
      cpu,
      fdsBefore,
      fdsOpen,
      fdsClients,
    };
  } finally {
    clearInterval(sampler);
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    children.delete(child);
    await follow.close();
  }
}

// ---- phase 2b: SSE through the Kubernetes door against the public API ----

/** The control plane's door: its serving certificate and port, and its environment. */
interface BenchDoor {
  readonly cert: DoorCertificate;
  readonly port: number;
  readonly env: Readonly<Record<string, string>>;
}

/** Before the control plane starts: its door's certificate, port and RBAC. */
async function prepareDoor(cluster: LocalCluster, dir: string): Promise<BenchDoor> {
  const cert = await ensureDoorCertificate(join(dir, 'kube-api-pki'));
  const port = await freePort();
  await applyKubeDoorRbac(cluster.kubeconfigPath);
  return {
    cert,
    port,
    env: {
      POLYCHROME_KUBE_API_CERT_FILE: cert.certPath,
      POLYCHROME_KUBE_API_KEY_FILE: cert.keyPath,
      POLYCHROME_KUBE_API_HOST: '127.0.0.1',
      POLYCHROME_KUBE_API_PORT: String(port),
    },
  };
}

/**
 * A Kubernetes user whom RBAC allows to follow the namespace's conversations (a RoleBinding
 * to polychrome-conversation-reader, which no built-in role aggregates: a conversation's
 * content is Secret-level), as the client certificate and CA its kubeconfig
 * holds.
 */
async function streamingUser(
  cluster: LocalCluster,
  namespace: string,
): Promise<{ ca: string; cert: string; key: string }> {
  const kc = new KubeConfig();
  kc.loadFromFile(await cluster.mintUser('bench-viewer', ['bench']));
  await cluster
    .kubeConfig()
    .makeApiClient(RbacAuthorizationV1Api)
    .createNamespacedRoleBinding({
      namespace,
      body: {
        metadata: { name: 'bench-viewer' },
        roleRef: {
          apiGroup: 'rbac.authorization.k8s.io',
          kind: 'ClusterRole',
          name: 'polychrome-conversation-reader',
        },
        subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'User', name: 'bench-viewer' }],
      },
    });
  const user = kc.getCurrentUser();
  if (user?.certData === undefined || user.keyData === undefined) {
    throw new Error('the minted kubeconfig has no client certificate');
  }
  const decode = (data: string): string => Buffer.from(data, 'base64').toString('utf8');
  return {
    ca: readFileSync(cluster.state.caCertPath, 'utf8'),
    cert: decode(user.certData),
    key: decode(user.keyData),
  };
}

interface KubeSseResult {
  readonly streams: number;
  readonly rounds: { readonly direct: FanOutResult; readonly kube: FanOutResult }[];
}

async function kubeSsePhase(
  cluster: LocalCluster,
  door: BenchDoor,
  client: Client,
  uid: string,
  sizes: Sizes,
  children: Set<SseChild>,
): Promise<KubeSseResult> {
  progress(`kube door: registering the APIService for 127.0.0.1:${door.port}`);
  await registerKubeDoor(cluster.kubeConfig(), { port: door.port, caPem: door.cert.caPem });
  const namespace = client.stack.namespace;
  const tls = await streamingUser(cluster, namespace);
  const kube: StreamDoor = {
    url: (since) =>
      `${cluster.server}/apis/api.polychrome.dev/v1alpha1/namespaces/${namespace}/conversations/bench-0/log?since=${since}`,
    tls,
  };
  const direct = publicApiDoor(client, uid);
  const rounds: KubeSseResult['rounds'][number][] = [];
  for (let round = 0; round < sizes.rounds; round++) {
    const order = round % 2 === 0 ? (['direct', 'kube'] as const) : (['kube', 'direct'] as const);
    const results: Partial<Record<'direct' | 'kube', FanOutResult>> = {};
    for (const which of order) {
      progress(
        `round ${round + 1}: ${sizes.streams} streams on the ${which === 'kube' ? 'Kubernetes door' : 'public API'}`,
      );
      results[which] = await fanOutPhase(
        client,
        uid,
        sizes.streams,
        sizes.streamTurns,
        `${which}${round}`,
        children,
        which === 'kube' ? kube : direct,
      );
    }
    rounds.push({ direct: results.direct as FanOutResult, kube: results.kube as FanOutResult });
  }
  return { streams: sizes.streams, rounds };
}

function reportKubeSse(result: KubeSseResult): void {
  const line = (name: string, r: FanOutResult): string =>
    `${name}: p50 ${ms(quantile(r.delays, 0.5))}, p99 ${ms(quantile(r.delays, 0.99))}, max ${ms(quantile(r.delays, 1))}; missing ${r.missing}, late ${r.lagging}, ended early ${r.ended}; CPU per turn ${r.cpu.text}`;
  console.log(
    `SSE delivery, ${result.streams} streams following 1 conversation, the Kubernetes door (through kube-apiserver's aggregator) against the public API, same run, order swapped each round; delay = receipt on the stream − receipt on a direct state-plane follow`,
  );
  result.rounds.forEach((round, i) => {
    console.log(`  round ${i + 1} ${line('public API', round.direct)}`);
    console.log(`  round ${i + 1} ${line('Kubernetes door', round.kube)}`);
  });
  const all = (pick: (r: KubeSseResult['rounds'][number]) => FanOutResult): number[] =>
    result.rounds.flatMap((r) => pick(r).delays);
  const direct = all((r) => r.direct);
  const kube = all((r) => r.kube);
  console.log(
    `  all rounds: public API p50 ${ms(quantile(direct, 0.5))}, p99 ${ms(quantile(direct, 0.99))}; Kubernetes door p50 ${ms(quantile(kube, 0.5))}, p99 ${ms(quantile(kube, 0.99))}; the aggregated path adds p50 ${ms(quantile(kube, 0.5) - quantile(direct, 0.5))}, p99 ${ms(quantile(kube, 0.99) - quantile(direct, 0.99))} (reported; no aim set)`,
  );
}

// ---- phase 3: throughput ----

interface ThroughputResult {
  readonly conversations: number;
  readonly readyS: number;
  readonly turns: number;
  readonly elapsedS: number;
  readonly samples: number[];
  readonly commits: HistogramDelta;
  readonly cpu: { readonly text: string; readonly totalMs: number };
  readonly kube: string;
  /** Warm-up turns that failed and were retried with the same key. */
  readonly warmUpRetries: string[];
  /** Measured turns that failed (not in the figures). */
  readonly failures: string[];
}

async function startConversations(
  stack: TurnStack,
  names: readonly string[],
): Promise<Map<string, string>> {
  const objects = stack.admin.makeApiClient(CustomObjectsApi);
  const group = 'polychrome.dev';
  const version = 'v1alpha1';
  const plural = 'conversations';
  let next = 0;
  await Promise.all(
    Array.from({ length: 8 }, async () => {
      while (next < names.length) {
        const name = names[next++] ?? '';
        await createConversation(objects, stack.namespace, name, {
          ...DEFAULT_CONVERSATION_SPEC,
          owner: OWNER,
        });
      }
    }),
  );
  const wanted = new Set(names);
  return pollUntil(
    `${names.length} harnesses to be Ready`,
    async () => {
      const list: unknown = await objects.listNamespacedCustomObject({
        group,
        version,
        plural,
        namespace: stack.namespace,
      });
      const items = field(list, 'items');
      const ready = new Map<string, string>();
      for (const item of Array.isArray(items) ? (items as unknown[]) : []) {
        const name = String(field(item, 'metadata', 'name'));
        if (wanted.has(name) && isReady(item)) {
          ready.set(name, String(field(item, 'metadata', 'uid')));
        }
      }
      return ready.size === names.length ? ready : undefined;
    },
    { timeoutMs: HARNESS_START_LIMIT_MS, intervalMs: 1_000 },
  );
}

async function throughputPhase(
  client: Client,
  first: string,
  sizes: Sizes,
): Promise<ThroughputResult> {
  const { stack } = client;
  const names = Array.from(
    { length: sizes.conversations - 1 },
    (_, i) => `tp-${String(i + 1).padStart(3, '0')}`,
  );
  progress(`throughput: starting ${names.length} more harnesses`);
  const startedAt = hrMs();
  const uids = [first, ...(await startConversations(stack, names)).values()];
  const readyS = (hrMs() - startedAt) / 1000;
  progress(`throughput: ${uids.length} harnesses Ready in ${readyS.toFixed(1)} s; warming up`);
  const warmUpRetries: string[] = [];
  const failures: string[] = [];
  await Promise.all(
    uids.map(async (uid, c) => {
      for (let i = 0; i < 3; i++) {
        // A fresh harness's first turns may fail while 50 of them start on a loaded
        // machine; the same key is the same turn (docs/api.md), so retrying is safe.
        for (let attempt = 1; ; attempt++) {
          try {
            await post(client, uid, `warm-up ${c}.${i}`, `tp-w-${c}-${i}`);
            break;
          } catch (error) {
            if (attempt >= 3) throw error;
            warmUpRetries.push(error instanceof Error ? error.message : String(error));
          }
        }
      }
    }),
  );
  const port = stack.controlPlane(0).healthPort;
  const groups = await cpuGroups(stack, ['bench-0', ...names]);
  const before = await scrape(port);
  const kubeBefore = await apiserverRequests(stack.admin);
  const cpuBefore = cpuSnapshot(groups);
  const samples: number[] = [];
  const started = hrMs();
  const deadline = started + sizes.seconds * 1000;
  await Promise.all(
    uids.map(async (uid, c) => {
      for (let i = 0; hrMs() < deadline; i++) {
        const t0 = hrMs();
        try {
          await post(client, uid, `tp turn ${c}.${i}`, `tp-${c}-${i}`);
          samples.push(hrMs() - t0);
        } catch (error) {
          failures.push(error instanceof Error ? error.message : String(error));
        }
      }
    }),
  );
  const elapsedS = (hrMs() - started) / 1000;
  const cpuAfter = cpuSnapshot(groups);
  const after = await scrape(port);
  const kubeAfter = await apiserverRequests(stack.admin);
  return {
    conversations: uids.length,
    readyS,
    turns: samples.length,
    elapsedS,
    samples,
    commits: histogramDelta(before, after, 'polychrome_journal_commit_duration_seconds'),
    cpu: cpuPerTurn(cpuBefore, cpuAfter, samples.length),
    kube: requestsPerTurn(kubeBefore, kubeAfter, samples.length),
    warmUpRetries,
    failures,
  };
}

// ---- the run ----

/**
 * The benchmark. `cleanups` gets a step for each thing started, `dirs` each temporary
 * directory (removed last).
 */
async function run(
  sizes: Sizes,
  cleanups: (() => Promise<unknown>)[],
  dirs: string[],
): Promise<boolean> {
  const fdLimit = openFileLimit();
  if (fdLimit < sizes.streams + 500) {
    throw new Error(
      `the open-file limit is ${fdLimit}; ${sizes.streams} streams need about ${sizes.streams + 500} (one socket per stream in the client process and in the control plane, plus the stack's own): raise it with ulimit -n`,
    );
  }
  const load = loadavg()
    .map((l) => l.toFixed(2))
    .join(' ');
  console.log(
    `turns: node ${process.version}; load average ${load}; open-file limit ${fdLimit}; sizes ${JSON.stringify(sizes)}`,
  );

  progress('starting the local Kubernetes control plane');
  const { dir, cluster, pids, block, messages } = await startBenchCluster('turns', {
    steps: cleanups,
    dirs,
  });
  clusterPids = [...pids];
  const door = process.argv.includes(KUBE_SSE_ONLY) ? await prepareDoor(cluster, dir) : undefined;
  progress('starting the stack (state plane, local node, control plane)');
  const stack = await startTurnStack({
    cluster,
    messages,
    namespacePrefix: 'bench',
    timeoutMs: 180_000,
    // The deployment's lease timing (15 s, renewed every 5 s), not the tests' short one.
    leaseDurationMs: 15_000,
    controlPlaneEnv: {
      POLYCHROME_LEASE_RENEW_MS: '5000',
      ...NO_CALLER_LIMITS,
      ...profileEnv('off'),
      ...door?.env,
    },
    harnessEnv: profileEnv('off'),
    stateEnv: profileEnv('off'),
  });
  cleanups.push(() => stack.stop());
  dirs.push(stack.dir);
  const agent = new Agent({ keepAlive: true, maxSockets: 256 });
  cleanups.push(() => Promise.resolve(agent.destroy()));
  const client: Client = { stack, token: await stack.mintToken(OWNER), agent };
  const children = new Set<SseChild>();
  cleanups.push(() => {
    for (const child of children) child.kill('SIGKILL');
    return Promise.resolve();
  });

  return stack.withDiagnostics(async () => {
    const uid = await stack.createConversation('bench-0', { owner: OWNER }, 120_000);
    const podIP = (await stack.harness('bench-0')).podIP;
    if (!podIP.startsWith(`127.${block}.`)) {
      throw new Error(`the harness got ${podIP}, outside the reserved block 127.${block}.0.0/16`);
    }
    progress(`harness pods on 127.${block}.0.0/16`);
    if (door !== undefined) {
      reportKubeSse(await kubeSsePhase(cluster, door, client, uid, sizes, children));
      return true;
    }
    if (process.argv.includes(TRACING_ONLY)) {
      progress(`tracing only: ${sizes.rounds} × ${sizes.turns} turns on each stack`);
      const withinAim = reportTracing(
        await tracingPhase(cluster, messages, client, sizes, cleanups, dirs),
      );
      console.log(
        `turns: load average at the end ${loadavg()
          .map((l) => l.toFixed(2))
          .join(' ')}`,
      );
      return withinAim;
    }

    // Phase 1.
    progress('latency: baselines');
    const modelSamples = await modelBaseline(messages);
    progress(`latency: ${sizes.warmup} warm-up turns, then ${sizes.turns}`);
    const latency = await latencyPhase(client, uid, sizes);
    const commitSamples = await commitBaseline(stack, lastTurnBatches(await stack.journal(uid)));
    messages.requests.length = 0;

    const turnP50 = quantile(latency.samples, 0.5);
    const commitP50 = quantile(commitSamples, 0.5);
    const modelP50 = quantile(modelSamples, 0.5);
    const added = turnP50 - modelP50 - 2 * commitP50;
    const commitsPerTurn = latency.commits.count / latency.samples.length;
    const commitShare =
      (latency.commits.sumSeconds * 1000) / latency.samples.reduce((a, b) => a + b, 0);
    const half = Math.min(50, Math.floor(latency.samples.length / 2));
    console.log(
      `turn latency, 1 conversation, ${sizes.turns} turns after ${sizes.warmup} (POST → reply): p50 ${ms(turnP50)}, p99 ${ms(quantile(latency.samples, 0.99))}, mean ${ms(mean(latency.samples))}`,
    );
    console.log(
      `  baseline (a) raw durable commit, state-plane Append over mTLS of this run's turn batches: p50 ${ms(commitP50)}, p99 ${ms(quantile(commitSamples, 0.99))}`,
    );
    console.log(
      `  baseline (b) bare model round trip, Anthropic SDK → Messages API server (streaming): p50 ${ms(modelP50)}, p99 ${ms(quantile(modelSamples, 0.99))}`,
    );
    console.log(
      `  a turn makes 2 durable commits, each sealed by a signed_root: batch one (message_received + turn_dispatched), batch two (the reply's model_call + turn_complete)`,
    );
    console.log(
      `  added by Polychrome: turn p50 − model p50 − 2 × commit p50 = ${ms(added)} (aim < 10 ms beyond the durable commits) ${verdict(added < 10)}; ratio turn p50 / (model + 2 commits) ${(turnP50 / (modelP50 + 2 * commitP50)).toFixed(2)}x`,
    );
    console.log(
      `  inside the turns (control plane's polychrome_journal_commit_duration_seconds): ${commitsPerTurn.toFixed(2)} commits per turn, mean ${ms((latency.commits.sumSeconds * 1000) / latency.commits.count)}, median in ${medianBucket(latency.commits)}; ${(commitShare * 100).toFixed(1)}% of turn time`,
    );
    console.log(
      `  polychrome_turn_duration_seconds (dispatch → batch two) mean ${ms((latency.turnDurations.sumSeconds * 1000) / latency.turnDurations.count)}; drift: p50 of the first ${half} turns ${ms(quantile(latency.samples.slice(0, half), 0.5))}, last ${half} ${ms(quantile(latency.samples.slice(-half), 0.5))} (history grows by one turn per turn)`,
    );

    const seg = latency.segments;
    console.log(
      `  where a turn's time goes (p50, from a direct state-plane follow): POST → batch one durable ${ms(quantile(seg.toBatchOne, 0.5))} (auth, lock + lease, journal read, commit); → batch two durable ${ms(quantile(seg.toBatchTwo, 0.5))} (harness call, model, reply back, commit); → reply ${ms(quantile(seg.toReply, 0.5))} (status write "settled", answer)`,
    );
    console.log(
      `  CPU per turn: ${latency.cpu.text}; ${latency.cpu.totalMs.toFixed(1)} ms in all against a mean wall time of ${ms(mean(latency.samples))}`,
    );
    console.log(
      `  Kubernetes API requests per turn: ${latency.kube}; control-plane reconcile passes per turn: ${latency.reconciles.toFixed(1)}`,
    );

    // Phase 1b.
    progress(
      `tracing: a second stack exporting spans, ${sizes.rounds} × ${sizes.turns} turns on each`,
    );
    const tracingWithinAim = reportTracing(
      await tracingPhase(cluster, messages, client, sizes, cleanups, dirs),
    );

    // Phase 2.
    progress('fan-out: baseline with 1 stream');
    const one = await fanOutPhase(client, uid, 1, Math.min(5, sizes.streamTurns), 'sse1', children);
    progress(`fan-out: ${sizes.streams} streams`);
    const many = await fanOutPhase(client, uid, sizes.streams, sizes.streamTurns, 'sseN', children);
    messages.requests.length = 0;
    const manyP99 = quantile(many.delays, 0.99);
    const oneP99 = quantile(one.delays, 0.99);
    console.log(
      `SSE fan-out, ${many.streams} streams on one replica following 1 conversation, ${many.turns} turns (${many.events} committed events, ${many.delays.length} deliveries): delivery p50 ${ms(quantile(many.delays, 0.5))}, p99 ${ms(manyP99)}, max ${ms(quantile(many.delays, 1))} (aim p99 < 100 ms) ${verdict(manyP99 < 100 && many.missing === 0)}`,
    );
    console.log(
      `  delivery = receipt on the stream − receipt of the same event on a direct state-plane follow in the bench process (≈ the append's acknowledgement); missing deliveries ${many.missing}, streams late past ${FAN_OUT_WAIT_MS / 1000} s ${many.lagging}, streams ended early ${many.ended}`,
    );
    console.log(
      `  baseline, 1 stream (${one.turns} turns, ${one.delays.length} deliveries): p50 ${ms(quantile(one.delays, 0.5))}, p99 ${ms(oneP99)}; ratio of p99s ${(manyP99 / oneP99).toFixed(1)}x`,
    );
    console.log(
      `  turn_complete after the POST's reply arrived (negative: before it): p50 ${ms(quantile(many.afterReply, 0.5))}, p99 ${ms(quantile(many.afterReply, 0.99))}`,
    );
    console.log(
      `  POST → reply meanwhile: p50 ${ms(quantile(many.postSamples, 0.5))} (1 stream: ${ms(quantile(one.postSamples, 0.5))}); ${many.streams} streams opened in ${many.openMs} ms, polychrome_api_open_streams ${many.openGauge}`,
    );
    console.log(`  CPU per turn: ${many.cpu.text} (1 stream: ${one.cpu.text})`);
    console.log(
      `  control plane RSS: ${many.rssBefore.toFixed(0)} MiB before, ${many.rssOpen.toFixed(0)} MiB with ${many.streams} streams open (${(((many.rssOpen - many.rssBefore) * 1024) / many.streams).toFixed(0)} KiB per stream), peak ${many.rssPeak.toFixed(0)} MiB while posting`,
    );
    console.log(
      `  open files: control plane ${many.fdsBefore} before, ${many.fdsOpen} with the streams open; client process ${many.fdsClients}; soft limit ${fdLimit} (inherited by both)`,
    );

    // Phase 3.
    const tp = await throughputPhase(client, uid, sizes);
    messages.requests.length = 0;
    const rate = tp.turns / tp.elapsedS;
    const single = 1000 / mean(latency.samples);
    console.log(
      `throughput, ${tp.conversations} conversations (${tp.conversations} harness processes, Ready in ${tp.readyS.toFixed(1)} s), one sequential client each for ${sizes.seconds} s: ${rate.toFixed(1)} turns/s (${tp.turns} turns), p50 ${ms(quantile(tp.samples, 0.5))}, p99 ${ms(quantile(tp.samples, 0.99))}`,
    );
    console.log(
      `  baseline, 1 conversation sequential (phase 1): ${single.toFixed(1)} turns/s; ratio ${(rate / single).toFixed(2)}x; commits meanwhile: ${(tp.commits.count / tp.turns).toFixed(2)} per turn, mean ${ms((tp.commits.sumSeconds * 1000) / tp.commits.count)}, median in ${medianBucket(tp.commits)}, ${((tp.commits.sumSeconds * 1000 * 100) / tp.samples.reduce((a, b) => a + b, 0)).toFixed(1)}% of turn time; aim: none set (reported)`,
    );
    const distinct = (list: readonly string[]): string =>
      [...new Set(list.map((m) => m.slice(0, 200)))].slice(0, 3).join(' | ');
    console.log(
      `  failed turns: ${tp.failures.length}${tp.failures.length === 0 ? '' : ` (${distinct(tp.failures)})`}; warm-up turns retried: ${tp.warmUpRetries.length}${tp.warmUpRetries.length === 0 ? '' : ` (${distinct(tp.warmUpRetries)})`}`,
    );
    console.log(
      `  CPU per turn: ${tp.cpu.text}; ${((tp.cpu.totalMs * tp.turns) / (tp.elapsedS * 1000)).toFixed(2)} of ${availableParallelism()} cores busy with the stack (machine load ${loadavg()[0]?.toFixed(2) ?? '?'}); Kubernetes API requests per turn ${tp.kube}`,
    );
    console.log(
      `turns: load average at the end ${loadavg()
        .map((l) => l.toFixed(2))
        .join(' ')}`,
    );
    return added < 10 && manyP99 < 100 && many.missing === 0 && tracingWithinAim;
  });
}

/** Each cleanup step may take this long before the next one starts. */
runBench('turns', RUN_LIMIT_MS, (cleanups) =>
  run(parseSizes(process.argv.slice(2)), cleanups.steps, cleanups.dirs),
);
