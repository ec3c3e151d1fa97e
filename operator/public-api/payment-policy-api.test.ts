/*
 * `PUT` and `GET /v1/conversations/{id}/payment-policy` (docs/api.md, docs/payments.md
 * "Linking a wallet") against the real API server, turn coordinator and journal store:
 * what an admin's link records, and the attacker's tries that must record nothing.
 */
import { afterEach, describe, expect, it } from '@jest/globals';
import { payloadCodecs } from '../../common/event-kinds';
import { partitionOf } from '../../common/partition-name';
import {
  ALICE,
  BOB,
  EDGE,
  call,
  errorOf,
  startApi,
  TOKENS,
  type TestApi,
} from '../../test/support/api-fixtures';
import { EXAMPLE_SPEND_LIMITS } from '../../test/support/spend-limits';

const ROOT = 'email:root@example.com';
const TOKEN = '0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913';
const LIMITS = {
  ...EXAMPLE_SPEND_LIMITS,
  assets: [{ ...EXAMPLE_SPEND_LIMITS.assets[0], asset: TOKEN }],
};

let api: TestApi | undefined;
afterEach(async () => {
  await api?.close();
  api = undefined;
});

async function started(): Promise<{ a: TestApi; id: string; path: string }> {
  const a = (api = await startApi());
  const id = a.seed(ALICE.identity, {
    visibility: 'shared',
    participants: [BOB.identity, EDGE.identity],
  });
  return { a, id, path: `/v1/conversations/${id}/payment-policy` };
}

const put = (a: TestApi, path: string, token: string, body: unknown) =>
  call(a, 'PUT', path, { token, body });
const get = (a: TestApi, path: string, token: string, actor: string) =>
  call(a, 'GET', `${path}?${new URLSearchParams({ actor }).toString()}`, { token });

/** The `payment_policy` events of the conversation, decoded from the real store. */
async function policies(a: TestApi, id: string) {
  const entries = await a.turns.journal.entries(partitionOf(id));
  return entries
    .filter((e) => e.kind === 'payment_policy')
    .map((e) => ({ position: e.position, ...payloadCodecs.payment_policy.decode(e.payload) }));
}

describe('an admin links a wallet', () => {
  it('records the wallet, canonical limits, actor, caller, session and reason, and shows them', async () => {
    const { a, id, path } = await started();
    const linked = await put(a, path, TOKENS.admin, {
      actor: ROOT,
      wallet: 'support-desk',
      limits: LIMITS,
      reason: 'paid search, ticket OPS-112',
    });
    expect(linked.status).toBe(200);
    const limits = EXAMPLE_SPEND_LIMITS;
    expect(linked.json).toMatchObject({
      conversationId: id,
      wallet: 'support-desk',
      limits,
      setBy: ROOT,
      position: 0,
    });
    const [recorded] = await policies(a, id);
    expect(recorded).toMatchObject({
      position: 0,
      wallet: 'support-desk',
      actor: ROOT,
      caller: ROOT,
      session: 'session-root',
      reason: 'paid search, ticket OPS-112',
    });
    expect(recorded?.limitsJson).toBe(
      '{"assets":[{"asset":"0x833589fcd6edb6e08f4c7c32d4f71b54bda02913","maxPerPayment":"1000000","maxPerPeriod":"20000000","network":"eip155:8453"}],"networks":["eip155:8453"],"payees":"any","periodSeconds":86400}',
    );
    const shown = await get(a, path, TOKENS.admin, ROOT);
    expect(shown.json).toEqual({
      conversationId: id,
      wallet: 'support-desk',
      limits,
      setBy: ROOT,
      setAtMs: Number(recorded?.setAtMs),
      position: 0,
      head: a.head(id),
    });
  });

  it('refuses the same policy again (409), then rotates to another wallet and unlinks', async () => {
    const { a, id, path } = await started();
    const body = { actor: ROOT, wallet: 'desk-2026', limits: LIMITS, reason: 'start' };
    expect((await put(a, path, TOKENS.admin, body)).status).toBe(200);
    const again = await put(a, path, TOKENS.admin, { ...body, reason: 'again' });
    expect({ status: again.status, code: errorOf(again).code }).toEqual({
      status: 409,
      code: 'conflict',
    });
    const rotated = await put(a, path, TOKENS.admin, { ...body, wallet: 'desk-2027' });
    expect(rotated.status).toBe(200);
    const unlinked = await put(a, path, TOKENS.admin, { actor: ROOT, wallet: '', reason: 'end' });
    expect(unlinked.json).toMatchObject({ wallet: '' });
    expect((await policies(a, id)).map((p) => p.wallet)).toEqual(['desk-2026', 'desk-2027', '']);
    expect((await get(a, path, TOKENS.admin, ROOT)).json).toMatchObject({ wallet: '' });
    expect((await get(a, path, TOKENS.admin, ROOT)).json).not.toHaveProperty('limits');
  });

  it.each([
    [
      'a cap that is not whole base units',
      { ...LIMITS, assets: [{ ...LIMITS.assets[0], maxPerPayment: '0.5' }] },
      'limits.assets[0].maxPerPayment',
    ],
    ['no period', { ...LIMITS, periodSeconds: undefined }, 'limits.periodSeconds'],
    [
      'payees that are neither "any" nor addresses',
      { ...LIMITS, payees: 'everyone' },
      'limits.payees',
    ],
  ])(
    'refuses limits with %s (400 naming the field), recording nothing',
    async (_case, limits, field) => {
      const { a, id, path } = await started();
      const answer = await put(a, path, TOKENS.admin, {
        actor: ROOT,
        wallet: 'w',
        limits,
        reason: 'r',
      });
      expect({ status: answer.status, details: errorOf(answer).details }).toEqual({
        status: 400,
        details: { field },
      });
      expect(a.head(id)).toBe(0);
    },
  );
});

describe('a malformed request', () => {
  it.each([
    [
      'an unknown field',
      { actor: ROOT, wallet: 'w', limits: LIMITS, reason: 'r', force: true },
      'force',
    ],
    ['no wallet', { actor: ROOT, limits: LIMITS, reason: 'r' }, 'wallet'],
    ['no reason', { actor: ROOT, wallet: 'w', limits: LIMITS }, 'reason'],
    ['no actor', { wallet: 'w', limits: LIMITS, reason: 'r' }, 'actor'],
    [
      'a wallet that is not a DNS label',
      { actor: ROOT, wallet: 'Desk_1', limits: LIMITS, reason: 'r' },
      'wallet',
    ],
    ['a wallet without limits', { actor: ROOT, wallet: 'w', reason: 'r' }, 'limits'],
    ['an unlink with limits', { actor: ROOT, wallet: '', limits: LIMITS, reason: 'r' }, 'limits'],
    ['a body that is not an object', [ROOT], 'body'],
  ])('is refused 400 naming the field: %s', async (_case, body, field) => {
    const { a, id, path } = await started();
    const answer = await put(a, path, TOKENS.admin, body);
    expect({ status: answer.status, details: errorOf(answer).details }).toEqual({
      status: 400,
      details: { field },
    });
    expect(a.head(id)).toBe(0);
  });

  it('refuses a read without an actor, 400', async () => {
    const { a, path } = await started();
    const answer = await call(a, 'GET', path, { token: TOKENS.admin });
    expect({ status: answer.status, details: errorOf(answer).details }).toEqual({
      status: 400,
      details: { field: 'actor' },
    });
  });
});

describe("the attacker's tries record nothing", () => {
  const body = (actor: string) => ({ actor, wallet: 'mine', limits: LIMITS, reason: 'let me pay' });

  it.each([
    ['the owner', TOKENS.alice, ALICE.identity],
    ['a participant', TOKENS.bob, BOB.identity],
    ['an edge taking part', TOKENS.edge, EDGE.identity],
    ['another tenant', TOKENS.carol, 'email:carol@example.com'],
    ['the owner naming an admin as actor (a forged actor)', TOKENS.alice, ROOT],
    ['an admin naming the owner as actor (a forged actor)', TOKENS.admin, ALICE.identity],
  ])('%s: 403 to link and to read', async (_who, token, actor) => {
    const { a, id, path } = await started();
    const linked = await put(a, path, token, body(actor));
    expect({ status: linked.status, code: errorOf(linked).code }).toEqual({
      status: 403,
      code: 'permission_denied',
    });
    expect((await get(a, path, token, actor)).status).toBe(403);
    expect(a.head(id)).toBe(0);
  });

  it('gets 404 for a conversation that does not exist, and 415 without JSON', async () => {
    const { a, path } = await started();
    const missing = '/v1/conversations/0b5c3a9e-4f0d-4d0a-9a52-6f1e2b7c8d90/payment-policy';
    expect((await put(a, missing, TOKENS.admin, body(ROOT))).status).toBe(404);
    expect((await get(a, missing, TOKENS.admin, ROOT)).status).toBe(404);
    const plain = await call(a, 'PUT', path, {
      token: TOKENS.admin,
      rawBody: JSON.stringify(body(ROOT)),
    });
    expect(plain.status).toBe(415);
  });
});
