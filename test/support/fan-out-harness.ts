/*
 * The public API's SSE fan-out: the real PublicApiServer over the real turn coordinator in
 * this process (api-fixtures.ts: the real journal store in a temporary directory, the
 * real harness server with the scripted model), N streams of one conversation opened by the
 * benchmark's client process (bench/fixtures/sse-clients.ts), and one real turn per burst:
 * batch one, the reply streamed word by word as live text deltas, batch two. It prints the
 * delivery delay (receipt on a stream − the store's commit, both CLOCK_MONOTONIC), the
 * process's CPU per turn (the streams and the turn's own path: coordinator, harness, store)
 * and the time of a GET answered during each burst. No Kubernetes, no network but loopback.
 * Usage: npx tsx test/support/fan-out-harness.ts [--streams=1000] [--turns=20]
 */
import { partitionOf } from '../../common/partition-name';
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { call, startApi, TOKENS } from './api-fixtures';
import { textReply } from './real-turns';

const args = new Map(
  process.argv.slice(2).map((arg) => {
    const [name, value] = arg.replace(/^--/u, '').split('=');
    return [name, Number(value)] as const;
  }),
);
const STREAMS = args.get('streams') ?? 1000;
const TURNS = args.get('turns') ?? 20;
const ALICE_ID = 'email:alice@example.com';
const REPLY = 'the reply of this turn, streamed to every client word by word';

const nowMs = (): number => Number(process.hrtime.bigint()) / 1e6;
const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

function quantile(values: readonly number[], q: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? Number.NaN;
}

async function main(): Promise<void> {
  const api = await startApi({
    heartbeatMs: 15_000,
    replies: Array.from({ length: TURNS }, () => textReply(REPLY)),
  });
  const id = api.seed(ALICE_ID);
  const partition = partitionOf(id);
  // When each position became durable: the store tells its commit listeners.
  const appendedAt = new Map<number, number>();
  let committed = 0;
  api.turns.journal.store.subscribe(partition, (head) => {
    const at = nowMs();
    for (; committed < head; committed += 1) appendedAt.set(committed, at);
  });

  const child = spawn(
    process.execPath,
    [
      '--import',
      'tsx',
      join(__dirname, '..', '..', '..', 'bench', 'fixtures', 'sse-clients.ts'),
      JSON.stringify({
        url: `${api.base}/v1/conversations/${id}/stream?since=0`,
        token: TOKENS.alice,
        streams: STREAMS,
        concurrency: 50,
        openTimeoutMs: 120_000,
        maxLifetimeMs: 10 * 60_000,
      }),
    ],
    { stdio: ['pipe', 'pipe', 'inherit'] },
  );
  const lines = createInterface({ input: child.stdout })[Symbol.asyncIterator]();
  const line = async (): Promise<string> => {
    const next = await lines.next();
    if (next.done === true || next.value.startsWith('fail')) {
      throw new Error(`sse-clients: ${String(next.value)}`);
    }
    return next.value;
  };
  console.log(`harness: ${await line()}; open streams ${String(api.server.openStreams)}`);
  await sleep(500);

  const getMs: number[] = [];
  const cpuBefore = process.cpuUsage();
  for (let turn = 0; turn < TURNS; turn += 1) {
    const started = nowMs();
    const get = call(api, 'GET', `/v1/conversations/${id}`, { token: TOKENS.alice }).then(() =>
      getMs.push(nowMs() - started),
    );
    const posted = await call(api, 'POST', `/v1/conversations/${id}/messages`, {
      token: TOKENS.alice,
      body: { text: `harness turn ${String(turn)}`, idempotencyKey: `key-${String(turn)}` },
    });
    if (posted.status !== 200) throw new Error(`turn ${String(turn)}: ${posted.text}`);
    await get;
    child.stdin.write(`until ${String(api.head(id) - 1)} 10000\n`);
    console.log(`harness: turn ${String(turn)} ${await line()}`);
  }
  const cpu = process.cpuUsage(cpuBefore);
  child.stdin.write('dump\n');
  const dump = JSON.parse((await line()).slice(5)) as { receipts: Record<string, number[]> };
  const delays: number[] = [];
  for (const [position, times] of Object.entries(dump.receipts)) {
    const at = appendedAt.get(Number(position));
    if (at !== undefined) for (const time of times) delays.push(time - at);
  }
  const cpuMs = (cpu.user + cpu.system) / 1000;
  console.log(
    `harness: ${String(STREAMS)} streams, ${String(TURNS)} turns, ${String(delays.length)} deliveries: ` +
      `delay p50 ${quantile(delays, 0.5).toFixed(1)} ms, p99 ${quantile(delays, 0.99).toFixed(1)} ms, ` +
      `max ${quantile(delays, 1).toFixed(1)} ms; server CPU per turn ${(cpuMs / TURNS).toFixed(1)} ms ` +
      `(user ${(cpu.user / 1000 / TURNS).toFixed(1)}, system ${(cpu.system / 1000 / TURNS).toFixed(1)}); ` +
      `GET during a burst p50 ${quantile(getMs, 0.5).toFixed(1)} ms`,
  );
  await api.close();
}

main().then(
  () => process.exit(0),
  (error: unknown) => {
    console.error(error);
    process.exit(1);
  },
);
