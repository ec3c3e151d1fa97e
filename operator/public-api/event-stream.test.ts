import { afterEach, describe, expect, it } from '@jest/globals';
import { AppError } from '../../common/errors';
import { StateCallError } from '../../common/state-call-errors';
import type { FollowJournal } from './journal-feed';
import {
  ALICE,
  BOB,
  call,
  dataOf,
  errorOf,
  pollUntil,
  SseClient,
  startApi,
  TEST_NOW_MS,
  TOKENS,
  toolResults,
  type TestApi,
} from '../../test/support/api-fixtures';
import { textReply } from '../../test/support/real-turns';

let api: TestApi | undefined;
const clients: SseClient[] = [];

afterEach(async () => {
  for (const client of clients.splice(0)) client.close();
  await api?.close();
  api = undefined;
});

const ALICE_ID = ALICE.identity;
/** Events one completed turn without tools commits: batch one and batch two, each sealed. */
const TURN_EVENTS = 6;
/**
 * The first turn also records the agent configuration before its first model call
 * (`agent_config` and its seal, docs/replay.md).
 */
const FIRST_TURN_EVENTS = TURN_EVENTS + 2;

/** Events a conversation holds after `turns` completed turns without tools. */
function eventsOf(turns: number): number {
  return turns === 0 ? 0 : FIRST_TURN_EVENTS + (turns - 1) * TURN_EVENTS;
}

async function start(options: Parameters<typeof startApi>[0] = {}): Promise<TestApi> {
  api = await startApi(options);
  return api;
}

async function open(
  a: TestApi,
  path: string,
  headers: Record<string, string> = {},
  token: string = TOKENS.alice,
): Promise<SseClient> {
  const client = await SseClient.open(a, path, { authorization: `Bearer ${token}`, ...headers });
  clients.push(client);
  return client;
}

/** A conversation of Alice's with `turns` completed turns ({@link TURN_EVENTS} events each). */
async function conversationWithTurns(a: TestApi, turns: number): Promise<string> {
  const id = a.seed(ALICE_ID);
  for (let i = 0; i < turns; i += 1) {
    const answer = await call(a, 'POST', `/v1/conversations/${id}/messages`, {
      token: TOKENS.alice,
      body: { text: `message ${String(i)}`, idempotencyKey: `k-${String(i)}` },
    });
    expect(answer.status).toBe(200);
  }
  return id;
}

function range(from: number, to: number): number[] {
  return Array.from({ length: to - from }, (_, i) => from + i);
}

describe('GET /v1/conversations/{id}/stream', () => {
  it('sends retry, then every committed event with id = position, event = kind and decoded JSON data; then follows', async () => {
    const a = await start();
    const id = await conversationWithTurns(a, 1);
    const client = await open(a, `/v1/conversations/${id}/stream`);
    expect(client.status).toBe(200);
    expect(client.headers['content-type']).toBe('text/event-stream; charset=utf-8');
    expect(client.headers['cache-control']).toBe('no-store');
    await client.waitFor('one turn', () => client.events().length === eventsOf(1));
    expect(client.messages[0]).toEqual({ retry: '1000', comments: [] });

    const events = client.events();
    expect(events.map((e) => e.event)).toEqual([
      'message_received',
      'turn_dispatched',
      'signed_root',
      'agent_config',
      'signed_root',
      'model_call',
      'turn_complete',
      'signed_root',
    ]);
    for (const event of events) {
      const data = dataOf(event);
      expect(data.position).toBe(Number(event.id));
      expect(data.kind).toBe(event.event);
    }
    expect(dataOf(events[0])).toEqual({
      position: 0,
      kind: 'message_received',
      payload: {
        turnId: expect.stringMatching(/^turn_[0-9a-f]{32}$/),
        idempotencyKey: 'k-0',
        text: 'message 0',
        attribution: {
          caller: ALICE_ID,
          participants: [ALICE_ID],
          persona: 'persona-alice',
          session: 'session-alice',
        },
        receivedAtMs: TEST_NOW_MS,
      },
    });
    // Bytes are base64 in proto3 JSON; a client can check the signature itself.
    const root = dataOf(events[2]).payload as Record<string, unknown>;
    expect(root).toEqual({
      leafCount: 2,
      root: expect.any(String),
      keyId: a.turns.journal.store.signingKeyId,
      signature: expect.any(String),
      version: 2,
      partition: `conv-${id}`,
    });
    expect(Buffer.from(String(root.root), 'base64')).toHaveLength(32);
    expect(Buffer.from(String(root.signature), 'base64')).toHaveLength(64);
    expect(dataOf(events[6]).payload).toMatchObject({ text: 'reply 1' });

    await call(a, 'POST', `/v1/conversations/${id}/messages`, {
      token: TOKENS.alice,
      body: { text: 'later' },
    });
    await client.waitFor('the next turn', () => client.events().length === eventsOf(2));
    expect(client.positions()).toEqual(range(0, eventsOf(2)));
    expect(a.follows.follows).toHaveLength(1);
    expect(a.follows.follows[0]).toMatchObject({ partition: `conv-${id}`, fromPosition: 0 });
  });

  it('resumes after Last-Event-ID (header or query), starts at since= inclusive, and lets Last-Event-ID win', async () => {
    const a = await start();
    const id = await conversationWithTurns(a, 2);
    const base = `/v1/conversations/${id}/stream`;
    const cases: { path: string; headers?: Record<string, string>; first: number }[] = [
      { path: base, headers: { 'last-event-id': '3' }, first: 4 },
      { path: `${base}?lastEventId=3`, first: 4 },
      { path: `${base}?lastEventId=3`, headers: { 'last-event-id': '3' }, first: 4 },
      { path: `${base}?since=5`, first: 5 },
      { path: `${base}?since=5`, headers: { 'last-event-id': '7' }, first: 8 },
      { path: base, headers: { 'last-event-id': '' }, first: 0 },
      { path: `${base}?lastEventId=`, first: 0 },
    ];
    for (const c of cases) {
      const client = await open(a, c.path, c.headers);
      await client.waitFor(`events through 13 for ${c.path}`, () =>
        client.positions().includes(13),
      );
      expect(client.positions()).toEqual(range(c.first, 14));
    }
    // One shared follow (from the first stream's position); the streams behind it read
    // their missing events once, bounded; the others take them from the hub's ring.
    expect(a.follows.liveFollows.map((f) => f.fromPosition)).toEqual([4]);
    expect(
      a.follows.follows.filter((f) => f.limit !== undefined).map((f) => [f.fromPosition, f.limit]),
    ).toEqual([
      [0, 4],
      [0, 4],
    ]);
  });

  it.each([
    ['header', '-1'],
    ['header', 'abc'],
    ['header', '1.5'],
    ['header', '1e3'],
    ['header', '0x10'],
    ['header', '1234567890123456'],
    ['query', '-1'],
    ['since', ' 1'],
    ['since', '99999999999999999999'],
  ])('refuses a malformed cursor (%s %j) with 400 before streaming', async (where, value) => {
    const a = await start();
    const id = await conversationWithTurns(a, 1);
    const base = `/v1/conversations/${id}/stream`;
    const answer =
      where === 'header'
        ? await call(a, 'GET', base, { token: TOKENS.alice, headers: { 'last-event-id': value } })
        : await call(
            a,
            'GET',
            `${base}?${where === 'query' ? 'lastEventId' : 'since'}=${encodeURIComponent(value)}`,
            { token: TOKENS.alice },
          );
    expect(answer.status).toBe(400);
    const field =
      where === 'header' ? 'Last-Event-ID' : where === 'query' ? 'lastEventId' : 'since';
    expect(errorOf(answer)).toMatchObject({
      code: 'invalid_argument',
      details: { field },
      message: expect.stringContaining(`${field} must be a journal position`),
    });
    expect(a.follows.follows).toHaveLength(0);
  });

  it('refuses a header and a query lastEventId that differ', async () => {
    const a = await start();
    const id = await conversationWithTurns(a, 1);
    const answer = await call(a, 'GET', `/v1/conversations/${id}/stream?lastEventId=2`, {
      token: TOKENS.alice,
      headers: { 'last-event-id': '3' },
    });
    expect(answer.status).toBe(400);
    expect(errorOf(answer).message).toContain('(3) and the lastEventId query parameter (2) differ');
    expect(a.follows.follows).toHaveLength(0);
  });

  it('authorizes through the service before streaming: 404 unknown, 403 stranger, 401 no token', async () => {
    const a = await start();
    const id = await conversationWithTurns(a, 1);
    const unknown = await call(
      a,
      'GET',
      '/v1/conversations/0b5c3a9e-4f0d-4d0a-9a52-6f1e2b7c8d90/stream',
      {
        token: TOKENS.alice,
      },
    );
    expect(unknown.status).toBe(404);
    const stranger = await call(a, 'GET', `/v1/conversations/${id}/stream`, { token: TOKENS.bob });
    expect(stranger.status).toBe(403);
    const anonymous = await call(a, 'GET', `/v1/conversations/${id}/stream`);
    expect(anonymous.status).toBe(401);
    expect(a.follows.follows).toHaveLength(0);
    expect(a.server.openStreams).toBe(0);
  });

  it('sends live text deltas as event: delta without an id, before the events committed after them', async () => {
    const a = await start({ replies: [textReply('stream me back, please')] });
    const id = a.seed(ALICE_ID);
    const client = await open(a, `/v1/conversations/${id}/stream`);
    await pollUntil('delta subscription', () => a.service.deltaListeners(id) === 1);
    const answer = await call(a, 'POST', `/v1/conversations/${id}/messages`, {
      token: TOKENS.alice,
      body: { text: 'stream me' },
    });
    const turnId = (answer.json as { turnId: string }).turnId;
    await client.waitFor('turn_complete', () =>
      client.messages.some((m) => m.event === 'turn_complete'),
    );
    const deltas = client.messages.filter((m) => m.event === 'delta');
    // The scripted model streams its reply word by word.
    expect(deltas.length).toBeGreaterThan(1);
    for (const delta of deltas) expect(delta.id).toBeUndefined();
    expect(deltas.map((d) => dataOf(d).text).join('')).toBe('stream me back, please');
    for (const delta of deltas) expect(dataOf(delta)).toMatchObject({ turnId, step: 1 });
    // Deltas go out before the reply's commit (batch two), and never move the cursor.
    const lastDelta = client.messages.lastIndexOf(deltas.at(-1)!);
    const batchTwo = client.messages.findIndex((m) => m.event === 'model_call');
    expect(lastDelta).toBeLessThan(batchTwo);
    expect(client.positions()).toEqual(range(0, eventsOf(1)));
  });

  it('sends a keep-alive comment every heartbeatMs', async () => {
    const a = await start({ heartbeatMs: 20 });
    const id = a.seed(ALICE_ID);
    const client = await open(a, `/v1/conversations/${id}/stream`);
    await client.waitFor(
      'three keep-alives',
      (messages) => messages.filter((m) => m.comments.includes('keep-alive')).length >= 3,
    );
    const beats = client.messages.filter((m) => m.comments.includes('keep-alive'));
    for (const beat of beats) expect(beat).toEqual({ comments: ['keep-alive'] });
  });

  it('resumes a follow that failed with unavailable from the next position: no gap, no duplicate, stream stays open', async () => {
    const a = await start();
    const id = await conversationWithTurns(a, 1);
    const client = await open(a, `/v1/conversations/${id}/stream`);
    await client.waitFor('first turn', () => client.events().length === eventsOf(1));
    await pollUntil('follower waiting', () => a.follows.activeFollowers === 1);

    const restarted = new StateCallError('unavailable', 'state plane shutting down', {
      method: 'Read',
      grpcStatus: 14,
      fromServer: true,
    });
    expect(a.follows.failFollowers(restarted)).toBe(1);
    await pollUntil('second follow', () => a.follows.follows.length === 2);
    expect(a.follows.follows[1]?.fromPosition).toBe(eventsOf(1));
    expect(a.follows.follows[0]?.signal.aborted).toBe(false);

    await call(a, 'POST', `/v1/conversations/${id}/messages`, {
      token: TOKENS.alice,
      body: { text: 'after restart' },
    });
    await client.waitFor('second turn', () => client.events().length >= eventsOf(2));
    expect(client.positions()).toEqual(range(0, eventsOf(2)));
    expect(client.messages.some((m) => m.event === 'error' || m.event === 'shutdown')).toBe(false);
    expect(a.server.openStreams).toBe(1);
    expect(a.logs.some((l) => l.msg === 'journal follow interrupted; resuming')).toBe(true);
  });

  it('skips events a resumed source repeats, and resumes a source that ends cleanly', async () => {
    let calls = 0;
    // A sloppy source: it always starts at 0 and ends at the head (a bounded read).
    const sloppy = (real: FollowJournal): FollowJournal =>
      async function* (partition, _from, signal) {
        calls += 1;
        yield* real(partition, 0, signal, { limit: 1_000_000 });
      };
    const a = await start({ follow: sloppy });
    const id = await conversationWithTurns(a, 1);
    const client = await open(a, `/v1/conversations/${id}/stream`);
    await client.waitFor('one turn', () => client.events().length === eventsOf(1));
    await call(a, 'POST', `/v1/conversations/${id}/messages`, {
      token: TOKENS.alice,
      body: { text: 'y' },
    });
    await client.waitFor('two turns', () => client.events().length === eventsOf(2));
    expect(client.positions()).toEqual(range(0, eventsOf(2)));
    expect(calls).toBeGreaterThan(1);
  });

  it('gives up after the configured attempts without progress and ends with event: error', async () => {
    let calls = 0;
    // eslint-disable-next-line require-yield
    const follow: FollowJournal = async function* () {
      calls += 1;
      await Promise.resolve();
      throw new StateCallError('unavailable', 'no state plane', {
        method: 'Read',
        grpcStatus: 14,
        fromServer: false,
      });
    };
    const a = await start({
      follow: () => follow,
      followRetry: { attempts: 2, baseDelayMs: 1, maxDelayMs: 2 },
    });
    const id = a.seed(ALICE_ID);
    const client = await open(a, `/v1/conversations/${id}/stream`);
    await client.ended;
    expect(calls).toBe(3);
    const last = client.messages.at(-1);
    expect(last?.event).toBe('error');
    expect(dataOf(last)).toEqual({
      error: {
        code: 'unavailable',
        message: `the journal of conversation ${id} cannot be followed right now; reconnect with Last-Event-ID to resume`,
        details: { nextPosition: 0 },
      },
    });
    await pollUntil('stream released', () => a.server.openStreams === 0);
  });

  it('ends at once with event: error when the follow fails for good', async () => {
    let calls = 0;
    // eslint-disable-next-line require-yield
    const follow: FollowJournal = async function* () {
      calls += 1;
      await Promise.resolve();
      throw new AppError('permission_denied', 'this replica may not read conv-x');
    };
    const a = await start({ follow: () => follow });
    const id = a.seed(ALICE_ID);
    const client = await open(a, `/v1/conversations/${id}/stream`);
    await client.ended;
    expect(calls).toBe(1);
    expect(client.messages.at(-1)?.event).toBe('error');
    expect(dataOf(client.messages.at(-1)).error).toMatchObject({ code: 'permission_denied' });
  });

  it('on close(), sends event: shutdown to every open stream, ends them, frees their follows, then resolves', async () => {
    const a = await start();
    const id = await conversationWithTurns(a, 1);
    const first = await open(a, `/v1/conversations/${id}/stream`);
    const second = await open(a, `/v1/conversations/${id}/stream`, { 'last-event-id': '2' });
    await first.waitFor('events', () => first.events().length === eventsOf(1));
    await second.waitFor('events', () => second.events().length === eventsOf(1) - 3);
    expect(a.server.openStreams).toBe(2);
    expect(await a.registry.metrics()).toContain('polychrome_api_open_streams 2');
    // Both streams of the conversation share one journal follow.
    expect(await a.registry.metrics()).toContain('polychrome_api_journal_follows 1');
    expect(a.follows.liveFollows).toHaveLength(1);

    await a.server.close();
    await Promise.all([first.ended, second.ended]);
    for (const client of [first, second]) {
      const last = client.messages.at(-1);
      expect(last?.event).toBe('shutdown');
      expect(last?.id).toBeUndefined();
      expect(dataOf(last)).toMatchObject({ conversationId: id });
    }
    expect(a.server.openStreams).toBe(0);
    expect(a.follows.follows.every((f) => f.signal.aborted)).toBe(true);
    expect(a.follows.activeFollowers).toBe(0);
    expect(a.service.deltaListeners(id)).toBe(0);
  });

  it('frees the follow (its signal aborts) and the delta listener when the client disconnects', async () => {
    const a = await start();
    const id = await conversationWithTurns(a, 1);
    const client = await open(a, `/v1/conversations/${id}/stream`);
    await client.waitFor('events', () => client.events().length === eventsOf(1));
    await pollUntil('follower waiting', () => a.follows.activeFollowers === 1);
    expect(a.service.deltaListeners(id)).toBe(1);

    client.close();
    await pollUntil('follow aborted', () => a.follows.follows[0]?.signal.aborted === true);
    await pollUntil('follower gone', () => a.follows.activeFollowers === 0);
    await pollUntil('stream released', () => a.server.openStreams === 0);
    expect(a.service.deltaListeners(id)).toBe(0);
    // The server still serves, and close() has nothing to wait for.
    expect((await call(a, 'GET', `/v1/conversations/${id}`, { token: TOKENS.alice })).status).toBe(
      200,
    );
  });

  it('pulls the next journal event only when the client keeps up (backpressure)', async () => {
    const a = await start();
    const id = a.seed(ALICE_ID);
    // 4,000 events of 8 KiB in batches the store takes (each sealed by its signed_root).
    for (let batch = 0; batch < 8; batch += 1) await a.append(id, toolResults(500, 8 * 1024));
    const total = a.head(id);
    const client = await open(a, `/v1/conversations/${id}/stream`);
    client.response?.pause();
    // Wait until the server stops pulling (two samples 100 ms apart agree).
    let previous = -1;
    const stalledAt = await pollUntil(
      'the server to stop pulling',
      async () => {
        await new Promise((resolve) => setTimeout(resolve, 100));
        const now = a.follows.delivered;
        const stable = now === previous;
        previous = now;
        return stable ? now : undefined;
      },
      10_000,
    );
    expect(stalledAt).toBeGreaterThan(0);
    expect(stalledAt).toBeLessThan(total);

    client.response?.resume();
    await client.waitFor('every event', () => client.events().length === total, 20_000);
    expect(client.positions()).toEqual(range(0, total));
  }, 30_000);

  it('writes events that commit one after another in order with exact ids, to every stream from its own start', async () => {
    const a = await start();
    const id = a.seed(ALICE_ID);
    const clients = [
      await open(a, `/v1/conversations/${id}/stream`),
      await open(a, `/v1/conversations/${id}/stream?since=2`),
    ];
    await pollUntil('follow waiting', () => a.follows.activeFollowers === 1);
    // Three batches: 2 + 1 + 3 events, each sealed: positions 0..8.
    await a.append(id, toolResults(2));
    await a.append(id, toolResults(1));
    await a.append(id, toolResults(3));
    await clients[0]?.waitFor('9 events', () => clients[0]?.events().length === 9);
    await clients[1]?.waitFor('7 events', () => clients[1]?.events().length === 7);
    expect(clients[0]?.positions()).toEqual(range(0, 9));
    expect(clients[1]?.positions()).toEqual(range(2, 9));
    expect(clients[0]?.events().map((m) => m.event)).toEqual([
      'tool_result',
      'tool_result',
      'signed_root',
      'tool_result',
      'signed_root',
      'tool_result',
      'tool_result',
      'tool_result',
      'signed_root',
    ]);
  });

  it('lets a client that stops reading mid-burst catch up from the journal, with no gap or duplicate, while another keeps up', async () => {
    const a = await start({ journalRingSize: 8 });
    const id = a.seed(ALICE_ID);
    await a.append(id, toolResults(10));
    const fast = await open(a, `/v1/conversations/${id}/stream`);
    const slow = await open(a, `/v1/conversations/${id}/stream`);
    await slow.waitFor('caught up', () => slow.events().length === 11);
    slow.response?.pause();
    for (let burst = 0; burst < 30; burst += 1) await a.append(id, toolResults(100, 8 * 1024));
    const total = a.head(id);
    await fast.waitFor('every event', () => fast.events().length === total, 20_000);
    expect(fast.positions()).toEqual(range(0, total));
    expect(slow.events().length).toBeLessThan(total);

    slow.response?.resume();
    await slow.waitFor('every event', () => slow.events().length === total, 20_000);
    expect(slow.positions()).toEqual(range(0, total));
    // It fell out of the ring and read what it missed on its own; the shared follow stayed one.
    expect(a.follows.follows.some((f) => f.limit !== undefined)).toBe(true);
    expect(a.follows.liveFollows).toHaveLength(1);
  }, 30_000);

  it('keeps nothing of a client that leaves in the middle of a burst', async () => {
    const a = await start();
    const id = a.seed(ALICE_ID);
    const staying = await open(a, `/v1/conversations/${id}/stream`);
    const leaving = await open(a, `/v1/conversations/${id}/stream`);
    await pollUntil('two delta listeners', () => a.service.deltaListeners(id) === 2);
    for (let burst = 0; burst < 20; burst += 1) {
      await a.append(id, toolResults(10, 1024));
      if (burst === 10) leaving.close();
    }
    await staying.waitFor('every event', () => staying.events().length === 220);
    expect(staying.positions()).toEqual(range(0, 220));
    await pollUntil('stream released', () => a.server.openStreams === 1);
    expect(a.service.deltaListeners(id)).toBe(1);
    expect(a.logs.filter((l) => Number(l.level) >= 50)).toEqual([]);

    staying.close();
    await pollUntil('follow aborted', () => a.follows.follows[0]?.signal.aborted === true);
    await pollUntil('no stream', () => a.server.openStreams === 0);
    expect(a.service.deltaListeners(id)).toBe(0);
  });

  it('ends a stream whose token stopped working, at the first heartbeat after the cache expired', async () => {
    const a = await start({ heartbeatMs: 20, authCacheMs: 1_000 });
    const id = a.seed(ALICE_ID);
    const client = await open(a, `/v1/conversations/${id}/stream`);
    await client.waitFor('a heartbeat', (m) => m.some((x) => x.comments.includes('keep-alive')));
    a.tokens.callers.delete(TOKENS.alice);
    a.clock.nowMs += 999;
    await client.waitFor(
      'more heartbeats',
      (m) => m.filter((x) => x.comments.length > 0).length >= 3,
    );
    expect(client.messages.some((m) => m.event === 'error')).toBe(false);

    a.clock.nowMs += 2;
    await client.ended;
    const last = client.messages.at(-1);
    expect(last?.event).toBe('error');
    expect(dataOf(last).error).toMatchObject({ code: 'unauthenticated' });
    await pollUntil('stream released', () => a.server.openStreams === 0);
  });

  it('ends the stream of a participant removed from a shared conversation with event: error permission_denied within a heartbeat, and sends nothing committed after', async () => {
    const a = await start({ heartbeatMs: 20 });
    const id = a.seed(ALICE_ID, { visibility: 'shared', participants: [BOB.identity] });
    await call(a, 'POST', `/v1/conversations/${id}/messages`, {
      token: TOKENS.alice,
      body: { text: 'before' },
    });
    const bob = await open(a, `/v1/conversations/${id}/stream`, {}, TOKENS.bob);
    const alice = await open(a, `/v1/conversations/${id}/stream`);
    await bob.waitFor('one turn', () => bob.events().length === eventsOf(1));
    // While Bob is a participant, heartbeats come and go and the stream stays.
    await bob.waitFor('heartbeats', (m) => m.filter((x) => x.comments.length > 0).length >= 3);
    expect(bob.messages.some((m) => m.event === 'error')).toBe(false);

    const removedAt = Date.now();
    a.turns.conversations.editSpec(id, (spec) => ({ ...spec, participants: [] }));
    await bob.ended;
    expect(Date.now() - removedAt).toBeLessThan(1_000);
    const last = bob.messages.at(-1);
    expect(last?.event).toBe('error');
    expect(dataOf(last).error).toMatchObject({
      code: 'permission_denied',
      message: expect.stringContaining(`${BOB.identity} may not use conversation ${id}`),
    });
    const seen = bob.events().length;

    // A turn committed after that reaches the owner's stream, not Bob's.
    await call(a, 'POST', `/v1/conversations/${id}/messages`, {
      token: TOKENS.alice,
      body: { text: 'after' },
    });
    await alice.waitFor('two turns', () => alice.events().length === eventsOf(2));
    expect(bob.events()).toHaveLength(seen);
    expect(alice.messages.some((m) => m.event === 'error')).toBe(false);
    await pollUntil('one stream left', () => a.server.openStreams === 1);
  });

  it('ends the streams of a conversation that is deleted with event: error not_found', async () => {
    const a = await start({ heartbeatMs: 20 });
    const id = await conversationWithTurns(a, 1);
    const client = await open(a, `/v1/conversations/${id}/stream`);
    await client.waitFor('one turn', () => client.events().length === eventsOf(1));
    a.turns.conversations.remove(id);
    await client.ended;
    expect(dataOf(client.messages.at(-1)).error).toMatchObject({ code: 'not_found' });
    await pollUntil('stream released', () => a.server.openStreams === 0);
  });

  it('sends unknown kinds with their raw bytes', async () => {
    // A newer state plane: the store here refuses kinds it does not know, so the follow
    // hands the stream one such event in place of the first one the store holds.
    const newer = (real: FollowJournal): FollowJournal =>
      async function* (partition, from, signal, options) {
        for await (const entry of real(partition, from, signal, options)) {
          yield entry.position === 0
            ? { position: 0, kind: 'future_kind', payload: new Uint8Array([1, 2, 3]) }
            : entry;
        }
      };
    const a = await start({ follow: newer });
    const id = a.seed(ALICE_ID);
    await a.append(id, toolResults(1));
    const client = await open(a, `/v1/conversations/${id}/stream`);
    await client.waitFor('the event and its seal', () => client.events().length === 2);
    expect(client.events()[0]?.event).toBe('future_kind');
    expect(dataOf(client.events()[0])).toEqual({
      position: 0,
      kind: 'future_kind',
      payload: null,
      payloadBase64: 'AQID',
    });
  });
});
