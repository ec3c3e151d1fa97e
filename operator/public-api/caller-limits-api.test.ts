/**
 * The per-caller limits through the real public API (real HTTP connections, the real turn
 * coordinator over the in-memory ports): at the limit passes, one past it is 429 with
 * Retry-After and the body names the limit and its setting, another caller is untouched,
 * and a stream's slot comes back on every way a stream ends.
 */
import { afterEach, describe, expect, it } from '@jest/globals';
import { DEFAULT_CONVERSATION_NAMESPACE } from '../config';
import {
  CallerLimits,
  countOwnedConversations,
  DEFAULT_LIMITS,
  type LimitSettings,
} from './caller-limits';
import {
  ALICE,
  BOB,
  call,
  dataOf,
  EDGE,
  errorOf,
  pollUntil,
  SseClient,
  startApi,
  TOKENS,
  type Answer,
  type TestApi,
} from '../../test/support/api-fixtures';

let api: TestApi | undefined;
const clients: SseClient[] = [];

afterEach(async () => {
  for (const client of clients.splice(0)) client.close();
  await api?.close();
  api = undefined;
});

/** The API with `settings` over the defaults; the rate buckets on `clock`. */
async function start(
  settings: Partial<LimitSettings>,
  extra: Parameters<typeof startApi>[0] = {},
): Promise<{ a: TestApi; limits: CallerLimits; clock: { ms: number } }> {
  const clock = { ms: 0 };
  const limits = new CallerLimits({
    settings: { ...DEFAULT_LIMITS, ...settings },
    // As main.ts counts: the owner's conversations in the namespace the API creates in.
    ownedConversations: (identity) =>
      countOwnedConversations(
        api?.turns.conversations.list() ?? [],
        DEFAULT_CONVERSATION_NAMESPACE,
        identity,
      ),
    now: () => clock.ms,
  });
  api = await startApi({ ...extra, limits });
  return { a: api, limits, clock };
}

function expectLimited(answer: Answer, limit: string, retryAfter: string): Record<string, unknown> {
  expect(answer.status).toBe(429);
  expect(answer.headers.get('retry-after')).toBe(retryAfter);
  const error = errorOf(answer);
  expect(error.code).toBe('resource_exhausted');
  const details = error.details as Record<string, unknown>;
  expect(details.limit).toBe(limit);
  expect(String(error.message)).toContain(String(details.setting));
  return details;
}

async function refusals(a: TestApi, limit: string): Promise<number> {
  const metric = await a.registry.getSingleMetric('polychrome_api_limit_refusals_total')?.get();
  return metric?.values.find((v) => v.labels.limit === limit)?.value ?? Number.NaN;
}

async function openStream(a: TestApi, id: string, token: string): Promise<SseClient> {
  const client = await SseClient.open(a, `/v1/conversations/${id}/stream`, {
    authorization: `Bearer ${token}`,
  });
  clients.push(client);
  return client;
}

describe('limit: requests per second per caller', () => {
  it('passes the burst, refuses the next with Retry-After from the bucket, and leaves bob alone', async () => {
    const { a, clock } = await start({ requestsPerSecond: 0.5, burst: 3 });
    const alice = a.seed(ALICE.identity);
    const bob = a.seed(BOB.identity);
    for (let i = 0; i < 3; i += 1) {
      expect(
        (await call(a, 'GET', `/v1/conversations/${alice}`, { token: TOKENS.alice })).status,
      ).toBe(200);
    }
    const refused = await call(a, 'GET', `/v1/conversations/${alice}`, { token: TOKENS.alice });
    // Half a request a second: the next one is there in 2 s.
    const details = expectLimited(refused, 'requests', '2');
    expect(details).toMatchObject({
      current: 3,
      max: 3,
      perSecond: 0.5,
      setting: 'POLYCHROME_LIMIT_REQUESTS_PER_SECOND',
      burstSetting: 'POLYCHROME_LIMIT_REQUEST_BURST',
      retryAfterSeconds: 2,
    });
    expect(await refusals(a, 'requests')).toBe(1);
    // Every route that authenticates counts, a stream's opening too.
    const stream = await call(a, 'GET', `/v1/conversations/${alice}/stream`, {
      token: TOKENS.alice,
    });
    expectLimited(stream, 'requests', '2');

    for (let i = 0; i < 3; i += 1) {
      expect((await call(a, 'GET', `/v1/conversations/${bob}`, { token: TOKENS.bob })).status).toBe(
        200,
      );
    }
    clock.ms += 2_000;
    expect(
      (await call(a, 'GET', `/v1/conversations/${alice}`, { token: TOKENS.alice })).status,
    ).toBe(200);
    expectLimited(
      await call(a, 'GET', `/v1/conversations/${alice}`, { token: TOKENS.alice }),
      'requests',
      '2',
    );
  });

  it('gives an edge its limit times POLYCHROME_LIMIT_EDGE_SCALE, and says so', async () => {
    const { a } = await start({ requestsPerSecond: 1, burst: 2, edgeScale: 3 });
    const id = a.seed(EDGE.identity);
    for (let i = 0; i < 6; i += 1) {
      expect((await call(a, 'GET', `/v1/conversations/${id}`, { token: TOKENS.edge })).status).toBe(
        200,
      );
    }
    const refused = await call(a, 'GET', `/v1/conversations/${id}`, { token: TOKENS.edge });
    expectLimited(refused, 'requests', '1');
    expect(errorOf(refused).message).toContain('POLYCHROME_LIMIT_EDGE_SCALE=3 for an edge');
  });

  it('does not count a request that fails authentication against anyone', async () => {
    const { a } = await start({ requestsPerSecond: 1, burst: 1 });
    const id = a.seed(ALICE.identity);
    for (let i = 0; i < 5; i += 1) {
      expect(
        (await call(a, 'GET', `/v1/conversations/${id}`, { token: TOKENS.unknown })).status,
      ).toBe(401);
    }
    expect((await call(a, 'GET', `/v1/conversations/${id}`, { token: TOKENS.alice })).status).toBe(
      200,
    );
  });
});

describe('limit: conversations per caller', () => {
  it('creates up to the limit, refuses one more before anything is created, and lets bob create', async () => {
    const { a } = await start({ conversations: 2 });
    for (let i = 0; i < 2; i += 1) {
      expect(
        (await call(a, 'POST', '/v1/conversations', { token: TOKENS.alice, body: {} })).status,
      ).toBe(201);
    }
    const calls = a.service.calls.length;
    const refused = await call(a, 'POST', '/v1/conversations', {
      token: TOKENS.alice,
      body: { message: { text: 'one more' } },
    });
    const details = expectLimited(refused, 'conversations', '60');
    expect(details).toMatchObject({
      current: 2,
      max: 2,
      setting: 'POLYCHROME_LIMIT_CONVERSATIONS',
      scope: 'caller',
    });
    expect(errorOf(refused).message).toContain('email:alice@example.com owns 2 conversations');
    // Nothing reached the coordinator, nothing was created.
    expect(a.service.calls.length).toBe(calls);
    expect(
      countOwnedConversations(
        a.turns.conversations.list(),
        DEFAULT_CONVERSATION_NAMESPACE,
        ALICE.identity,
      ),
    ).toBe(2);
    expect(await refusals(a, 'conversations')).toBe(1);

    expect(
      (await call(a, 'POST', '/v1/conversations', { token: TOKENS.bob, body: {} })).status,
    ).toBe(201);
  });

  it('counts only what the caller owns that is not being deleted: a deleted one frees its place', async () => {
    const { a } = await start({ conversations: 1 });
    const created = await call(a, 'POST', '/v1/conversations', { token: TOKENS.alice, body: {} });
    expect(created.status).toBe(201);
    expectLimited(
      await call(a, 'POST', '/v1/conversations', { token: TOKENS.alice, body: {} }),
      'conversations',
      '60',
    );
    // A conversation bob owns, where alice is a participant, is not alice's.
    a.seed(BOB.identity, { visibility: 'shared', participants: [ALICE.identity] });
    a.turns.conversations.remove(
      String((created.json as { conversationId: string }).conversationId),
    );
    expect(
      (await call(a, 'POST', '/v1/conversations', { token: TOKENS.alice, body: {} })).status,
    ).toBe(201);
  });

  it('gives the last place to one of three concurrent creates', async () => {
    const { a } = await start({ conversations: 2 });
    a.seed(ALICE.identity);
    const answers = await Promise.all(
      [0, 1, 2].map(() => call(a, 'POST', '/v1/conversations', { token: TOKENS.alice, body: {} })),
    );
    expect(answers.map((x) => x.status).sort()).toEqual([201, 429, 429]);
    expect(
      countOwnedConversations(
        a.turns.conversations.list(),
        DEFAULT_CONVERSATION_NAMESPACE,
        ALICE.identity,
      ),
    ).toBe(2);
  });
});

describe('limit: open streams per caller', () => {
  it('opens up to the limit, refuses one more with 429 before the stream starts, and lets bob stream', async () => {
    const { a, limits } = await start({ streams: 2 });
    const id = a.seed(ALICE.identity, { visibility: 'shared', participants: [BOB.identity] });
    for (let i = 0; i < 2; i += 1) expect((await openStream(a, id, TOKENS.alice)).status).toBe(200);
    const refused = await call(a, 'GET', `/v1/conversations/${id}/stream`, { token: TOKENS.alice });
    expect(refused.headers.get('content-type')).toBe('application/json; charset=utf-8');
    const details = expectLimited(refused, 'streams', '5');
    expect(details).toMatchObject({
      current: 2,
      max: 2,
      setting: 'POLYCHROME_LIMIT_STREAMS',
      scope: 'caller, per replica',
    });
    expect(await refusals(a, 'streams')).toBe(1);
    expect(limits.streamsOf(ALICE)).toBe(2);
    expect((await openStream(a, id, TOKENS.bob)).status).toBe(200);
  });

  it('frees a slot when the client disconnects, many times over (no leak)', async () => {
    const { a, limits } = await start({ streams: 1 });
    const id = a.seed(ALICE.identity);
    for (let round = 0; round < 5; round += 1) {
      const client = await openStream(a, id, TOKENS.alice);
      expect(client.status).toBe(200);
      expectLimited(
        await call(a, 'GET', `/v1/conversations/${id}/stream`, { token: TOKENS.alice }),
        'streams',
        '5',
      );
      client.close();
      await pollUntil('the slot to come back', () => limits.streamsOf(ALICE) === 0);
    }
    expect(a.server.openStreams).toBe(0);
  });

  it('frees a slot when the server ends the stream with event: error', async () => {
    const { a, limits } = await start({ streams: 1 }, { heartbeatMs: 20 });
    const id = a.seed(ALICE.identity);
    const client = await openStream(a, id, TOKENS.alice);
    expect(limits.streamsOf(ALICE)).toBe(1);
    // The conversation is deleted: the next heartbeat's check ends the stream.
    a.turns.conversations.remove(id);
    await client.ended;
    expect(dataOf(client.messages.at(-1)).error).toMatchObject({ code: 'not_found' });
    await pollUntil('the slot to come back', () => limits.streamsOf(ALICE) === 0);
    const again = a.seed(ALICE.identity);
    expect((await openStream(a, again, TOKENS.alice)).status).toBe(200);
  });

  it('frees every slot when the server shuts down', async () => {
    const { a, limits } = await start({ streams: 3 });
    const id = a.seed(ALICE.identity);
    const open = await Promise.all([0, 1, 2].map(() => openStream(a, id, TOKENS.alice)));
    expect(limits.streamsOf(ALICE)).toBe(3);
    await a.server.close();
    await Promise.all(open.map((client) => client.ended));
    expect(open.map((client) => client.messages.at(-1)?.event)).toEqual([
      'shutdown',
      'shutdown',
      'shutdown',
    ]);
    expect(limits.streamsOf(ALICE)).toBe(0);
  });

  it('does not take a slot for a stream the caller may not read', async () => {
    const { a, limits } = await start({ streams: 1 });
    const id = a.seed(BOB.identity);
    const denied = await call(a, 'GET', `/v1/conversations/${id}/stream`, { token: TOKENS.alice });
    expect(denied.status).toBe(403);
    expect(limits.streamsOf(ALICE)).toBe(0);
  });
});
