import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from '@jest/globals';
import { ErrorCode } from '../../common/errors';
import { ROUTES } from './routes';
import { askReply, calculatorReply, textReply } from '../../test/support/real-turns';
import {
  call,
  dataOf,
  SseClient,
  startApi,
  TOKENS,
  type Answer,
  type TestApi,
} from '../../test/support/api-fixtures';
import { checkSchema, resolveRef, responseSchema } from '../../test/support/openapi-check';
import { EXAMPLE_SPEND_LIMITS } from '../../test/support/spend-limits';

const DOCUMENT_PATH = join(__dirname, '..', '..', 'docs', 'api', 'openapi.json');

async function loadDocument(): Promise<Record<string, unknown>> {
  const value: unknown = JSON.parse(await readFile(DOCUMENT_PATH, 'utf8'));
  if (typeof value !== 'object' || value === null) throw new Error('not an object');
  return { ...value };
}

function operations(document: Record<string, unknown>): Map<string, Record<string, unknown>> {
  const out = new Map<string, Record<string, unknown>>();
  const paths = document.paths;
  if (typeof paths !== 'object' || paths === null) return out;
  for (const [template, item] of Object.entries(paths)) {
    if (typeof item !== 'object' || item === null) continue;
    for (const method of ['get', 'post', 'put', 'patch', 'delete', 'head', 'options']) {
      const operation: unknown = Reflect.get(item, method);
      if (typeof operation === 'object' && operation !== null) {
        out.set(`${method.toUpperCase()} ${template}`, { ...operation });
      }
    }
  }
  return out;
}

let api: TestApi | undefined;
afterEach(async () => {
  await api?.close();
  api = undefined;
});

describe('docs/api/openapi.json', () => {
  it('is OpenAPI 3.1 and documents exactly the routes the router serves, with their operation ids', async () => {
    const document = await loadDocument();
    expect(document.openapi).toMatch(/^3\.1\./);
    const documented = operations(document);
    const served = new Map(ROUTES.map((r) => [`${r.method} ${r.template}`, r]));
    expect([...documented.keys()].sort()).toEqual([...served.keys()].sort());
    for (const [key, operation] of documented) {
      const route = served.get(key);
      expect({ key, operationId: operation.operationId }).toEqual({
        key,
        operationId: route?.operation,
      });
      const isPublic = Array.isArray(operation.security) && operation.security.length === 0;
      expect({ key, isPublic }).toEqual({ key, isPublic: route?.authenticated === false });
    }
  });

  it('declares bearer authentication and a 401 on every authenticated operation', async () => {
    const document = await loadDocument();
    expect(resolveRef(document, '#/components/securitySchemes/bearerAuth')).toMatchObject({
      type: 'http',
      scheme: 'bearer',
    });
    expect(document.security).toEqual([{ bearerAuth: [] }]);
    for (const [key, operation] of operations(document)) {
      if (key === 'GET /v1/openapi.json') continue;
      const responses = operation.responses;
      expect({
        key,
        has401: typeof responses === 'object' && responses !== null && '401' in responses,
      }).toEqual({
        key,
        has401: true,
      });
    }
  });

  it('lists the error codes of common/errors.ts, no more, no less', async () => {
    const document = await loadDocument();
    expect(resolveRef(document, '#/components/schemas/ErrorCode').enum).toEqual(
      Object.values(ErrorCode),
    );
  });

  it('resolves every $ref it uses', async () => {
    const document = await loadDocument();
    const refs: string[] = [];
    const walk = (node: unknown): void => {
      if (Array.isArray(node)) node.forEach(walk);
      else if (typeof node === 'object' && node !== null) {
        for (const [key, value] of Object.entries(node)) {
          if (key === '$ref' && typeof value === 'string') refs.push(value);
          else walk(value);
        }
      }
    };
    walk(document);
    expect(refs.length).toBeGreaterThan(50);
    for (const ref of new Set(refs)) expect(() => resolveRef(document, ref)).not.toThrow();
  });

  it('is what GET /v1/openapi.json serves, without a token', async () => {
    api = await startApi();
    const answer = await call(api, 'GET', '/v1/openapi.json');
    expect(answer.status).toBe(200);
    expect(answer.headers.get('content-type')).toBe('application/json; charset=utf-8');
    expect(answer.json).toEqual(await loadDocument());
  });

  it('describes real answers: successes, errors and stream events fit their schemas', async () => {
    const document = await loadDocument();
    const a = (api = await startApi({
      replies: [
        textReply('hello back'),
        calculatorReply('6 * 7'),
        textReply('It is 42.'),
        askReply('why?'),
        textReply('I see.'),
      ],
    }));
    const fits = (answer: Answer, method: string, template: string): void => {
      const schema = responseSchema(document, method, template, answer.status);
      expect({
        template,
        status: answer.status,
        problems: checkSchema(document, schema, answer.json),
      }).toEqual({
        template,
        status: answer.status,
        problems: [],
      });
    };
    const conversations = '/v1/conversations';
    const one = '/v1/conversations/{conversationId}';

    const empty = await call(a, 'POST', conversations, { token: TOKENS.alice });
    expect(empty.status).toBe(201);
    fits(empty, 'POST', conversations);
    const created = await call(a, 'POST', conversations, {
      token: TOKENS.alice,
      body: { message: { text: 'hello' } },
    });
    expect(created.status).toBe(201);
    fits(created, 'POST', conversations);
    const id = (created.json as { conversationId: string }).conversationId;

    fits(await call(a, 'GET', `/v1/conversations/${id}`, { token: TOKENS.alice }), 'GET', one);
    const paused = await call(a, 'POST', `/v1/conversations/${id}/messages`, {
      token: TOKENS.alice,
      body: { text: 'What is 6 * 7?' },
    });
    expect(paused.status).toBe(200);
    fits(paused, 'POST', `${one}/messages`);
    fits(await call(a, 'GET', `/v1/conversations/${id}`, { token: TOKENS.alice }), 'GET', one);
    fits(
      await call(a, 'GET', `/v1/conversations/${id}/transcript`, { token: TOKENS.alice }),
      'GET',
      `${one}/transcript`,
    );
    const requestId = (paused.json as { approval: { requestId: string } }).approval.requestId;
    const approved = await call(a, 'POST', `/v1/conversations/${id}/approvals/${requestId}`, {
      token: TOKENS.admin,
      body: { decision: 'approve' },
    });
    expect(approved.status).toBe(200);
    fits(approved, 'POST', `${one}/approvals/{requestId}`);
    const asked = await call(a, 'POST', `/v1/conversations/${id}/messages`, {
      token: TOKENS.alice,
      body: { text: 'Ask me something.' },
    });
    const questionId = (asked.json as { question: { requestId: string } }).question.requestId;
    const answered = await call(a, 'POST', `/v1/conversations/${id}/questions/${questionId}`, {
      token: TOKENS.alice,
      body: { answer: 'because' },
    });
    fits(answered, 'POST', `${one}/questions/{requestId}`);
    fits(
      await call(a, 'GET', `/v1/conversations/${id}/transcript`, { token: TOKENS.alice }),
      'GET',
      `${one}/transcript`,
    );

    // Errors.
    fits(await call(a, 'GET', `/v1/conversations/${id}`), 'GET', one);
    fits(await call(a, 'GET', `/v1/conversations/${id}`, { token: TOKENS.bob }), 'GET', one);
    fits(await call(a, 'GET', '/v1/conversations/nope', { token: TOKENS.alice }), 'GET', one);
    fits(
      await call(a, 'GET', '/v1/conversations/0b5c3a9e-4f0d-4d0a-9a52-6f1e2b7c8d90', {
        token: TOKENS.alice,
      }),
      'GET',
      one,
    );
    fits(
      await call(a, 'POST', `/v1/conversations/${id}/messages`, {
        token: TOKENS.alice,
        body: { text: 'x', idempotencyKey: 'a', pad: 'y'.repeat(70_000) },
      }),
      'POST',
      `${one}/messages`,
    );
    fits(
      await call(a, 'POST', `/v1/conversations/${id}/messages`, {
        token: TOKENS.alice,
        rawBody: 'hi',
        headers: { 'content-type': 'text/plain' },
      }),
      'POST',
      `${one}/messages`,
    );
    fits(
      await call(a, 'POST', `/v1/conversations/${id}/messages`, {
        token: TOKENS.alice,
        body: { text: 'hello', idempotencyKey: created.headers.get('idempotency-key') ?? '' },
      }),
      'POST',
      `${one}/messages`,
    );

    // Stream event data.
    const client = await SseClient.open(a, `/v1/conversations/${id}/stream`, {
      authorization: `Bearer ${TOKENS.alice}`,
    });
    try {
      await client.waitFor('every event', () => client.events().length === a.head(id));
      const eventSchema = { $ref: '#/components/schemas/StreamEvent' };
      for (const event of client.events()) {
        expect(checkSchema(document, eventSchema, dataOf(event))).toEqual([]);
      }
    } finally {
      client.close();
    }
    const shutdownClient = await SseClient.open(a, `/v1/conversations/${id}/stream?since=0`, {
      authorization: `Bearer ${TOKENS.alice}`,
    });
    await shutdownClient.waitFor('events', () => shutdownClient.events().length > 0);
    await a.server.close();
    await shutdownClient.ended;
    const last = shutdownClient.messages.at(-1);
    expect(last?.event).toBe('shutdown');
    expect(
      checkSchema(document, { $ref: '#/components/schemas/StreamShutdown' }, dataOf(last)),
    ).toEqual([]);
  });

  it('describes the payment policy answers: read, set, refused', async () => {
    const document = await loadDocument();
    const a = (api = await startApi());
    const id = a.seed('email:alice@example.com');
    const template = '/v1/conversations/{conversationId}/payment-policy';
    const path = `/v1/conversations/${id}/payment-policy`;
    const read = `${path}?actor=${encodeURIComponent('email:root@example.com')}`;
    const fits = (answer: Answer, method: string, status: number): void => {
      const schema = responseSchema(document, method, template, answer.status);
      expect({
        status: answer.status,
        problems: checkSchema(document, schema, answer.json),
      }).toEqual({ status, problems: [] });
    };
    fits(await call(a, 'GET', read, { token: TOKENS.admin }), 'GET', 200);
    const body = {
      actor: 'email:root@example.com',
      wallet: 'support-desk',
      limits: { ...EXAMPLE_SPEND_LIMITS, expiresAt: '2027-01-01T00:00:00Z' },
      reason: 'paid search',
    };
    fits(await call(a, 'PUT', path, { token: TOKENS.admin, body }), 'PUT', 200);
    fits(await call(a, 'GET', read, { token: TOKENS.admin }), 'GET', 200);
    fits(await call(a, 'PUT', path, { token: TOKENS.admin, body }), 'PUT', 409);
    fits(await call(a, 'PUT', path, { token: TOKENS.alice, body }), 'PUT', 403);
    fits(await call(a, 'GET', path, { token: TOKENS.admin }), 'GET', 400);
  });

  it('flags an answer that drifts from the document (the checker itself works)', async () => {
    const document = await loadDocument();
    const schema = { $ref: '#/components/schemas/TurnReply' };
    expect(
      checkSchema(document, schema, { conversationId: 'x', turnId: 't', status: 'complete' }),
    ).toEqual([
      '$: required property requestedAt is missing',
      '$.conversationId: "x" does not match ^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$',
    ]);
    expect(
      checkSchema(
        document,
        { $ref: '#/components/schemas/Error' },
        { error: { code: 'nope', message: 1 }, extra: true },
      ),
    ).toEqual([
      '$.error.code: "nope" is not one of ["invalid_argument","not_found","already_exists","conflict","failed_precondition","fenced","unauthenticated","permission_denied","resource_exhausted","unavailable","deadline_exceeded","cancelled","data_loss","internal"]',
      '$.error.message: expected string, got integer',
      '$: property extra is not in the schema',
    ]);
  });
});
