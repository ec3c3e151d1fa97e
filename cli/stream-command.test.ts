import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { join } from 'node:path';

import { afterEach, describe, expect, it } from '@jest/globals';

import { StateCallError } from '../common/state-call-errors';
import {
  ALICE,
  BOB,
  pollUntil,
  startApi,
  TOKENS,
  type TestApi,
} from '../test/support/api-fixtures';
import { committedEvents, startApiStack, type ApiStack } from '../test/support/api-stack';
import { textReply } from '../test/support/real-turns';
import { type FollowJournal } from '../operator/public-api/journal-feed';
import { TcpRelay } from '../test/support/tcp-relay';
import { ApiClient } from './api-client';
import { followEvents } from './event-follower';
import { ExitCode } from './cli-support';
import { runCaptured, startCli, type Running } from './testdata/captured-run';

/*
 * `polychrome stream`: the CLI's own code against the real public API on 127.0.0.1:0 over
 * the real coordinator, journal store and in-process harness. The faults are real too: a
 * TCP relay that drops the connection in the middle of an event, a replica that shuts
 * down, a journal follow that fails, a token revoked mid-stream, a server that is gone.
 */

/** Events a first turn without tools commits (batch one, the agent configuration, batch two). */
const FIRST_TURN = 8;
/** Events each later turn without tools commits. */
const NEXT_TURN = 6;

const stopping: (() => Promise<void>)[] = [];

afterEach(async () => {
  for (const stop of stopping.splice(0).reverse()) await stop();
});

async function start(
  options: Parameters<typeof startApiStack>[0] = {},
): Promise<ApiStack & { id: string }> {
  const stack = await startApiStack(options);
  stopping.push(() => stack.api.close());
  return { ...stack, id: stack.conversationId };
}

async function relayTo(api: TestApi): Promise<TcpRelay> {
  const relay = await TcpRelay.start(api.port);
  stopping.push(() => relay.close());
  return relay;
}

/** Starts `polychrome stream ARGS`; stopped (as Ctrl-C does) after the test if still running. */
function stream(args: readonly string[], env: Readonly<Record<string, string>>): Running {
  const running = startCli(['stream', ...args], env);
  stopping.push(async () => {
    running.stop();
    await running.done;
  });
  return running;
}

/** Waits until the stream printed the event at `position`. */
function lineAt(running: Running, position: number, timeoutMs = 5_000): Promise<true> {
  const line = new RegExp(`^\\[${String(position)}\\] `, 'mu');
  return pollUntil(
    `position ${String(position)} printed`,
    () => line.test(running.stdout()),
    timeoutMs,
  );
}

/** Position and kind of each event line printed (`[N] kind: ...`), in order. */
function printed(stdout: string): { position: number; kind: string }[] {
  return [...stdout.matchAll(/^\[(\d+)\] ([a-z_]+): /gmu)].map((m) => ({
    position: Number(m[1]),
    kind: String(m[2]),
  }));
}

/**
 * The live reply of one model step as `polychrome stream` printed it: its lines
 * (`[live] step N: ...`, split wherever a committed event came in between) put together,
 * and where the last of them is among all the lines.
 */
function live(lines: readonly string[], step: number): { text: string; last: number } {
  const prefix = `[live] step ${String(step)}: `;
  return {
    text: lines
      .filter((l) => l.startsWith(prefix))
      .map((l) => l.slice(prefix.length))
      .join(''),
    last: lines.findLastIndex((l) => l.startsWith(prefix)),
  };
}

/** The index of the line of the event at `position`. */
function lineOf(lines: readonly string[], position: number): number {
  return lines.findIndex((l) => l.startsWith(`[${String(position)}] `));
}

/** Position and kind of each committed event of the conversation, in journal order. */
async function journal(api: TestApi, id: string): Promise<{ position: number; kind: string }[]> {
  return (await committedEvents(api, id)).map(({ position, kind }) => ({ position, kind }));
}

/** The stream requests the API served (its log line per request). */
function streamRequests(api: TestApi): Record<string, unknown>[] {
  return api.logs.filter((l) => l.msg === 'request served' && String(l.route).endsWith('/stream'));
}

function payloadField(payload: unknown, name: string): string {
  const value: unknown =
    typeof payload === 'object' && payload !== null ? Reflect.get(payload, name) : undefined;
  return String(value);
}

describe('stream', () => {
  it('prints each committed event as one line and the live reply, and follows the turns that come', async () => {
    const s = await start({ replies: [textReply('It is 42.'), textReply('You are welcome.')] });
    await runCaptured(['send', s.id, 'what is\n6 * 7?'], s.env);
    const running = stream([s.id], s.env);
    await lineAt(running, FIRST_TURN - 1);
    await runCaptured(['send', s.id, 'thanks'], s.env);
    await lineAt(running, FIRST_TURN + NEXT_TURN - 1);
    running.stop();
    const run = await running.done;
    expect(run.code).toBe(ExitCode.Ok);
    expect(run.stderr).toBe('');
    const events = await committedEvents(s.api, s.id);
    const [first, second] = events
      .filter((e) => e.kind === 'turn_dispatched')
      .map((e) => payloadField(e.payload, 'turnId'));
    const key = payloadField(events.find((e) => e.kind === 'signed_root')?.payload, 'keyId');
    const lines = run.stdout.split('\n');
    // The reply streams while the turn commits: its live lines come before its model_call,
    // split wherever a committed event came in between (live text does not wait for the
    // journal, so it may even come before the turn's message).
    const reply = live(lines, 1);
    expect(reply.text).toBe('You are welcome.');
    expect(reply.last).toBeLessThan(lineOf(lines, 11));
    expect(lines.filter((l) => !l.startsWith('[live] '))).toEqual([
      `[0] message_received: ${ALICE.identity}: what is 6 * 7?`,
      `[1] turn_dispatched: turn ${String(first)} attempt 1 to test-replica`,
      `[2] signed_root: covers 2 events, key ${key}`,
      expect.stringMatching(/^\[3\] agent_config: \{/u),
      `[4] signed_root: covers 4 events, key ${key}`,
      '[5] model_call: step 1, scripted (end_turn): It is 42.',
      '[6] turn_complete: It is 42.',
      `[7] signed_root: covers 7 events, key ${key}`,
      `[8] message_received: ${ALICE.identity}: thanks`,
      `[9] turn_dispatched: turn ${String(second)} attempt 1 to test-replica`,
      `[10] signed_root: covers 10 events, key ${key}`,
      '[11] model_call: step 1, scripted (end_turn): You are welcome.',
      '[12] turn_complete: You are welcome.',
      `[13] signed_root: covers 13 events, key ${key}`,
      '',
    ]);
  });

  it('resumes a connection dropped in the middle of an event after the last whole one, printing every event once', async () => {
    const s = await start({ replies: [textReply('stream me back, please')] });
    const relay = await relayTo(s.api);
    // The connection drops once the reply's commit (model_call) is half sent.
    const cut = relay.cutWithin('event: model_call\n', 12);
    const running = stream([s.id, '--since', '0'], { ...s.env, POLYCHROME_API_URL: relay.url });
    await pollUntil('the stream listens', () => s.api.service.deltaListeners(s.id) === 1);
    await runCaptured(['send', s.id, 'stream me'], s.env);
    await cut;
    await lineAt(running, FIRST_TURN - 1);
    running.stop();
    const run = await running.done;
    expect(run.code).toBe(ExitCode.Ok);
    expect(printed(run.stdout)).toEqual(await journal(s.api, s.id));
    // The live reply came whole before the drop, each of its lines closed before the next event.
    const lines = run.stdout.split('\n');
    const reply = live(lines, 1);
    expect(reply.text).toBe('stream me back, please');
    expect(reply.last).toBeLessThan(lineOf(lines, 5));
    expect(run.stderr).toMatch(
      /^polychrome: stream interrupted \(.+\); reconnecting in 1\.0 s after position 4 \(reconnect 1 of 8\)\n$/u,
    );
    // The second connection asked for what came after position 4 (Last-Event-ID: 4).
    expect(s.api.follows.liveFollows.map((f) => f.fromPosition)).toEqual([0, 5]);
  });

  it('reconnects to another replica after event: shutdown, from after the last event', async () => {
    const s = await start({ replies: [textReply('one'), textReply('two')] });
    await runCaptured(['send', s.id, 'first'], s.env);
    const relay = await relayTo(s.api);
    const running = stream([s.id], { ...s.env, POLYCHROME_API_URL: relay.url });
    await lineAt(running, FIRST_TURN - 1);

    // A rolling update: the relay sends new connections to the other replica, this one stops.
    const other = await startApi({ replicaOf: s.api });
    stopping.push(() => other.close());
    relay.target = other.port;
    await s.api.server.close();
    await runCaptured(['send', s.id, 'second'], { ...s.env, POLYCHROME_API_URL: other.base });
    await lineAt(running, FIRST_TURN + NEXT_TURN - 1);
    running.stop();
    const run = await running.done;
    expect(run.code).toBe(ExitCode.Ok);
    expect(printed(run.stdout)).toEqual(await journal(s.api, s.id));
    expect(run.stderr).toBe(
      'polychrome: stream interrupted (the replica is shutting down: this control plane replica ' +
        'is shutting down; reconnect (with Last-Event-ID) to resume); reconnecting in 1.0 s after ' +
        'position 7 (reconnect 1 of 8)\n',
    );
    expect(other.follows.follows[0]?.fromPosition).toBe(FIRST_TURN);
  });

  it('reconnects after the API gives up on the journal (event: error unavailable), from after the last event', async () => {
    let broken = false;
    // eslint-disable-next-line require-yield
    const failing: FollowJournal = async function* () {
      await Promise.resolve();
      throw new StateCallError('unavailable', 'no state plane', {
        method: 'Read',
        grpcStatus: 14,
        fromServer: false,
      });
    };
    const s = await start({
      replies: [textReply('one'), textReply('two')],
      follow: (real) => (partition, from, signal, options) =>
        broken ? failing(partition, from, signal, options) : real(partition, from, signal, options),
    });
    await runCaptured(['send', s.id, 'first'], s.env);
    const running = stream([s.id], s.env);
    await lineAt(running, FIRST_TURN - 1);
    await pollUntil('the follow waits', () => s.api.follows.activeFollowers === 1);

    // The state plane goes away: the API's retries fail, then the stream ends with an error.
    broken = true;
    s.api.follows.failFollowers(
      new StateCallError('unavailable', 'state plane restarting', {
        method: 'Read',
        grpcStatus: 14,
        fromServer: true,
      }),
    );
    await pollUntil('the notice', () => running.stderr().includes('reconnecting'));
    broken = false;
    await runCaptured(['send', s.id, 'second'], s.env);
    await lineAt(running, FIRST_TURN + NEXT_TURN - 1);
    running.stop();
    const run = await running.done;
    expect(printed(run.stdout)).toEqual(await journal(s.api, s.id));
    expect(run.stderr).toBe(
      `polychrome: stream interrupted (the stream ended: the journal of conversation ${s.id} ` +
        'cannot be followed right now; reconnect with Last-Event-ID to resume); reconnecting in ' +
        '1.0 s after position 7 (reconnect 1 of 8)\n',
    );
    // The reconnect asked for what came after position 7 (Last-Event-ID: 7).
    expect(s.api.follows.liveFollows.at(-1)?.fromPosition).toBe(FIRST_TURN);
  });

  it('starts after --last-event-id, or at --since', async () => {
    const s = await start();
    await runCaptured(['send', s.id, 'hi'], s.env);
    const all = await journal(s.api, s.id);
    for (const [args, first] of [
      [['--last-event-id', '3'], 4],
      [['--since', '5'], 5],
    ] as const) {
      const running = stream([s.id, ...args], s.env);
      await lineAt(running, FIRST_TURN - 1);
      running.stop();
      const run = await running.done;
      expect(printed(run.stdout)).toEqual(all.slice(first));
    }
  });

  it('prints one JSON object per event, as committed, and the live deltas as kind delta', async () => {
    const s = await start({ replies: [textReply('stream me back, please')] });
    const running = stream([s.id, '--json'], s.env);
    await pollUntil('the stream listens', () => s.api.service.deltaListeners(s.id) === 1);
    await runCaptured(['send', s.id, 'stream me'], s.env);
    await pollUntil('the last event', () =>
      running.stdout().includes(`"position":${String(FIRST_TURN - 1)},`),
    );
    running.stop();
    const lines = (await running.done).stdout
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line) as Record<string, unknown>);
    const events = await committedEvents(s.api, s.id);
    expect(lines.filter((l) => l.kind !== 'delta')).toEqual(events);
    const deltas = lines.filter((l) => l.kind === 'delta');
    const turnId = payloadField(events[0]?.payload, 'turnId');
    for (const delta of deltas) {
      expect(delta).toEqual({ kind: 'delta', turnId, step: 1, text: expect.any(String) });
    }
    expect(deltas.map((d) => d.text).join('')).toBe('stream me back, please');
    // The live text comes before the reply's commit.
    expect(lines.indexOf(deltas.at(-1)!)).toBeLessThan(
      lines.findIndex((l) => l.kind === 'model_call'),
    );
  });

  it('stops without reconnecting when the token stops working mid-stream', async () => {
    const s = await start({ heartbeatMs: 20, authCacheMs: 1_000 });
    await runCaptured(['send', s.id, 'hi'], s.env);
    const running = stream([s.id], s.env);
    await lineAt(running, FIRST_TURN - 1);
    s.api.tokens.callers.delete(TOKENS.alice);
    s.api.clock.nowMs += 1_001;
    const run = await running.done;
    expect(run.code).toBe(ExitCode.Error);
    expect(printed(run.stdout)).toEqual(await journal(s.api, s.id));
    expect(run.stderr).toMatch(/^polychrome: the stream ended: .+ \(unauthenticated\)\n$/u);
    await pollUntil('the stream in the log', () => streamRequests(s.api).length === 1);
    expect(streamRequests(s.api)).toHaveLength(1);
  });

  it('exits 3 on 401, 403 and 404 answers without retrying', async () => {
    const s = await start();
    const denied = await runCaptured(['stream', s.id], {
      ...s.env,
      POLYCHROME_TOKEN: TOKENS.unknown,
    });
    expect(denied.code).toBe(ExitCode.Error);
    expect(denied.stderr).toMatch(/^polychrome: .+ \(unauthenticated, HTTP 401, request id /u);
    const stranger = await runCaptured(['stream', s.id], {
      ...s.env,
      POLYCHROME_TOKEN: TOKENS.bob,
    });
    expect(stranger.code).toBe(ExitCode.Error);
    expect(stranger.stderr).toContain(BOB.identity);
    expect(stranger.stderr).toContain('(permission_denied, HTTP 403, request id ');
    const missing = await runCaptured(['stream', '11111111-2222-4333-8444-555555555555'], s.env);
    expect(missing.code).toBe(ExitCode.Error);
    expect(missing.stderr).toMatch(
      /^polychrome: .*11111111-2222-4333-8444-555555555555.* \(not_found, HTTP 404, request id /u,
    );
    await pollUntil('three stream requests', () => streamRequests(s.api).length >= 3);
    expect(streamRequests(s.api).map((l) => l.status)).toEqual([401, 403, 404]);
    expect(s.api.follows.follows).toHaveLength(0);
  });

  it('gives up after the bounded attempts when the API is gone', async () => {
    const s = await start();
    await s.api.server.close();
    const notices: string[] = [];
    const started = Date.now();
    await expect(
      followEvents({
        client: new ApiClient({ baseUrl: s.api.base, token: TOKENS.alice }),
        conversationId: s.id,
        start: { lastEventId: 4 },
        signal: new AbortController().signal,
        onEvent: () => undefined,
        onDelta: () => undefined,
        onNotice: (text) => void notices.push(text),
        baseDelayMs: 20,
        maxDelayMs: 40,
        maxAttempts: 3,
      }),
    ).rejects.toThrow(
      new RegExp(
        `^gave up on the stream of conversation ${s.id}: 3 reconnects in a row failed: cannot reach the Polychrome API at ${s.api.base}: ECONNREFUSED.*; resume with --last-event-id 4$`,
        'u',
      ),
    );
    expect(
      notices.map((n) =>
        /reconnecting in ([0-9.]+) s after position 4 \(reconnect (\d) of 3\)/u.exec(n)?.slice(1),
      ),
    ).toEqual([
      ['0.0', '1'],
      ['0.0', '2'],
      ['0.0', '3'],
    ]);
    // 20 + 40 + 40 ms of backoff (doubling, capped): bounded but real.
    expect(Date.now() - started).toBeGreaterThanOrEqual(100);
  });

  it('stops on SIGINT and exits 0 (the real entry point)', async () => {
    const s = await start();
    await runCaptured(['send', s.id, 'hi'], s.env);
    const child = spawn(
      process.execPath,
      ['--import', 'tsx', join(__dirname, 'polychrome.ts'), 'stream', s.id],
      { env: { PATH: process.env.PATH ?? '', ...s.env }, stdio: ['ignore', 'pipe', 'pipe'] },
    );
    let out = '';
    child.stdout.on('data', (chunk: Buffer) => (out += chunk.toString()));
    const exited = once(child, 'exit');
    await pollUntil('the events', () => out.includes(`[${String(FIRST_TURN - 1)}] `), 30_000);
    child.kill('SIGINT');
    const [code, signal] = (await exited) as [number | null, NodeJS.Signals | null];
    expect({ code, signal }).toEqual({ code: 0, signal: null });
    expect(printed(out)).toEqual(await journal(s.api, s.id));
  }, 40_000);
});
