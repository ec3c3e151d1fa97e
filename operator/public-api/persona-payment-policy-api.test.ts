/*
 * `PUT` and `GET /v1/personas/{id}/payment-policy` (docs/api.md, docs/payments.md "A
 * persona's wallet and limits") against the real API server and the real state plane's
 * Records service over mutual TLS: what an admin's change records (who, when, why, in a
 * history), and the attacker's tries, which must record nothing: a member setting their own
 * persona's policy, an admin setting their own, an admin acting as someone else, the
 * Kubernetes door's kind of caller.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from '@jest/globals';
import { PersonaPaymentPolicies } from '../turns/persona-payment-policy';
import {
  ALICE,
  call,
  errorOf,
  startApi,
  TOKENS,
  type TestApi,
} from '../../test/support/api-fixtures';
import { startTestRecords, type TestRecords } from '../../test/support/records-server';
import { EXAMPLE_SPEND_LIMITS } from '../../test/support/spend-limits';
import { checkSchema, responseSchema } from '../../test/support/openapi-check';
import openapiDocument from '../../docs/api/openapi.json';
import type { Caller } from '../turns/turn-service';

const ROOT = 'email:root@example.com';

let records: TestRecords;
let api: TestApi | undefined;

beforeAll(async () => {
  records = await startTestRecords();
}, 60_000);
afterAll(async () => {
  await records.close();
});
afterEach(async () => {
  await api?.close();
  api = undefined;
});

async function started(): Promise<{ a: TestApi; personaId: string; path: string }> {
  const a = (api = await startApi({
    personaPolicies: new PersonaPaymentPolicies(records.records),
  }));
  const personaId = await records.persona(`email:p${String(Date.now())}@example.com`);
  return { a, personaId, path: `/v1/personas/${personaId}/payment-policy` };
}

const put = (a: TestApi, path: string, token: string, body: unknown) =>
  call(a, 'PUT', path, { token, body });
const get = (a: TestApi, path: string, token: string, actor: string) =>
  call(a, 'GET', `${path}?${new URLSearchParams({ actor }).toString()}`, { token });
const history = async (personaId: string) =>
  (await records.records.getPersonaPaymentPolicy(personaId)).history;

const body = (over: Record<string, unknown> = {}) => ({
  actor: ROOT,
  wallet: 'team-wallet',
  limits: EXAMPLE_SPEND_LIMITS,
  reason: 'the research team pays for its reports',
  ...over,
});

describe("an admin sets a persona's payment policy", () => {
  it('records wallet, canonical limits, who, session and why as a change, and shows the history', async () => {
    const { a, personaId, path } = await started();
    const set = await put(a, path, TOKENS.admin, body());
    expect(set.status).toBe(200);
    expect(set.json).toMatchObject({
      personaId,
      wallet: 'team-wallet',
      limits: EXAMPLE_SPEND_LIMITS,
      setBy: ROOT,
      sequence: 1,
      message: expect.stringContaining('pays with wallet team-wallet'),
    });
    const limitsOnly = await put(a, path, TOKENS.admin, body({ wallet: '', reason: 'no wallet' }));
    expect(limitsOnly.status).toBe(200);
    const [first, second] = await history(personaId);
    expect(first).toMatchObject({ wallet: 'team-wallet', setBy: ROOT, session: 'session-root' });
    expect(second).toMatchObject({ wallet: '', sequence: 2, reason: 'no wallet' });
    expect(JSON.parse(second?.limitsJson ?? '')).toEqual(EXAMPLE_SPEND_LIMITS);
    const read = await get(a, path, TOKENS.admin, ROOT);
    expect(read.json).toMatchObject({ personaId, wallet: '', sequence: 2 });
    expect((read.json as { history: unknown[] }).history).toHaveLength(2);
  });

  it('refuses bad limits naming the field, and a change that changes nothing (409)', async () => {
    const { a, personaId, path } = await started();
    const bad = await put(
      a,
      path,
      TOKENS.admin,
      body({ limits: { ...EXAMPLE_SPEND_LIMITS, periodSeconds: 0 } }),
    );
    expect([bad.status, (errorOf(bad).details as { field?: string }).field]).toEqual([
      400,
      'limits.periodSeconds',
    ]);
    const clearNothing = await put(a, path, TOKENS.admin, body({ wallet: '', limits: undefined }));
    expect(clearNothing.status).toBe(409);
    expect((await put(a, path, TOKENS.admin, body())).status).toBe(200);
    expect((await put(a, path, TOKENS.admin, body())).status).toBe(409);
    expect(await history(personaId)).toHaveLength(1);
  });

  it('answers as docs/api/openapi.json describes: read, set, refused', async () => {
    const { a, path } = await started();
    const template = '/v1/personas/{personaId}/payment-policy';
    const document = openapiDocument as unknown as Record<string, unknown>;
    const fits = async (answer: ReturnType<typeof call>, method: string, status: number) => {
      const { status: got, json } = await answer;
      const schema = responseSchema(document, method, template, got);
      expect({ status: got, problems: checkSchema(document, schema, json) }).toEqual({
        status,
        problems: [],
      });
    };
    await fits(get(a, path, TOKENS.admin, ROOT), 'GET', 200);
    await fits(put(a, path, TOKENS.admin, body()), 'PUT', 200);
    await fits(get(a, path, TOKENS.admin, ROOT), 'GET', 200);
    await fits(put(a, path, TOKENS.admin, body()), 'PUT', 409);
    await fits(put(a, path, TOKENS.alice, body({ actor: ALICE.identity })), 'PUT', 403);
  });

  it('answers 404 for a persona the records do not hold', async () => {
    const { a } = await started();
    const missing = await put(a, '/v1/personas/nobody/payment-policy', TOKENS.admin, body());
    expect(missing.status).toBe(404);
  });
});

describe('who may not, and nothing is recorded', () => {
  it.each<[string, string, Record<string, unknown>]>([
    ['a member, for any persona', TOKENS.alice, { actor: ALICE.identity }],
    ['an edge', TOKENS.edge, { actor: 'bot:support-desk' }],
    ['an admin acting as an identity not theirs', TOKENS.admin, { actor: ALICE.identity }],
  ])('%s gets 403', async (_name, token, over) => {
    const { a, personaId, path } = await started();
    const refused = await put(a, path, token, body(over));
    expect(refused.status).toBe(403);
    expect(await history(personaId)).toEqual([]);
    expect((await get(a, path, token, String(over.actor))).status).toBe(403);
  });

  it("a member setting their own persona's policy gets 403, nothing recorded", async () => {
    const own = await records.persona('email:member-own@example.com');
    const member: Caller = {
      identity: 'email:member-own@example.com',
      identities: ['email:member-own@example.com'],
      personaId: own,
      roles: ['member'],
      sessionId: 's',
    };
    const policies = new PersonaPaymentPolicies(records.records);
    const request = { personaId: own, ...body({ actor: member.identity }) };
    await expect(policies.set(member, request, new AbortController().signal)).rejects.toMatchObject(
      { code: 'permission_denied' },
    );
    expect(await history(own)).toEqual([]);
  });

  it("an admin setting their own persona's policy gets 403: no one widens their own spending", async () => {
    const own = await records.persona('email:admin-own@example.com', ['admin']);
    const admin: Caller = {
      identity: 'email:admin-own@example.com',
      identities: ['email:admin-own@example.com'],
      personaId: own,
      roles: ['admin'],
      sessionId: 's',
    };
    const policies = new PersonaPaymentPolicies(records.records);
    const request = { personaId: own, ...body({ actor: admin.identity }) };
    await expect(policies.set(admin, request, new AbortController().signal)).rejects.toMatchObject({
      code: 'permission_denied',
      message: expect.stringContaining('their own persona'),
    });
    expect(await history(own)).toEqual([]);
    // Reading it is no widening: an admin may.
    const read = await policies.read(admin, own, admin.identity, new AbortController().signal);
    expect(read).toMatchObject({ personaId: own, wallet: '', sequence: 0 });
  });

  it('a Kubernetes caller let in for a conversation (even its payment-policy, with admin) gets 403: that grant is none on a persona', async () => {
    const personaId = await records.persona('email:kube-target@example.com');
    const kube: Caller = {
      identity: 'kubernetes:cluster-admin',
      identities: ['kubernetes:cluster-admin'],
      personaId: '',
      roles: ['admin'],
      sessionId: '',
      kubernetes: {
        conversationId: 'c',
        subresource: 'payment-policy',
        verb: 'create',
        groups: [],
      },
    };
    const policies = new PersonaPaymentPolicies(records.records);
    const request = { personaId, ...body({ actor: kube.identity }) };
    await expect(policies.set(kube, request, new AbortController().signal)).rejects.toMatchObject({
      code: 'permission_denied',
    });
    expect(await history(personaId)).toEqual([]);
  });
});
