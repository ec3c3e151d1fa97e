import { afterEach, describe, expect, it } from '@jest/globals';
import { AppError } from '../../common/errors';
import { encodePayload, EventKind } from '../../common/event-kinds';
import { StateCallError, type NewJournalEvent } from '../../common/state-client';
import type { FollowJournal } from './event-stream';
import {
  call,
  dataOf,
  errorOf,
  pollUntil,
  SseClient,
  startApi,
  TOKENS,
  type TestApi,
} from './testdata/fixtures';
import type { InMemoryJournal } from './testdata/in-memory-journal';

let api: TestApi | undefined;
const clients: SseClient[] = [];

afterEach(async () => {
  for (const client of clients.splice(0)) client.close();
  await api?.server.close();
  api = undefined;
});

const ALICE_ID = 'email:alice@example.com';

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

/** A conversation of Alice's with `turns` completed turns (5 events each). */
async function conversationWithTurns(a: TestApi, turns: number): Promise<string> {
  const id = a.service.seed(ALICE_ID);
  for (let i = 0; i < turns; i += 1) {
    const answer = await call(a, 'POST', `/v1/conversations/${id}/messages`, {
      token: TOKENS.alice,
      body: { text: `message ${String(i)}`, idempotencyKey: `k-${String(i)}` },
    });
    expect(answer.status).toBe(200);
  }
  return id;
}

/** `count` tool_result events, each with `size` characters of content. */
function toolResults(count: number, size = 16): NewJournalEvent[] {
  const content = 'z'.repeat(size);
  return range(0, count).map(() => ({
    kind: EventKind.ToolResult,
    payload: encodePayload(EventKind.ToolResult, {
      turnId: 't',
      toolCallId: 'c',
      content,
      isError: false,
      denied: false,
    }),
  }));
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
    await client.waitFor('5 events', () => client.events().length === 5);
    expect(client.messages[0]).toEqual({ retry: '1000', comments: [] });

    const events = client.events();
    expect(events.map((e) => e.event)).toEqual([
      'message_received',
      'turn_dispatched',
      'signed_root',
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
        turnId: 'turn-1',
        idempotencyKey: 'k-0',
        text: 'message 0',
        attribution: { caller: ALICE_ID, persona: 'persona-alice' },
        receivedAtMs: 1_767_225_600_000,
      },
    });
    // Bytes are base64 in proto3 JSON; a client can check the signature itself.
    expect(dataOf(events[2]).payload).toEqual({
      leafCount: 2,
      root: Buffer.alloc(32, 2).toString('base64'),
      keyId: 'in-memory',
      signature: Buffer.alloc(64).toString('base64'),
    });
    expect(dataOf(events[3]).payload).toMatchObject({ text: 'echo: message 0' });

    await call(a, 'POST', `/v1/conversations/${id}/messages`, {
      token: TOKENS.alice,
      body: { text: 'later' },
    });
    await client.waitFor('the next turn', () => client.events().length === 10);
    expect(client.positions()).toEqual(range(0, 10));
    expect(a.journal.follows).toHaveLength(1);
    expect(a.journal.follows[0]).toMatchObject({ partition: `conv-${id}`, fromPosition: 0 });
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
      await client.waitFor(`events through 9 for ${c.path}`, () => client.positions().includes(9));
      expect(client.positions()).toEqual(range(c.first, 10));
    }
    // One shared follow (from the first stream's position); the streams behind it read
    // their missing events once, bounded; the others take them from the hub's ring.
    expect(a.journal.liveFollows.map((f) => f.fromPosition)).toEqual([4]);
    expect(
      a.journal.follows.filter((f) => f.limit !== undefined).map((f) => [f.fromPosition, f.limit]),
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
    expect(a.journal.follows).toHaveLength(0);
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
    expect(a.journal.follows).toHaveLength(0);
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
    expect(a.journal.follows).toHaveLength(0);
    expect(a.server.openStreams).toBe(0);
  });

  it('sends live text deltas as event: delta without an id', async () => {
    const a = await start();
    const id = a.service.seed(ALICE_ID);
    const client = await open(a, `/v1/conversations/${id}/stream`);
    await pollUntil('delta subscription', () => a.service.deltaListeners(id) === 1);
    await call(a, 'POST', `/v1/conversations/${id}/messages`, {
      token: TOKENS.alice,
      body: { text: 'stream me' },
    });
    await client.waitFor('turn_complete', () =>
      client.messages.some((m) => m.event === 'turn_complete'),
    );
    const deltas = client.messages.filter((m) => m.event === 'delta');
    expect(deltas).toHaveLength(2);
    for (const delta of deltas) expect(delta.id).toBeUndefined();
    expect(deltas.map((d) => dataOf(d))).toEqual([
      { turnId: 'turn-1', step: 1, text: 'echo: st' },
      { turnId: 'turn-1', step: 2, text: 'ream me' },
    ]);
    // Deltas do not move the cursor: every committed event still has its own id.
    expect(client.positions()).toEqual(range(0, 5));
  });

  it('sends a keep-alive comment every heartbeatMs', async () => {
    const a = await start({ heartbeatMs: 20 });
    const id = a.service.seed(ALICE_ID);
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
    await client.waitFor('first turn', () => client.events().length === 5);
    await pollUntil('follower waiting', () => a.journal.activeFollowers === 1);

    const restarted = new StateCallError('unavailable', 'state plane shutting down', {
      method: 'Read',
      grpcStatus: 14,
      fromServer: true,
    });
    expect(a.journal.failFollowers(restarted)).toBe(1);
    await pollUntil('second follow', () => a.journal.follows.length === 2);
    expect(a.journal.follows[1]?.fromPosition).toBe(5);
    expect(a.journal.follows[0]?.signal.aborted).toBe(false);

    await call(a, 'POST', `/v1/conversations/${id}/messages`, {
      token: TOKENS.alice,
      body: { text: 'after restart' },
    });
    await client.waitFor('second turn', () => client.events().length >= 10);
    expect(client.positions()).toEqual(range(0, 10));
    expect(client.messages.some((m) => m.event === 'error' || m.event === 'shutdown')).toBe(false);
    expect(a.server.openStreams).toBe(1);
    expect(a.logs.some((l) => l.msg === 'journal follow interrupted; resuming')).toBe(true);
  });

  it('skips events a resumed source repeats, and resumes a source that ends cleanly', async () => {
    const ref: { journal?: InMemoryJournal } = {};
    let calls = 0;
    // A sloppy source: it always starts at 0 and ends after what is there.
    const follow: FollowJournal = async function* (partition, _from, signal) {
      calls += 1;
      for (const entry of ref.journal?.entries(partition) ?? []) {
        if (signal.aborted) return;
        yield await Promise.resolve(entry);
      }
    };
    const a = await start({ follow });
    ref.journal = a.journal;
    const id = await conversationWithTurns(a, 1);
    const client = await open(a, `/v1/conversations/${id}/stream`);
    await client.waitFor('5 events', () => client.events().length === 5);
    await call(a, 'POST', `/v1/conversations/${id}/messages`, {
      token: TOKENS.alice,
      body: { text: 'y' },
    });
    await client.waitFor('10 events', () => client.events().length === 10);
    expect(client.positions()).toEqual(range(0, 10));
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
    const a = await start({ follow, followRetry: { attempts: 2, baseDelayMs: 1, maxDelayMs: 2 } });
    const id = a.service.seed(ALICE_ID);
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
    const a = await start({ follow });
    const id = a.service.seed(ALICE_ID);
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
    await first.waitFor('events', () => first.events().length === 5);
    await second.waitFor('events', () => second.events().length === 2);
    expect(a.server.openStreams).toBe(2);
    expect(await a.registry.metrics()).toContain('polychrome_api_open_streams 2');
    // Both streams of the conversation share one journal follow.
    expect(await a.registry.metrics()).toContain('polychrome_api_journal_follows 1');
    expect(a.journal.liveFollows).toHaveLength(1);

    await a.server.close();
    await Promise.all([first.ended, second.ended]);
    for (const client of [first, second]) {
      const last = client.messages.at(-1);
      expect(last?.event).toBe('shutdown');
      expect(last?.id).toBeUndefined();
      expect(dataOf(last)).toMatchObject({ conversationId: id });
    }
    expect(a.server.openStreams).toBe(0);
    expect(a.journal.follows.every((f) => f.signal.aborted)).toBe(true);
    expect(a.journal.activeFollowers).toBe(0);
    expect(a.service.deltaListeners(id)).toBe(0);
  });

  it('frees the follow (its signal aborts) and the delta listener when the client disconnects', async () => {
    const a = await start();
    const id = await conversationWithTurns(a, 1);
    const client = await open(a, `/v1/conversations/${id}/stream`);
    await client.waitFor('events', () => client.events().length === 5);
    await pollUntil('follower waiting', () => a.journal.activeFollowers === 1);
    expect(a.service.deltaListeners(id)).toBe(1);

    client.close();
    await pollUntil('follow aborted', () => a.journal.follows[0]?.signal.aborted === true);
    await pollUntil('follower gone', () => a.journal.activeFollowers === 0);
    await pollUntil('stream released', () => a.server.openStreams === 0);
    expect(a.service.deltaListeners(id)).toBe(0);
    // The server still serves, and close() has nothing to wait for.
    expect((await call(a, 'GET', `/v1/conversations/${id}`, { token: TOKENS.alice })).status).toBe(
      200,
    );
  });

  it('pulls the next journal event only when the client keeps up (backpressure)', async () => {
    const a = await start();
    const id = a.service.seed(ALICE_ID);
    const partition = `conv-${id}`;
    const total = 4000;
    a.journal.append(partition, toolResults(total, 8 * 1024));
    const client = await open(a, `/v1/conversations/${id}/stream`);
    client.response?.pause();
    // Wait until the server stops pulling (two samples 100 ms apart agree).
    let previous = -1;
    const stalledAt = await pollUntil(
      'the server to stop pulling',
      async () => {
        await new Promise((resolve) => setTimeout(resolve, 100));
        const now = a.journal.delivered;
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

  it('writes events that commit together in order with exact ids, and waiting deltas before the events after them', async () => {
    const a = await start();
    const id = a.service.seed(ALICE_ID);
    const partition = `conv-${id}`;
    const clients = [
      await open(a, `/v1/conversations/${id}/stream`),
      await open(a, `/v1/conversations/${id}/stream?since=2`),
    ];
    await pollUntil('follow waiting', () => a.journal.activeFollowers === 1);
    // Three batches in one tick: one write per stream.
    a.journal.append(partition, toolResults(2));
    a.journal.append(partition, toolResults(1));
    a.journal.append(partition, toolResults(3));
    await clients[0]?.waitFor('6 events', () => clients[0]?.events().length === 6);
    await clients[1]?.waitFor('4 events', () => clients[1]?.events().length === 4);
    expect(clients[0]?.positions()).toEqual(range(0, 6));
    expect(clients[1]?.positions()).toEqual(range(2, 6));

    // Deltas wait for the interval, but go out before committed events that come meanwhile.
    a.service.sendDelta(id, { turnId: 't', step: 1, text: 'Hel' });
    a.service.sendDelta(id, { turnId: 't', step: 1, text: 'lo' });
    a.journal.append(partition, toolResults(2));
    for (const client of clients) {
      await client.waitFor('8 events', () => client.positions().at(-1) === 7);
      const tail = client.messages.slice(-4);
      expect(tail.map((m) => m.event)).toEqual(['delta', 'delta', 'tool_result', 'tool_result']);
      expect(tail.map((m) => m.id)).toEqual([undefined, undefined, '6', '7']);
      expect(dataOf(tail[1])).toEqual({ turnId: 't', step: 1, text: 'lo' });
    }
    // A delta alone goes out when the interval is over.
    a.service.sendDelta(id, { turnId: 't', step: 2, text: '!' });
    for (const client of clients) {
      await client.waitFor('the last delta', (m) => m.at(-1)?.event === 'delta');
    }
    expect(clients[0]?.positions()).toEqual(range(0, 8));
    expect(clients[1]?.positions()).toEqual(range(2, 8));
  });

  it('lets a client that stops reading mid-burst catch up from the journal, with no gap or duplicate, while another keeps up', async () => {
    const a = await start({ journalRingSize: 8 });
    const id = a.service.seed(ALICE_ID);
    const partition = `conv-${id}`;
    a.journal.append(partition, toolResults(10));
    const fast = await open(a, `/v1/conversations/${id}/stream`);
    const slow = await open(a, `/v1/conversations/${id}/stream`);
    await slow.waitFor('caught up', () => slow.events().length === 10);
    slow.response?.pause();
    const total = 10 + 30 * 100;
    for (let burst = 0; burst < 30; burst += 1) {
      a.journal.append(partition, toolResults(100, 8 * 1024));
      await new Promise((resolve) => setImmediate(resolve));
    }
    await fast.waitFor('every event', () => fast.events().length === total, 20_000);
    expect(fast.positions()).toEqual(range(0, total));
    expect(slow.events().length).toBeLessThan(total);

    slow.response?.resume();
    await slow.waitFor('every event', () => slow.events().length === total, 20_000);
    expect(slow.positions()).toEqual(range(0, total));
    // It fell out of the ring and read what it missed on its own; the shared follow stayed one.
    expect(a.journal.follows.some((f) => f.limit !== undefined)).toBe(true);
    expect(a.journal.liveFollows).toHaveLength(1);
  }, 30_000);

  it('keeps nothing of a client that leaves in the middle of a burst', async () => {
    const a = await start();
    const id = a.service.seed(ALICE_ID);
    const partition = `conv-${id}`;
    const staying = await open(a, `/v1/conversations/${id}/stream`);
    const leaving = await open(a, `/v1/conversations/${id}/stream`);
    await pollUntil('two delta listeners', () => a.service.deltaListeners(id) === 2);
    for (let burst = 0; burst < 20; burst += 1) {
      a.journal.append(partition, toolResults(10, 1024));
      a.service.sendDelta(id, { turnId: 't', step: burst, text: 'x' });
      if (burst === 10) leaving.close();
      await new Promise((resolve) => setImmediate(resolve));
    }
    await staying.waitFor('every event', () => staying.events().length === 200);
    expect(staying.positions()).toEqual(range(0, 200));
    await pollUntil('stream released', () => a.server.openStreams === 1);
    expect(a.service.deltaListeners(id)).toBe(1);
    expect(a.logs.filter((l) => Number(l.level) >= 50)).toEqual([]);

    staying.close();
    await pollUntil('follow aborted', () => a.journal.follows[0]?.signal.aborted === true);
    await pollUntil('no stream', () => a.server.openStreams === 0);
    expect(a.service.deltaListeners(id)).toBe(0);
  });

  it('ends a stream whose token stopped working, at the first heartbeat after the cache expired', async () => {
    const a = await start({ heartbeatMs: 20, authCacheMs: 1_000 });
    const id = a.service.seed(ALICE_ID);
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

  it('sends unknown kinds with their raw bytes', async () => {
    const a = await start();
    const id = a.service.seed(ALICE_ID);
    a.journal.append(`conv-${id}`, [{ kind: 'future_kind', payload: new Uint8Array([1, 2, 3]) }]);
    const client = await open(a, `/v1/conversations/${id}/stream`);
    await client.waitFor('the event', () => client.events().length === 1);
    expect(client.events()[0]?.event).toBe('future_kind');
    expect(dataOf(client.events()[0])).toEqual({
      position: 0,
      kind: 'future_kind',
      payload: null,
      payloadBase64: 'AQID',
    });
  });
});
