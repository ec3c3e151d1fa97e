import { request as httpRequest } from 'node:http';
import { afterEach, describe, expect, it } from '@jest/globals';
import { AppError } from '../../common/errors';
import { StateCallError } from '../../common/state-call-errors';
import { MAX_TEXT_CHARS } from './request-parsers';
import {
  ADMIN,
  EDGE,
  BOB,
  call,
  errorOf,
  pollUntil,
  startApi,
  TEST_NOW_MS,
  TOKENS,
  type Answer,
  type TestApi,
} from '../../test/support/api-fixtures';
import { askReply, calculatorReply, textReply } from '../../test/support/real-turns';

let api: TestApi | undefined;

afterEach(async () => {
  await api?.close();
  api = undefined;
});

async function start(options: Parameters<typeof startApi>[0] = {}): Promise<TestApi> {
  api = await startApi(options);
  return api;
}

const UNKNOWN_ID = '0b5c3a9e-4f0d-4d0a-9a52-6f1e2b7c8d90';

/** Routes that take a conversation id, with a valid body where they need one. */
function conversationRoutes(id: string): { method: string; path: string; body?: unknown }[] {
  return [
    { method: 'GET', path: `/v1/conversations/${id}` },
    { method: 'POST', path: `/v1/conversations/${id}/messages`, body: { text: 'hi' } },
    { method: 'GET', path: `/v1/conversations/${id}/transcript` },
    {
      method: 'POST',
      path: `/v1/conversations/${id}/approvals/r-1`,
      body: { decision: 'approve' },
    },
    { method: 'POST', path: `/v1/conversations/${id}/questions/r-1`, body: { answer: 'yes' } },
    { method: 'GET', path: `/v1/conversations/${id}/stream` },
  ];
}

/** Nothing reached the service and nothing was written. */
async function expectUntouched(a: TestApi, conversationId?: string): Promise<void> {
  expect(a.service.calls).toEqual([]);
  if (conversationId !== undefined) expect(await a.entries(conversationId)).toHaveLength(0);
  expect(a.follows.follows).toHaveLength(0);
}

function expectError(answer: Answer, status: number, code: string, message?: RegExp): void {
  expect(answer.status).toBe(status);
  expect(answer.headers.get('content-type')).toBe('application/json; charset=utf-8');
  const error = errorOf(answer);
  expect(error.code).toBe(code);
  if (message !== undefined) expect(error.message).toMatch(message);
}

describe('PublicApiServer: authentication', () => {
  it('answers 401 with a Bearer challenge when the header is missing, on every /v1 route but the document', async () => {
    const a = await start();
    const id = a.seed(ADMIN.identity);
    const routes = [
      { method: 'POST', path: '/v1/conversations', body: {} },
      ...conversationRoutes(id),
    ];
    for (const route of routes) {
      const answer = await call(a, route.method, route.path, { body: route.body });
      expectError(answer, 401, 'unauthenticated', /Authorization: Bearer <token>/);
      expect(answer.headers.get('www-authenticate')).toBe('Bearer realm="polychrome"');
    }
    expect(a.tokens.calls).toBe(0);
    await expectUntouched(a, id);
    expect((await call(a, 'GET', '/v1/openapi.json')).status).toBe(200);
  });

  it.each([
    ['another scheme', 'Basic YWxpY2U6c2VjcmV0'],
    ['no token', 'Bearer'],
    ['two tokens', `Bearer ${TOKENS.alice} ${TOKENS.bob}`],
    ['a token with a space-free but illegal character', 'Bearer pcs_abc"def'],
    ['an overlong token', `Bearer ${'a'.repeat(4097)}`],
  ])(
    'answers 401 invalid_request for a malformed header (%s) without asking anyone',
    async (_, header) => {
      const a = await start();
      const answer = await call(a, 'GET', `/v1/conversations/${UNKNOWN_ID}`, {
        headers: { authorization: header },
      });
      expectError(answer, 401, 'unauthenticated', /malformed/);
      expect(answer.headers.get('www-authenticate')).toBe(
        'Bearer realm="polychrome", error="invalid_request"',
      );
      expect(a.tokens.calls).toBe(0);
      await expectUntouched(a);
    },
  );

  it('answers 401 invalid_token for an unknown token, and refuses it again for authFailureCacheMs without asking', async () => {
    const a = await start({ authFailureCacheMs: 5_000 });
    for (let i = 0; i < 3; i += 1) {
      if (i === 2) a.clock.nowMs += 5_000;
      const answer = await call(a, 'GET', `/v1/conversations/${UNKNOWN_ID}`, {
        token: TOKENS.unknown,
      });
      expectError(answer, 401, 'unauthenticated', /unknown, expired or revoked/);
      expect(answer.headers.get('www-authenticate')).toBe(
        'Bearer realm="polychrome", error="invalid_token"',
      );
    }
    // The second within 5 s came from the cache; the third, after it, asked again.
    expect(a.tokens.calls).toBe(2);
    await expectUntouched(a);
  });

  it('reuses an authentication for authCacheMs: a revoked token works until then, no longer', async () => {
    const a = await start({ authCacheMs: 10_000 });
    const id = a.seed(ADMIN.identity);
    const path = `/v1/conversations/${id}`;
    expect((await call(a, 'GET', path, { token: TOKENS.admin })).status).toBe(200);
    expect((await call(a, 'GET', path, { token: TOKENS.admin })).status).toBe(200);
    expect(a.tokens.calls).toBe(1);

    a.tokens.callers.delete(TOKENS.admin);
    a.clock.nowMs += 9_999;
    expect((await call(a, 'GET', path, { token: TOKENS.admin })).status).toBe(200);
    expect(a.tokens.calls).toBe(1);
    a.clock.nowMs += 2;
    expectError(await call(a, 'GET', path, { token: TOKENS.admin }), 401, 'unauthenticated');
    expect(a.tokens.calls).toBe(2);
  });

  it('asks every time when authCacheMs is 0', async () => {
    const a = await start({ authCacheMs: 0 });
    const id = a.seed(ADMIN.identity);
    for (let i = 0; i < 3; i += 1) {
      expect(
        (await call(a, 'GET', `/v1/conversations/${id}`, { token: TOKENS.admin })).status,
      ).toBe(200);
    }
    expect(a.tokens.calls).toBe(3);
  });
});

describe('PublicApiServer: routing and request errors', () => {
  it('answers 404 for an unknown route and 405 with Allow for a known path and wrong method', async () => {
    const a = await start();
    expectError(
      await call(a, 'GET', '/v2/conversations', { token: TOKENS.alice }),
      404,
      'not_found',
      /no route GET \/v2\/conversations/,
    );
    expectError(
      await call(a, 'GET', '/v1/conversations/', { token: TOKENS.alice }),
      404,
      'not_found',
    );
    expectError(await call(a, 'GET', `/v1/conversations/${UNKNOWN_ID}/nope`), 404, 'not_found');

    const wrong = await call(a, 'GET', '/v1/conversations', { token: TOKENS.alice });
    expectError(wrong, 405, 'invalid_argument', /does not accept GET; use POST/);
    expect(wrong.headers.get('allow')).toBe('POST');
    const del = await call(a, 'DELETE', `/v1/conversations/${UNKNOWN_ID}`);
    expect(del.status).toBe(405);
    expect(del.headers.get('allow')).toBe('GET');
    expect((await call(a, 'POST', '/v1/openapi.json')).headers.get('allow')).toBe('GET');
    expect(a.tokens.calls).toBe(0);
    await expectUntouched(a);
  });

  it.each([
    'not-a-uid',
    '0B5C3A9E-4F0D-4D0A-9A52-6F1E2B7C8D90',
    '0b5c3a9e4f0d4d0a9a526f1e2b7c8d90',
    '0b5c3a9e-4f0d-4d0a-9a52-6f1e2b7c8d9',
    '%E2%9C%93',
  ])('answers 400 "not a conversation id" for %s on every route that takes one', async (badId) => {
    const a = await start();
    for (const route of conversationRoutes(badId)) {
      const answer = await call(a, route.method, route.path, {
        token: TOKENS.alice,
        body: route.body,
      });
      expectError(answer, 400, 'invalid_argument', /is not a conversation id/);
      expect(errorOf(answer).details).toEqual({ field: 'conversationId' });
    }
    await expectUntouched(a);
  });

  it('answers 400 for a malformed request id', async () => {
    const a = await start();
    const id = a.seed(ALICE_ID);
    const answer = await call(a, 'POST', `/v1/conversations/${id}/approvals/a%20b`, {
      token: TOKENS.alice,
      body: { decision: 'approve' },
    });
    expectError(answer, 400, 'invalid_argument', /"a b" is not a request id/);
    await expectUntouched(a, id);
  });

  it('answers 404 for an unknown conversation, from the service', async () => {
    const a = await start();
    for (const route of conversationRoutes(UNKNOWN_ID)) {
      const answer = await call(a, route.method, route.path, {
        token: TOKENS.alice,
        body: route.body,
      });
      expectError(
        answer,
        404,
        'not_found',
        new RegExp(`conversation ${UNKNOWN_ID} does not exist`),
      );
    }
    expect(a.follows.follows).toHaveLength(0);
  });

  it('answers 403 when the service refuses the caller, and writes nothing', async () => {
    const a = await start();
    const id = a.seed(ALICE_ID);
    for (const route of conversationRoutes(id)) {
      const answer = await call(a, route.method, route.path, {
        token: TOKENS.bob,
        body: route.body,
      });
      expectError(
        answer,
        403,
        'permission_denied',
        new RegExp(`${BOB.identity} may not use conversation ${id}: it belongs to ${ALICE_ID}`),
      );
    }
    expect(await a.entries(id)).toHaveLength(0);
    expect(a.follows.follows).toHaveLength(0);
  });

  it.each([
    ['no Content-Type (a no-cors fetch of a Blob)', undefined, 'none'],
    ['text/plain (a no-cors fetch of a string)', 'text/plain', '"text/plain"'],
    ['a form', 'application/x-www-form-urlencoded', '"application/x-www-form-urlencoded"'],
    ['a multipart form', 'multipart/form-data; boundary=x', '"multipart/form-data; boundary=x"'],
    ['JSON in Latin-1', 'application/json; charset=latin1', '"application/json; charset=latin1"'],
  ])(
    'answers 415 to every POST and DELETE with %s, before authentication and before reading the body',
    async (_label, contentType, named) => {
      const a = await start();
      const id = a.seed(ALICE_ID);
      const targets: [string, string][] = [
        ['POST', '/v1/conversations'],
        ['POST', `/v1/conversations/${id}/messages`],
        ['POST', `/v1/conversations/${id}/approvals/r-1`],
        ['POST', `/v1/conversations/${id}/questions/r-1`],
        ['POST', `/v1/conversations/${id}/repair`],
        ['POST', `/v1/conversations/${id}/turns/t-1/resolve`],
        ['DELETE', `/v1/conversations/${id}`],
      ];
      for (const [method, path] of targets) {
        // An unknown token: a 401 would mean authentication ran first.
        const answer = await rawRequest(a, method, path, '{"text":"hi"}', {
          authorization: `Bearer ${TOKENS.unknown}`,
          ...(contentType === undefined ? {} : { 'content-type': contentType }),
        });
        expect([method, path, answer.status]).toEqual([method, path, 415]);
        const error = (JSON.parse(answer.text) as { error: Record<string, unknown> }).error;
        expect(error).toEqual({
          code: 'invalid_argument',
          message:
            `a ${method} request must send "Content-Type: application/json" (a charset, if any, ` +
            `UTF-8), even with no body, and this one sent ${named}; send that header`,
          details: { field: 'Content-Type' },
        });
      }
      expect(a.tokens.calls).toBe(0);
      await expectUntouched(a, id);
    },
  );

  it('answers 415 while the body is still arriving: it never reads it', async () => {
    const a = await start();
    const id = a.seed(ALICE_ID);
    const answer = await new Promise<number>((resolve, reject) => {
      const req = httpRequest(
        {
          host: '127.0.0.1',
          port: a.port,
          path: `/v1/conversations/${id}/messages`,
          method: 'POST',
          headers: { authorization: `Bearer ${TOKENS.alice}`, 'content-length': '1000' },
        },
        (res) => {
          res.resume();
          req.destroy();
          resolve(res.statusCode ?? 0);
        },
      );
      req.on('error', reject);
      // Ten bytes of a thousand: the rest never comes.
      req.write('{"text":"h');
    });
    expect(answer).toBe(415);
    expect(a.tokens.calls).toBe(0);
    await expectUntouched(a, id);
  });

  it('accepts application/json with a UTF-8 charset', async () => {
    const a = await start();
    const id = a.seed(ALICE_ID);
    const answer = await call(a, 'POST', `/v1/conversations/${id}/messages`, {
      token: TOKENS.alice,
      rawBody: '{"text":"hi"}',
      headers: { 'content-type': 'Application/JSON; charset="UTF-8"' },
    });
    expect(answer.status).toBe(200);
  });

  it.each([
    ['{"text":"hi"', /at position 12 \(line 1, column 13\)/, { position: 12, line: 1, column: 13 }],
    [
      '{\n  "text": "a\u0001"\n}',
      /at position 14 \(line 2, column 13\)/,
      { position: 14, line: 2, column: 13 },
    ],
    ['{"text": }', /is not valid JSON; send a JSON object/, {}],
    ['', /the request body is empty/, {}],
  ])(
    'answers 400 for malformed JSON %j, naming the position when the parser gives one',
    async (body, message, where) => {
      const a = await start();
      const id = a.seed(ALICE_ID);
      const answer = await call(a, 'POST', `/v1/conversations/${id}/messages`, {
        token: TOKENS.alice,
        rawBody: body,
        headers: { 'content-type': 'application/json' },
      });
      expectError(answer, 400, 'invalid_argument', message);
      expect(errorOf(answer).details).toEqual({ field: 'body', ...where });
      await expectUntouched(a, id);
    },
  );

  it('answers 400 for bytes that are not UTF-8', async () => {
    const a = await start();
    const id = a.seed(ALICE_ID);
    const answer = await rawPost(
      a,
      `/v1/conversations/${id}/messages`,
      Buffer.from([0x7b, 0xff, 0x7d]),
      {
        'content-type': 'application/json',
        authorization: `Bearer ${TOKENS.alice}`,
      },
    );
    expect(answer.status).toBe(400);
    expect(answer.text).toContain('not valid UTF-8');
    await expectUntouched(a, id);
  });

  it.each([
    [
      { text: 'hi', colour: 'red', extra: 1 },
      /unknown fields "colour", "extra" in the request body; the allowed fields are text, idempotencyKey, directive/,
      'colour',
    ],
    [
      { text: 'hi', directive: { maxSteps: 2, budget: 3 } },
      /unknown field "directive.budget" in directive/,
      'directive.budget',
    ],
    [['hi'], /the request body must be a JSON object, got an array/, 'body'],
    [{ text: 42 }, /text must be a string \(the message text\), got a number/, 'text'],
    [{ text: '' }, /text must be 1 to 32768 characters long, got 0/, 'text'],
    [
      { text: 'x'.repeat(MAX_TEXT_CHARS + 1) },
      /text must be 1 to 32768 characters long, got 32769/,
      'text',
    ],
    [
      { text: 'hi', directive: { maxSteps: 0 } },
      /directive.maxSteps must be an integer from 1 to 64, got 0/,
      'directive.maxSteps',
    ],
    [
      { text: 'hi', directive: { maxSteps: 2.5 } },
      /directive.maxSteps must be an integer/,
      'directive.maxSteps',
    ],
    [
      { text: 'hi', directive: { requiredApprover: 'Alice' } },
      /directive.requiredApprover: identity "Alice" has no ":"/,
      'directive.requiredApprover',
    ],
    [
      { text: 'hi', idempotencyKey: 'has space' },
      /idempotencyKey must be 1 to 128 characters of A-Z/,
      'idempotencyKey',
    ],
    [{ text: 'hi', idempotencyKey: 'k'.repeat(129) }, /got 129 characters/, 'idempotencyKey'],
  ])('answers 400 naming the field for the message body %#', async (body, message, field) => {
    const a = await start();
    const id = a.seed(ALICE_ID);
    const answer = await call(a, 'POST', `/v1/conversations/${id}/messages`, {
      token: TOKENS.alice,
      body,
    });
    expectError(answer, 400, 'invalid_argument', message);
    expect(errorOf(answer).details).toMatchObject({ field });
    await expectUntouched(a, id);
  });

  it('accepts a text of exactly 32768 characters (counted as code points)', async () => {
    const a = await start();
    const id = a.seed(ALICE_ID);
    const longest = await call(a, 'POST', `/v1/conversations/${id}/messages`, {
      token: TOKENS.alice,
      body: { text: 'x'.repeat(MAX_TEXT_CHARS) },
    });
    expect(longest.status).toBe(200);
    // 10,000 emoji are 20,000 UTF-16 units but 10,000 characters.
    const emoji = await call(a, 'POST', `/v1/conversations/${id}/messages`, {
      token: TOKENS.alice,
      body: { text: '😀'.repeat(10_000) },
    });
    expect(emoji.status).toBe(200);
  });

  it('answers 413 for a body declared larger than the limit, passing nothing to the service', async () => {
    const a = await start();
    const id = a.seed(ALICE_ID);
    const answer = await call(a, 'POST', `/v1/conversations/${id}/messages`, {
      token: TOKENS.alice,
      body: { text: 'x'.repeat(30_000), idempotencyKey: 'k', pad: 'y'.repeat(40_000) },
    });
    expectError(answer, 413, 'resource_exhausted', /larger than 65536 bytes/);
    await expectUntouched(a, id);
    // The connection survives: the next request is served.
    expect((await call(a, 'GET', `/v1/conversations/${id}`, { token: TOKENS.alice })).status).toBe(
      200,
    );
  });

  it('answers 413 for a chunked body once it passes the limit while reading', async () => {
    const a = await start({ maxBodyBytes: 1024 });
    const id = a.seed(ALICE_ID);
    const answer = await chunkedPost(a, `/v1/conversations/${id}/messages`, [
      '{"text":"',
      'x'.repeat(600),
      'x'.repeat(600),
      '"}',
    ]);
    expect(answer.status).toBe(413);
    expect(answer.text).toContain('larger than 1024 bytes');
    await expectUntouched(a, id);
    // Within the limit, chunked is fine.
    const small = await chunkedPost(a, `/v1/conversations/${id}/messages`, ['{"text":', '"hi"}']);
    expect(small.status).toBe(200);
  });
});

const ALICE_ID = 'email:alice@example.com';

/** POST with node:http: exact headers, no content type unless given. */
function rawPost(
  a: TestApi,
  path: string,
  body: string | Buffer,
  headers: Record<string, string>,
): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      {
        host: '127.0.0.1',
        port: a.port,
        path,
        method: 'POST',
        headers: {
          authorization: `Bearer ${TOKENS.alice}`,
          'content-length': String(Buffer.byteLength(body)),
          ...headers,
        },
      },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => (text += chunk));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

/** A request with node:http: exact headers (no Authorization, no content type unless given). */
function rawRequest(
  a: TestApi,
  method: string,
  path: string,
  body: string,
  headers: Record<string, string>,
): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      {
        host: '127.0.0.1',
        port: a.port,
        path,
        method,
        headers: { 'content-length': String(Buffer.byteLength(body)), ...headers },
      },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => (text += chunk));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

/** POST with chunked transfer encoding (no Content-Length), one write per chunk. */
function chunkedPost(
  a: TestApi,
  path: string,
  chunks: string[],
): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      {
        host: '127.0.0.1',
        port: a.port,
        path,
        method: 'POST',
        headers: {
          authorization: `Bearer ${TOKENS.alice}`,
          'content-type': 'application/json',
          'transfer-encoding': 'chunked',
        },
      },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => (text += chunk));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
      },
    );
    req.on('error', reject);
    for (const chunk of chunks) req.write(chunk);
    req.end();
  });
}

describe('PublicApiServer: conversations and turns', () => {
  it('creates an empty conversation from no body or {}, answering 201 with its id and Location', async () => {
    const a = await start();
    for (const body of [undefined, {}]) {
      const answer = await call(a, 'POST', '/v1/conversations', { token: TOKENS.alice, body });
      expect(answer.status).toBe(201);
      const json = answer.json as {
        conversationId: string;
        conversation: { owner: string; conversationId: string };
        turn?: unknown;
      };
      expect(json.conversationId).toMatch(/^[0-9a-f-]{36}$/);
      expect(json.conversation.conversationId).toBe(json.conversationId);
      expect(json.conversation.owner).toBe(ALICE_ID);
      expect(json.turn).toBeUndefined();
      expect(answer.headers.get('location')).toBe(`/v1/conversations/${json.conversationId}`);
    }
    expect(a.service.calls.map((c) => c.method)).toEqual([
      'createConversation',
      'createConversation',
    ]);
  });

  it('creates a conversation with a first message and answers its turn', async () => {
    const a = await start();
    const answer = await call(a, 'POST', '/v1/conversations', {
      token: TOKENS.alice,
      body: { message: { text: 'hello', idempotencyKey: 'first-1' } },
    });
    expect(answer.status).toBe(201);
    const json = answer.json as {
      conversationId: string;
      turn: { reply: string; requestedAt: number; conversationId: string };
    };
    expect(json.turn).toMatchObject({
      status: 'complete',
      reply: 'reply 1',
      requestedAt: 0,
      conversationId: json.conversationId,
    });
    expect(answer.headers.get('idempotency-key')).toBe('first-1');
    const kinds = (await a.entries(json.conversationId)).map((e) => e.kind);
    expect(kinds).toEqual([
      'message_received',
      'turn_dispatched',
      'signed_root',
      // The agent configuration, recorded before its first model call (docs/replay.md).
      'agent_config',
      'signed_root',
      'model_call',
      'turn_complete',
      'signed_root',
    ]);
  });

  it('refuses an Idempotency-Key header on a create without a message, and unknown create fields', async () => {
    const a = await start();
    const keyed = await call(a, 'POST', '/v1/conversations', {
      token: TOKENS.alice,
      body: {},
      headers: { 'idempotency-key': 'k-1' },
    });
    expectError(keyed, 400, 'invalid_argument', /creating a conversation is not idempotent/);
    const unknown = await call(a, 'POST', '/v1/conversations', {
      token: TOKENS.alice,
      body: { message: { text: 'hi', mood: 'good' }, name: 'x' },
    });
    expectError(
      unknown,
      400,
      'invalid_argument',
      /unknown field "name" in the request body; the allowed fields are message/,
    );
    const nested = await call(a, 'POST', '/v1/conversations', {
      token: TOKENS.alice,
      body: { message: { text: 'hi', mood: 'good' } },
    });
    expectError(nested, 400, 'invalid_argument', /unknown field "message.mood" in message/);
    const empty = await call(a, 'POST', '/v1/conversations', {
      token: TOKENS.alice,
      body: { message: { text: '' } },
    });
    expectError(empty, 400, 'invalid_argument', /message.text must be 1 to 32768 characters/);
    expect(a.service.calls).toEqual([]);
  });

  it('reads a conversation summary and its transcript', async () => {
    const a = await start();
    const id = a.seed(ALICE_ID);
    await call(a, 'POST', `/v1/conversations/${id}/messages`, {
      token: TOKENS.alice,
      body: { text: 'one' },
    });
    const summary = await call(a, 'GET', `/v1/conversations/${id}`, { token: TOKENS.alice });
    expect(summary.status).toBe(200);
    expect(summary.json).toMatchObject({
      conversationId: id,
      partition: `conv-${id}`,
      owner: ALICE_ID,
      visibility: 'private',
    });
    const transcript = await call(a, 'GET', `/v1/conversations/${id}/transcript`, {
      token: TOKENS.alice,
    });
    expect(transcript.status).toBe(200);
    expect(transcript.json).toEqual({
      conversationId: id,
      head: 8,
      turns: [
        {
          turnId: expect.stringMatching(/^turn_[0-9a-f]{32}$/),
          position: 0,
          user: { text: 'one', caller: ALICE_ID, receivedAtMs: TEST_NOW_MS },
          status: 'complete',
          reply: 'reply 1',
          fallback: false,
        },
      ],
    });
    // An admin may read it too; the owner of another conversation may not.
    expect((await call(a, 'GET', `/v1/conversations/${id}`, { token: TOKENS.admin })).status).toBe(
      200,
    );
  });

  it('posts a message with a body key: the same key and text is the same turn, other text is 409', async () => {
    const a = await start();
    const id = a.seed(ALICE_ID);
    const path = `/v1/conversations/${id}/messages`;
    const first = await call(a, 'POST', path, {
      token: TOKENS.alice,
      body: { text: 'hi', idempotencyKey: 'key-1' },
    });
    expect(first.status).toBe(200);
    expect(first.json).toMatchObject({
      conversationId: id,
      turnId: expect.stringMatching(/^turn_[0-9a-f]{32}$/),
      status: 'complete',
      reply: 'reply 1',
      requestedAt: 0,
    });
    expect(first.headers.get('idempotency-key')).toBe('key-1');
    const head = a.head(id);

    const retry = await call(a, 'POST', path, {
      token: TOKENS.alice,
      body: { text: 'hi' },
      headers: { 'idempotency-key': 'key-1' },
    });
    expect(retry.json).toEqual(first.json);
    expect(a.head(id)).toBe(head);

    const conflict = await call(a, 'POST', path, {
      token: TOKENS.alice,
      body: { text: 'other', idempotencyKey: 'key-1' },
    });
    expectError(conflict, 409, 'conflict', /idempotency key key-1 was used for another message/);
    expect(a.head(id)).toBe(head);
  });

  it('takes the key from the header, accepts body and header when equal, refuses them when different', async () => {
    const a = await start();
    const id = a.seed(ALICE_ID);
    const path = `/v1/conversations/${id}/messages`;
    const both = await call(a, 'POST', path, {
      token: TOKENS.alice,
      body: { text: 'hi', idempotencyKey: 'same' },
      headers: { 'idempotency-key': 'same' },
    });
    expect(both.status).toBe(200);
    const differ = await call(a, 'POST', path, {
      token: TOKENS.alice,
      body: { text: 'hi', idempotencyKey: 'one' },
      headers: { 'idempotency-key': 'two' },
    });
    expectError(
      differ,
      400,
      'invalid_argument',
      /the Idempotency-Key header and idempotencyKey differ/,
    );
    const badHeader = await call(a, 'POST', path, {
      token: TOKENS.alice,
      body: { text: 'hi' },
      headers: { 'idempotency-key': 'no/slashes' },
    });
    expectError(badHeader, 400, 'invalid_argument', /Idempotency-Key must be 1 to 128 characters/);
    expect(a.service.calls.map((c) => c.method)).toEqual(['postMessage']);
  });

  it('generates a key when none is given (so a retry is a new turn) and echoes it', async () => {
    let n = 0;
    const a = await start({ newIdempotencyKey: () => `gen-${String((n += 1))}` });
    const id = a.seed(ALICE_ID);
    const path = `/v1/conversations/${id}/messages`;
    const one = await call(a, 'POST', path, { token: TOKENS.alice, body: { text: 'hi' } });
    const two = await call(a, 'POST', path, { token: TOKENS.alice, body: { text: 'hi' } });
    expect(one.headers.get('idempotency-key')).toBe('gen-1');
    expect(two.headers.get('idempotency-key')).toBe('gen-2');
    expect((one.json as { turnId: string }).turnId).not.toBe(
      (two.json as { turnId: string }).turnId,
    );
  });

  it('takes a directive from an edge only (recorded as ingress_directive), and refuses one from anyone else with nothing written', async () => {
    const a = await start();
    const id = a.seed(ALICE_ID, { visibility: 'shared', participants: [EDGE.identity] });
    const refused = await call(a, 'POST', `/v1/conversations/${id}/messages`, {
      token: TOKENS.alice,
      body: { text: 'hi', directive: { maxSteps: 3 } },
    });
    expectError(
      refused,
      403,
      'permission_denied',
      /may not send a directive: only a caller with the edge role may/,
    );
    expect(a.head(id)).toBe(0);
    const selfApproval = await call(a, 'POST', `/v1/conversations/${id}/messages`, {
      token: TOKENS.edge,
      body: { text: 'hi', directive: { requiredApprover: EDGE.identity } },
    });
    expectError(selfApproval, 403, 'permission_denied', /is not an admin's identity/);
    expect(a.head(id)).toBe(0);
    const answer = await call(a, 'POST', `/v1/conversations/${id}/messages`, {
      token: TOKENS.edge,
      body: { text: 'hi', directive: { maxSteps: 3, requiredApprover: ADMIN.identity } },
    });
    expect(answer.status).toBe(200);
    expect((await a.entries(id)).map((e) => e.kind)).toContain('ingress_directive');
  });

  it('runs an approval: paused card, 409 for a new message meanwhile, 403 for the wrong approver, 200 for the right one, 409 once answered', async () => {
    const a = await start({ replies: [calculatorReply('6 * 7'), textReply('It is 42.')] });
    const id = a.seed(ALICE_ID, { visibility: 'shared', participants: [EDGE.identity] });
    const paused = await call(a, 'POST', `/v1/conversations/${id}/messages`, {
      token: TOKENS.edge,
      body: { text: 'What is 6 * 7?', directive: { requiredApprover: ADMIN.identity } },
    });
    expect(paused.status).toBe(200);
    const reply = paused.json as {
      status: string;
      approval: { requestId: string; argsSha256: string; args: unknown; requiredApprover: string };
    };
    expect(reply.status).toBe('paused');
    expect(reply.approval.args).toEqual({ expression: '6 * 7' });
    expect(reply.approval.argsSha256).toMatch(/^[0-9a-f]{64}$/);
    const path = `/v1/conversations/${id}/approvals/${reply.approval.requestId}`;

    // The coordinator answers a message behind a paused turn with 409 conflict.
    const busy = await call(a, 'POST', `/v1/conversations/${id}/messages`, {
      token: TOKENS.alice,
      body: { text: 'next' },
    });
    expectError(busy, 409, 'conflict', /waits for an approval; answer it before sending/);
    expectError(
      await call(a, 'POST', path, { token: TOKENS.alice, body: { decision: 'approve' } }),
      403,
      'permission_denied',
      new RegExp(`must be answered by ${ADMIN.identity}`),
    );
    expectError(
      await call(a, 'POST', path, { token: TOKENS.admin, body: { decision: 'maybe' } }),
      400,
      'invalid_argument',
      /decision must be "approve", "deny" or "cancel", got "maybe"/,
    );
    expectError(
      await call(a, 'POST', path, {
        token: TOKENS.admin,
        body: { decision: 'approve', comment: '' },
      }),
      400,
      'invalid_argument',
      /comment must be 1 to 4096 characters/,
    );

    const done = await call(a, 'POST', path, {
      token: TOKENS.admin,
      body: { decision: 'approve', comment: 'ok' },
    });
    expect(done.status).toBe(200);
    expect(done.json).toMatchObject({ status: 'complete', reply: 'It is 42.', conversationId: id });
    // The calculator ran after the signed approval: its result is in the journal.
    expect((await a.entries(id)).map((e) => e.kind)).toEqual(
      expect.arrayContaining(['approval_response', 'tool_result', 'turn_complete']),
    );
    expectError(
      await call(a, 'POST', path, { token: TOKENS.admin, body: { decision: 'deny' } }),
      409,
      'conflict',
      /is not waiting for an answer .*it was answered already/,
    );
    expectError(
      await call(a, 'POST', `/v1/conversations/${id}/approvals/nope`, {
        token: TOKENS.admin,
        body: { decision: 'deny' },
      }),
      404,
      'not_found',
    );
  });

  it('answers a question', async () => {
    const a = await start({ replies: [askReply('which cluster?'), textReply('thanks: prod')] });
    const id = a.seed(ALICE_ID);
    const paused = await call(a, 'POST', `/v1/conversations/${id}/messages`, {
      token: TOKENS.alice,
      body: { text: 'restart it' },
    });
    const question = (paused.json as { question: { requestId: string; question: string } })
      .question;
    expect(question.question).toBe('which cluster?');
    const path = `/v1/conversations/${id}/questions/${question.requestId}`;
    expectError(
      await call(a, 'POST', path, { token: TOKENS.alice, body: { answer: 'prod', extra: true } }),
      400,
      'invalid_argument',
      /unknown field "extra"/,
    );
    expectError(
      await call(a, 'POST', path, { token: TOKENS.alice, body: {} }),
      400,
      'invalid_argument',
      /answer must be a string/,
    );
    const done = await call(a, 'POST', path, { token: TOKENS.alice, body: { answer: 'prod' } });
    expect(done.status).toBe(200);
    expect(done.json).toMatchObject({ status: 'complete', reply: 'thanks: prod' });
    // The model saw the answer as the result of its __ask_user call.
    expect(JSON.stringify(a.turns.harness.model.requests.at(-1))).toContain('prod');
  });

  it.each([
    [new AppError('already_exists', 'already there'), 409, 'already_exists', 'already there'],
    [
      new AppError('unavailable', 'harness unreachable; retry with the same key'),
      503,
      'unavailable',
      'harness unreachable; retry with the same key',
    ],
    [
      new AppError('deadline_exceeded', 'the turn did not settle'),
      504,
      'deadline_exceeded',
      'the turn did not settle',
    ],
    [new AppError('internal', 'secret host 10.0.0.7 broke'), 500, 'internal', 'report request id'],
    [new Error('TypeError at handler.ts:12'), 500, 'internal', 'report request id'],
    [
      new StateCallError('unavailable', 'state plane at 10.1.2.3:7443: Append failed', {
        method: 'Append',
        grpcStatus: 14,
        fromServer: false,
      }),
      503,
      'unavailable',
      'cannot be reached right now',
    ],
  ])(
    'maps a service error %# to its status, hiding internals',
    async (error, status, code, text) => {
      const a = await start();
      const id = a.seed(ALICE_ID);
      a.service.failNext(error);
      const answer = await call(a, 'POST', `/v1/conversations/${id}/messages`, {
        token: TOKENS.alice,
        body: { text: 'hi' },
      });
      expectError(answer, status, code);
      const message = String(errorOf(answer).message);
      expect(message).toContain(text);
      expect(message).not.toMatch(/10\.0\.0\.7|10\.1\.2\.3|handler\.ts/);
      if (code === 'internal') {
        expect(message).toContain(answer.headers.get('x-request-id') ?? 'missing');
        expect(a.logs.some((l) => l.msg === 'request failed' && l.level === 'error')).toBe(true);
      }
      if (code === 'unavailable') expect(answer.headers.get('retry-after')).toBe('1');
    },
  );
});

describe('PublicApiServer: close()', () => {
  it('aborts a request in progress, answers it 503 so the client retries elsewhere, and resolves', async () => {
    // A sandbox that never becomes Ready holds the turn after batch one.
    const a = await start({ sandboxWaitMs: 1_000 });
    const id = a.seed(ALICE_ID, {}, { phase: 'Pending' });
    const pending = call(a, 'POST', `/v1/conversations/${id}/messages`, {
      token: TOKENS.alice,
      body: { text: 'slow', idempotencyKey: 'slow-1' },
    });
    await pollUntil('batch one', async () =>
      (await a.entries(id)).some((e) => e.kind === 'turn_dispatched'),
    );
    await a.server.close();
    const answer = await pending;
    expectError(
      answer,
      503,
      'unavailable',
      /shut down while handling the request; retry \(with the same idempotency key/,
    );
    expect(answer.headers.get('connection')).toBe('close');
    await expect(
      call(a, 'GET', `/v1/conversations/${id}`, { token: TOKENS.alice }),
    ).rejects.toThrow();
  });

  it('is idempotent and refuses a second start', async () => {
    const a = await start();
    await expect(a.server.start()).rejects.toThrow('public API: start() called twice');
    await Promise.all([a.server.close(), a.server.close()]);
    await a.server.close();
    await expect(fetch(`${a.base}/v1/openapi.json`)).rejects.toThrow();
  });
});

describe('PublicApiServer: logs and metrics', () => {
  it('logs one line per request (method, route template, status, ms) and never the token or the text', async () => {
    const a = await start();
    const id = a.seed(ALICE_ID);
    const secretText = 'my-very-private-message-4711';
    const answer = await call(a, 'POST', `/v1/conversations/${id}/messages`, {
      token: TOKENS.alice,
      body: { text: secretText },
    });
    expect(answer.status).toBe(200);
    await call(a, 'GET', `/v1/conversations/${id}`, { token: TOKENS.unknown });
    const lines = a.logs.filter((l) => l.msg === 'request served');
    expect(lines).toHaveLength(2);
    expect(lines[0]).toMatchObject({
      level: 'info',
      component: 'api',
      method: 'POST',
      route: '/v1/conversations/{conversationId}/messages',
      status: 200,
      conversation: id,
      requestId: answer.headers.get('x-request-id'),
    });
    expect(typeof lines[0]?.ms).toBe('number');
    expect(lines[1]).toMatchObject({ status: 401, code: 'unauthenticated' });
    const all = a.rawLogs.join('');
    expect(all).not.toContain(secretText);
    expect(all).not.toContain(TOKENS.alice);
    expect(all).not.toContain(TOKENS.unknown);
  });

  it('counts requests by route template and status, and durations by route', async () => {
    const a = await start();
    const id = a.seed(ALICE_ID);
    await call(a, 'GET', `/v1/conversations/${id}`, { token: TOKENS.alice });
    await call(a, 'GET', `/v1/conversations/${id}`, { token: TOKENS.alice });
    await call(a, 'GET', `/v1/conversations/${UNKNOWN_ID}`, { token: TOKENS.alice });
    await call(a, 'GET', '/nowhere');
    const text = await a.registry.metrics();
    expect(text).toContain(
      'polychrome_api_requests_total{route="/v1/conversations/{conversationId}",status="200"} 2',
    );
    expect(text).toContain(
      'polychrome_api_requests_total{route="/v1/conversations/{conversationId}",status="404"} 1',
    );
    expect(text).toContain('polychrome_api_requests_total{route="unmatched",status="404"} 1');
    expect(text).toContain(
      'polychrome_api_request_duration_seconds_count{route="/v1/conversations/{conversationId}"} 3',
    );
    expect(text).toContain('polychrome_api_open_streams 0');
  });
});

describe('PublicApiServer: text must be well-formed Unicode', () => {
  /** JSON text with a lone surrogate escaped, as a client's serializer writes it. */
  const lone = { high: 'a\ud800b', low: '\udc00z' } as const;

  it.each([
    ['a lone high surrogate', lone.high, 1, 'd800'],
    ['a lone low surrogate', lone.low, 0, 'dc00'],
  ])(
    'answers 400 naming the field for %s in every text the API takes, and writes nothing',
    async (_, text, index, unit) => {
      const a = await start({ replies: [calculatorReply('1 + 1'), askReply('which one?')] });
      const id = a.seed(ALICE_ID);
      const expectBad = (answer: Answer, field: string): void => {
        expectError(
          answer,
          400,
          'invalid_argument',
          new RegExp(
            `^${field.replace('.', '\\.')} is not well-formed Unicode: it has a lone surrogate \\(\\\\u${unit} at UTF-16 index ${String(index)}\\); send .* with every surrogate pair complete`,
          ),
        );
        expect(errorOf(answer).details).toEqual({ field, index });
      };
      const messages = `/v1/conversations/${id}/messages`;
      expectBad(await call(a, 'POST', messages, { token: TOKENS.alice, body: { text } }), 'text');
      expectBad(
        await call(a, 'POST', '/v1/conversations', {
          token: TOKENS.alice,
          body: { message: { text } },
        }),
        'message.text',
      );
      expect(a.service.calls).toEqual([]);
      expect(await a.entries(id)).toHaveLength(0);

      // A paused approval and a paused question, to answer with bad text.
      const approval = await call(a, 'POST', messages, {
        token: TOKENS.alice,
        body: { text: 'add' },
      });
      const requestId = (approval.json as { approval: { requestId: string } }).approval.requestId;
      const approvals = `/v1/conversations/${id}/approvals/${requestId}`;
      expectBad(
        await call(a, 'POST', approvals, {
          token: TOKENS.admin,
          body: { decision: 'deny', comment: text },
        }),
        'comment',
      );
      const denied = await call(a, 'POST', approvals, {
        token: TOKENS.admin,
        body: { decision: 'deny', comment: 'no' },
      });
      const questionId = (denied.json as { question: { requestId: string } }).question.requestId;
      const head = a.head(id);
      expectBad(
        await call(a, 'POST', `/v1/conversations/${id}/questions/${questionId}`, {
          token: TOKENS.alice,
          body: { answer: text },
        }),
        'answer',
      );
      expect(a.head(id)).toBe(head);
    },
  );

  it('accepts astral characters, stores them as sent, and an exact retry is the same turn (not 409)', async () => {
    const a = await start();
    const id = a.seed(ALICE_ID);
    const text = 'deploy 🚀 to 𝔭𝔯𝔬𝔡 — ok? 👍🏽';
    const path = `/v1/conversations/${id}/messages`;
    const first = await call(a, 'POST', path, {
      token: TOKENS.alice,
      body: { text, idempotencyKey: 'astral-1' },
    });
    expect(first.status).toBe(200);
    const head = a.head(id);
    const retry = await call(a, 'POST', path, {
      token: TOKENS.alice,
      body: { text, idempotencyKey: 'astral-1' },
    });
    expect(retry.status).toBe(200);
    expect(retry.json).toEqual(first.json);
    expect(a.head(id)).toBe(head);
    const transcript = await call(a, 'GET', `/v1/conversations/${id}/transcript`, {
      token: TOKENS.alice,
    });
    expect(transcript.json).toMatchObject({ turns: [{ user: { text } }] });
    // Another text under the same key is still a conflict.
    expectError(
      await call(a, 'POST', path, {
        token: TOKENS.alice,
        body: { text: `${text}!`, idempotencyKey: 'astral-1' },
      }),
      409,
      'conflict',
    );
  });
});
