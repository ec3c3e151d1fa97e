/*
 * The cost of a turn against the length of the conversation it belongs to: a conversation
 * that runs for months must not get slower, or dearer to serve, with every turn it has had.
 *
 * One stack on real parts, as bench/turns.bench.ts starts it (a local Kubernetes control
 * plane, the real state-plane process, one real control-plane process, hack's local node
 * running each harness pod as a real process, the Messages API server answering with the
 * echo at once). Conversations whose journals already hold 10, 1,000 and 10,000 complete
 * turns (by default; --histories=...) take turns in the same run, round after round in a
 * rotating order, so drift in the machine's load falls on every size alike. The history is
 * written straight into each fresh journal before its first turn: a real turn's two batches
 * (run first on a conversation of its own), appended again under new turn ids and
 * idempotency keys over mutual TLS as the control plane's identity, many turns per append.
 * The control plane then folds the whole journal on its first turn there, which the warm-up
 * round absorbs.
 *
 * Per history length it prints the turn's p50 and p99 (POST → reply) and the CPU each
 * process spent per turn (from /proc, over each block of turns). The baseline is the
 * shortest history, measured in the same run; the aim is that the longest costs at most
 * 1.2 × the control plane's CPU and p50 of the shortest.
 *
 * Every message is --text characters (the echo's reply 6 more), and the control plane runs
 * with POLYCHROME_HISTORY_TOKENS=--history-tokens: a window of about as many turns as the
 * shortest history has (printed), so the baseline is a conversation whose whole history
 * is in its window.
 *
 * Usage (defaults: about 6 minutes on 2 cores):
 *   npx tsx bench/history.bench.ts [--histories=10,1000,10000] [--rounds=5] [--turns=20]
 *     [--warmup=5] [--text=200] [--history-tokens=1200]
 * --turns: turns per conversation per round; --warmup: turns per conversation before the
 * first round.
 */
import { Agent } from 'node:http';
import { loadavg } from 'node:os';

import { decodePayload, encodePayload, EventKind } from '../common/event-kinds';
import { partitionOf } from '../common/partition-name';
import type { NewJournalEvent } from '../common/state-journal';
import type { StateClient } from '../common/state-client';
import { startTurnStack, type TurnStack } from '../test/integration/support/turn-stack';
import { runBench } from './fixtures/bench-main';
import { NO_CALLER_LIMITS, post, startBenchCluster, type Client } from './fixtures/bench-stack';
import { controlPlaneStateClient, lastTurnBatches } from './fixtures/journal-batches';
import { cpuMs } from './fixtures/proc';
import { hrMs, ms, quantile, verdict } from './fixtures/stats';

interface Sizes {
  readonly histories: readonly number[];
  readonly rounds: number;
  readonly turns: number;
  readonly warmup: number;
  readonly text: number;
  readonly historyTokens: number;
}

const RUN_LIMIT_MS = 30 * 60_000;
const OWNER = 'bench:owner';
/** Turns of history written by one append. */
const SEED_TURNS_PER_APPEND = 100;
/** The aim: the longest history costs at most this much more than the shortest. */
const AIM_RATIO = 1.2;

const progress = (line: string): void => void process.stderr.write(`history: ${line}\n`);

function parseSizes(argv: readonly string[]): Sizes {
  let histories: number[] = [10, 1000, 10_000];
  const counts = { rounds: 5, turns: 20, warmup: 5, text: 200, 'history-tokens': 1200 };
  for (const arg of argv) {
    const list = /^--histories=(\d+(?:,\d+)*)$/u.exec(arg);
    if (list !== null) {
      histories = (list[1] ?? '').split(',').map(Number);
      continue;
    }
    const match = /^--(rounds|turns|warmup|text|history-tokens)=(\d+)$/u.exec(arg);
    if (match === null) {
      throw new Error(
        `unknown argument ${arg}; see the usage at the top of bench/history.bench.ts`,
      );
    }
    counts[match[1] as keyof typeof counts] = Number(match[2]);
  }
  if (histories.length < 2 || histories.some((h) => h > 100_000)) {
    throw new Error('--histories needs at least two lengths, each at most 100,000 turns');
  }
  if (counts.rounds < 1 || counts.turns < 1 || counts.text < 1 || counts.text > 100_000) {
    throw new Error('--rounds and --turns must be at least 1, --text 1 to 100,000');
  }
  const { rounds, turns, warmup, text } = counts;
  const historyTokens = counts['history-tokens'];
  const sorted = [...histories].sort((a, b) => a - b);
  return { histories: sorted, rounds, turns, warmup, text, historyTokens };
}

// ---- the history ----

/**
 * One turn of history: the template turn's events with this turn's id and idempotency
 * key; `turn_dispatched` points at this turn's `message_received`, at `messagePosition`.
 */
function historyTurn(
  template: readonly NewJournalEvent[],
  turnId: string,
  messagePosition: number,
): NewJournalEvent[] {
  return template.map((event): NewJournalEvent => {
    switch (event.kind) {
      case EventKind.MessageReceived: {
        const p = decodePayload(EventKind.MessageReceived, event.payload);
        const payload = { ...p, turnId, idempotencyKey: turnId };
        return { kind: event.kind, payload: encodePayload(EventKind.MessageReceived, payload) };
      }
      case EventKind.TurnDispatched: {
        const p = decodePayload(EventKind.TurnDispatched, event.payload);
        const payload = { ...p, turnId, messagePosition };
        return { kind: event.kind, payload: encodePayload(EventKind.TurnDispatched, payload) };
      }
      case EventKind.ModelCall: {
        const p = decodePayload(EventKind.ModelCall, event.payload);
        return { kind: event.kind, payload: encodePayload(event.kind, { ...p, turnId }) };
      }
      case EventKind.TurnComplete: {
        const p = decodePayload(EventKind.TurnComplete, event.payload);
        return { kind: event.kind, payload: encodePayload(event.kind, { ...p, turnId }) };
      }
      default:
        throw new Error(`the template turn has a ${event.kind}, which the seed cannot renumber`);
    }
  });
}

/**
 * Writes `turns` complete turns into the conversation's journal, which must be empty: the
 * template's configuration first, then the turns, {@link SEED_TURNS_PER_APPEND} per append
 * (each closed by the state plane's `signed_root`).
 */
async function seedHistory(
  state: StateClient,
  uid: string,
  config: readonly NewJournalEvent[],
  template: readonly NewJournalEvent[],
  turns: number,
): Promise<void> {
  const partition = partitionOf(uid);
  let head = (await state.append(partition, 0, config)).head;
  for (let first = 0; first < turns; first += SEED_TURNS_PER_APPEND) {
    const batch: NewJournalEvent[] = [];
    for (let i = first; i < Math.min(turns, first + SEED_TURNS_PER_APPEND); i++) {
      batch.push(...historyTurn(template, `history-${uid.slice(0, 8)}-${i}`, head + batch.length));
    }
    head = (await state.append(partition, head, batch)).head;
  }
}

/** The template: a real turn's events in one batch, and the configuration it ran under. */
async function templateTurn(
  client: Client,
  text: string,
): Promise<{ config: NewJournalEvent[]; turn: NewJournalEvent[] }> {
  const uid = await client.stack.createConversation('history-template', { owner: OWNER }, 120_000);
  // The first turn also commits the configuration, in a batch of its own; the second is a
  // turn as every later one is.
  await post(client, uid, text, 'template-0');
  await post(client, uid, text, 'template-1');
  const journal = await client.stack.journal(uid);
  const config = journal
    .filter((e) => e.kind === EventKind.AgentConfig)
    .map((e) => ({ kind: e.kind, payload: e.payload }));
  return { config, turn: lastTurnBatches(journal).flat() };
}

// ---- the measurement ----

/** What one history length measured over every round. */
interface Measured {
  readonly history: number;
  readonly uid: string;
  /** Earlier turns the last turn was given (its dispatch's window). */
  window?: number;
  readonly samples: number[];
  /** CPU ms per process group, summed over the measured turns. */
  readonly cpu: Map<string, number>;
}

/** How many earlier turns the conversation's last dispatch gave the harness. */
async function lastWindow(stack: TurnStack, uid: string): Promise<number> {
  const journal = await stack.journal(uid);
  const last = journal.findLast((e) => e.kind === EventKind.TurnDispatched);
  if (last === undefined) return 0;
  const { historyFrom, messagePosition } = decodePayload(EventKind.TurnDispatched, last.payload);
  return journal.filter(
    (e) =>
      e.kind === EventKind.MessageReceived &&
      e.position >= historyFrom &&
      e.position < messagePosition,
  ).length;
}

function cpuNow(groups: ReadonlyMap<string, number | undefined>): Map<string, number> {
  return new Map([...groups].map(([name, pid]) => [name, cpuMs(pid)]));
}

/** `turns` turns on one conversation, timed, with the CPU each process spent on them. */
async function block(
  client: Client,
  measured: Measured,
  groups: ReadonlyMap<string, number | undefined>,
  round: number,
  sizes: Sizes,
): Promise<void> {
  const text = 'm'.repeat(sizes.text);
  const before = cpuNow(groups);
  for (let i = 0; i < sizes.turns; i++) {
    const started = hrMs();
    await post(client, measured.uid, text, `r${round}-${i}`);
    measured.samples.push(hrMs() - started);
  }
  const after = cpuNow(groups);
  for (const [name, end] of after) {
    measured.cpu.set(name, (measured.cpu.get(name) ?? 0) + end - (before.get(name) ?? 0));
  }
}

async function processGroups(
  stack: TurnStack,
  names: readonly string[],
): Promise<Map<string, number | undefined>> {
  const groups = new Map<string, number | undefined>([
    ['control plane', stack.controlPlane(0).child?.pid],
    ['state plane', stack.state.process?.child.pid],
  ]);
  for (const name of names) groups.set(`harness ${name}`, (await stack.harness(name)).pid);
  return groups;
}

function report(results: readonly Measured[], turnsEach: number): boolean {
  const perTurn = (m: Measured, group: string): number => (m.cpu.get(group) ?? 0) / turnsEach;
  const harnessOf = (m: Measured): number => perTurn(m, `harness history-${m.history}`);
  for (const m of results) {
    console.log(
      `history ${m.history} turns: p50 ${ms(quantile(m.samples, 0.5))}, p99 ${ms(quantile(m.samples, 0.99))}; CPU per turn: control plane ${ms(perTurn(m, 'control plane'))}, state plane ${ms(perTurn(m, 'state plane'))}, harness ${ms(harnessOf(m))} (${m.samples.length} turns; the last given ${m.window ?? '?'} earlier turns)`,
    );
  }
  const base = results[0];
  const longest = results[results.length - 1];
  if (base === undefined || longest === undefined) return false;
  const cpuRatio = perTurn(longest, 'control plane') / perTurn(base, 'control plane');
  const p50Ratio = quantile(longest.samples, 0.5) / quantile(base.samples, 0.5);
  console.log(
    `  baseline: history ${base.history} (same run). At ${longest.history}: control-plane CPU per turn ${cpuRatio.toFixed(2)}× (aim ≤ ${AIM_RATIO}×: ${verdict(cpuRatio <= AIM_RATIO)}), p50 ${p50Ratio.toFixed(2)}× (aim ≤ ${AIM_RATIO}×: ${verdict(p50Ratio <= AIM_RATIO)})`,
  );
  return cpuRatio <= AIM_RATIO && p50Ratio <= AIM_RATIO;
}

async function measure(client: Client, sizes: Sizes): Promise<Measured[]> {
  const { stack } = client;
  progress('a template turn');
  const text = 'm'.repeat(sizes.text);
  const template = await templateTurn(client, text);
  const results: Measured[] = [];
  const state = await controlPlaneStateClient(stack);
  try {
    for (const history of sizes.histories) {
      const uid = await stack.createConversation(`history-${history}`, { owner: OWNER }, 120_000);
      const started = hrMs();
      await seedHistory(state, uid, template.config, template.turn, history);
      progress(`history ${history}: seeded in ${ms(hrMs() - started)}`);
      results.push({ history, uid, samples: [], cpu: new Map() });
    }
  } finally {
    state.close();
  }
  const groups = await processGroups(
    stack,
    sizes.histories.map((h) => `history-${h}`),
  );
  for (const m of results) {
    const started = hrMs();
    for (let i = 0; i < sizes.warmup; i++) await post(client, m.uid, text, `warm-${i}`);
    progress(`history ${m.history}: ${sizes.warmup} warm-up turns in ${ms(hrMs() - started)}`);
  }
  for (let round = 0; round < sizes.rounds; round++) {
    for (let k = 0; k < results.length; k++) {
      const m = results[(round + k) % results.length];
      if (m !== undefined) await block(client, m, groups, round, sizes);
    }
    progress(`round ${round + 1} of ${sizes.rounds}`);
  }
  for (const m of results) m.window = await lastWindow(stack, m.uid);
  return results;
}

runBench('history', RUN_LIMIT_MS, async (cleanups) => {
  const sizes = parseSizes(process.argv.slice(2));
  const load = loadavg()
    .map((l) => l.toFixed(2))
    .join(' ');
  console.log(
    `history: node ${process.version}; load average ${load}; sizes ${JSON.stringify(sizes)}`,
  );
  progress('starting the local Kubernetes control plane');
  const { cluster, messages } = await startBenchCluster('history', cleanups);
  progress('starting the stack (state plane, local node, control plane)');
  const stack = await startTurnStack({
    cluster,
    messages,
    namespacePrefix: 'bench',
    timeoutMs: 180_000,
    leaseDurationMs: 15_000,
    controlPlaneEnv: {
      POLYCHROME_LEASE_RENEW_MS: '5000',
      POLYCHROME_HISTORY_TOKENS: String(sizes.historyTokens),
      ...NO_CALLER_LIMITS,
    },
  });
  cleanups.steps.push(() => stack.stop());
  cleanups.dirs.push(stack.dir);
  const agent = new Agent({ keepAlive: true, maxSockets: 16 });
  cleanups.steps.push(() => Promise.resolve(agent.destroy()));
  const client: Client = { stack, token: await stack.mintToken(OWNER), agent };
  return stack.withDiagnostics(async () =>
    report(await measure(client, sizes), sizes.rounds * sizes.turns),
  );
});
