/*
 * The public API's SSE fan-out alone: the real PublicApiServer over the in-memory journal
 * (testdata/in-memory-journal.ts), N streams of one conversation opened by the benchmark's
 * client process (bench/fixtures/sse-clients.ts), and turn-shaped bursts: batch one
 * (message_received, turn_dispatched, signed_root) appended to the journal, the reply's
 * words as live text deltas 1 ms apart, batch two (model_call, turn_complete, signed_root). It
 * prints the delivery delay (receipt on a stream − the append, both CLOCK_MONOTONIC), the
 * server's CPU per turn and the time of a GET answered during each burst. No Kubernetes,
 * no state plane: a profile of this process (`node --cpu-prof --import tsx ...`) shows
 * only the stream path.
 * Usage: npx tsx operator/public-api/testdata/fan-out-harness.ts [--streams=1000] [--turns=20]
 */
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { encodePayload, EventKind, type EventPayloads } from '../../../common/event-kinds';
import type { NewJournalEvent } from '../../../common/state-client';
import { call, startApi, TOKENS } from './fixtures';

const args = new Map(
  process.argv.slice(2).map((arg) => {
    const [name, value] = arg.replace(/^--/u, '').split('=');
    return [name, Number(value)] as const;
  }),
);
const STREAMS = args.get('streams') ?? 1000;
const TURNS = args.get('turns') ?? 20;
const ALICE_ID = 'email:alice@example.com';

const nowMs = (): number => Number(process.hrtime.bigint()) / 1e6;
const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

function event<K extends EventKind>(kind: K, payload: EventPayloads[K]): NewJournalEvent {
  return { kind, payload: encodePayload(kind, payload) };
}

function signedRoot(leafCount: number): NewJournalEvent {
  return event(EventKind.SignedRoot, {
    leafCount,
    root: Buffer.alloc(32, leafCount % 256),
    keyId: 'harness',
    signature: Buffer.alloc(64, 7),
  });
}

function quantile(values: readonly number[], q: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? Number.NaN;
}

async function main(): Promise<void> {
  const api = await startApi({ heartbeatMs: 15_000 });
  const id = api.service.seed(ALICE_ID);
  const partition = `conv-${id}`;
  const appendedAt = new Map<number, number>();
  const append = (events: NewJournalEvent[]): void => {
    const head = api.journal.head(partition);
    const first = api.journal.append(partition, [...events, signedRoot(head + events.length)]);
    const at = nowMs();
    for (let i = 0; i <= events.length; i += 1) appendedAt.set(first + i, at);
  };

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
    const turnId = `turn-${String(turn)}`;
    const attribution = { caller: ALICE_ID, persona: 'persona-alice', participants: [] };
    const started = nowMs();
    const get = call(api, 'GET', `/v1/conversations/${id}`, { token: TOKENS.alice }).then(() =>
      getMs.push(nowMs() - started),
    );
    append([
      event(EventKind.MessageReceived, {
        turnId,
        idempotencyKey: `key-${String(turn)}`,
        text: `harness turn ${String(turn)}`,
        attribution,
        receivedAtMs: Date.now(),
      }),
      event(EventKind.TurnDispatched, {
        turnId,
        attempt: 1,
        leaseHolder: 'harness',
        fencingToken: 1,
        attribution,
        dispatchedAtMs: Date.now(),
        messagePosition: api.journal.head(partition),
      }),
    ]);
    // The model's reply, word by word, as live deltas (a few ms apart), then batch two.
    const reply = `echo: harness turn ${String(turn)}`;
    for (const [i, word] of (reply.match(/\S+\s*/gu) ?? []).entries()) {
      await sleep(1);
      api.service.sendDelta(id, { turnId, step: i + 1, text: word });
    }
    await sleep(1);
    append([
      event(EventKind.ModelCall, {
        turnId,
        step: 1,
        model: 'claude-echo',
        content: [{ block: { $case: 'text', value: reply } }],
        stopReason: 'end_turn',
        usage: { inputTokens: 12, outputTokens: 6 },
        startedAtMs: Date.now(),
        finishedAtMs: Date.now(),
        closing: false,
      }),
      event(EventKind.TurnComplete, {
        turnId,
        text: reply,
        steps: 1,
        completedAtMs: Date.now(),
        fallback: false,
      }),
    ]);
    await get;
    child.stdin.write(`until ${String(api.journal.head(partition) - 1)} 10000\n`);
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
  await api.server.close();
}

main().then(
  () => process.exit(0),
  (error: unknown) => {
    console.error(error);
    process.exit(1);
  },
);
