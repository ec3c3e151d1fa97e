import { afterEach, beforeEach, describe, expect, it } from '@jest/globals';

import { openHarness, rejection, type Harness } from './testdata/fixtures';

const ADMIN = 'test:admin';
const LIMITS = '{"assets":[],"networks":["eip155:31337"],"payees":"any","periodSeconds":3600}';
const KEY_A = 'a'.repeat(64);
const KEY_B = 'b'.repeat(64);

let h: Harness;
let personaId: string;

beforeEach(async () => {
  h = await openHarness();
  personaId = (await h.store.personas.create({ displayName: 'Payer' })).id;
});

afterEach(async () => {
  await h.close();
});

const policy = (wallet: string, expectedSequence: number) => ({
  personaId,
  wallet,
  limitsJson: LIMITS,
  setBy: ADMIN,
  session: 'session-1',
  reason: 'budget',
  expectedSequence,
});

const spend = (idempotencyKey: string, amount: string, atMs: number) => ({
  personaId,
  idempotencyKey,
  conversationId: 'conv-1',
  network: 'eip155:31337',
  asset: '0xtoken',
  amount,
  atMs,
});

describe('PersonaPayments policy', () => {
  it('appends each change with who, when and why; the newest is in force, across a reopen', async () => {
    const first = await h.store.personaPayments.setPolicy(policy('team-wallet', 0));
    h.clock.advance(1000);
    await h.store.personaPayments.setPolicy({ ...policy('', 1), limitsJson: '' });
    const store = await h.reopen();
    const read = await store.personaPayments.policy(personaId);
    expect(read.history.map((p) => [p.sequence, p.wallet, p.setBy, p.reason])).toEqual([
      [1, 'team-wallet', ADMIN, 'budget'],
      [2, '', ADMIN, 'budget'],
    ]);
    expect(read.current?.wallet).toBe('');
    expect(read.current?.setAtMs).toBe((first.current?.setAtMs ?? 0) + 1000);
  });

  it('refuses a stale sequence, a bad wallet, a wallet without limits and no reason; nothing is written', async () => {
    await h.store.personaPayments.setPolicy(policy('w', 0));
    const stale = await rejection(h.store.personaPayments.setPolicy(policy('x', 0)));
    expect([stale.code, stale.details.sequence]).toEqual(['conflict', 1]);
    const bad = await rejection(h.store.personaPayments.setPolicy(policy('Not_A_Label', 1)));
    expect([bad.code, bad.details.field]).toEqual(['invalid_argument', 'wallet']);
    const bare = await rejection(
      h.store.personaPayments.setPolicy({ ...policy('w2', 1), limitsJson: '' }),
    );
    expect(bare.details.field).toBe('limitsJson');
    const why = await rejection(
      h.store.personaPayments.setPolicy({ ...policy('w2', 1), reason: ' ' }),
    );
    expect(why.details.field).toBe('reason');
    expect((await h.store.personaPayments.policy(personaId)).history).toHaveLength(1);
  });

  it('refuses a persona that does not exist', async () => {
    const missing = await rejection(
      h.store.personaPayments.setPolicy({ ...policy('w', 0), personaId: 'nobody' }),
    );
    expect(missing.code).toBe('not_found');
  });
});

describe('PersonaPayments spends', () => {
  it('counts each idempotency key once and lists from a time on, across a reopen', async () => {
    const t = h.clock.nowMs();
    expect((await h.store.personaPayments.recordSpend(spend(KEY_A, '10', t))).recorded).toBe(true);
    const again = await h.store.personaPayments.recordSpend(spend(KEY_A, '99', t + 5));
    expect([again.recorded, again.spend.amount, again.spend.atMs]).toEqual([false, '10', t]);
    await h.store.personaPayments.recordSpend(spend(KEY_B, '20', t + 2000));
    const store = await h.reopen();
    expect((await store.personaPayments.spends(personaId, 0)).map((s) => s.amount)).toEqual([
      '10',
      '20',
    ]);
    expect((await store.personaPayments.spends(personaId, t)).map((s) => s.amount)).toEqual([
      '10',
      '20',
    ]);
    expect((await store.personaPayments.spends(personaId, t + 1)).map((s) => s.amount)).toEqual([
      '20',
    ]);
  });

  it('refuses, in the same step, a count that would pass the cap of its network and asset', async () => {
    const t = h.clock.nowMs();
    const cap = { maxPerPeriod: '25', sinceMs: t - 1000 };
    await h.store.personaPayments.recordSpend(spend(KEY_A, '20', t), cap);
    const over = await rejection(h.store.personaPayments.recordSpend(spend(KEY_B, '10', t), cap));
    expect([over.code, over.details.limit, over.details.counted]).toEqual([
      'failed_precondition',
      'max_per_period',
      '20',
    ]);
    // Another asset, an older payment and a repeat of a counted key are not over it.
    const other = { ...spend(KEY_B, '10', t), asset: '0xother' };
    expect((await h.store.personaPayments.recordSpend(other, cap)).recorded).toBe(true);
    const later = { maxPerPeriod: '25', sinceMs: t + 1 };
    const next = spend('c'.repeat(64), '25', t + 10);
    expect((await h.store.personaPayments.recordSpend(next, later)).recorded).toBe(true);
    expect((await h.store.personaPayments.recordSpend(spend(KEY_A, '20', t), cap)).recorded).toBe(
      false,
    );
  });

  it('refuses a malformed spend and goes with the persona when it is deleted', async () => {
    const t = h.clock.nowMs();
    const bad = await rejection(h.store.personaPayments.recordSpend(spend('nothex', '1', t)));
    expect(bad.details.field).toBe('idempotencyKey');
    const amount = await rejection(h.store.personaPayments.recordSpend(spend(KEY_A, '1.5', t)));
    expect(amount.details.field).toBe('amount');
    await h.store.personaPayments.recordSpend(spend(KEY_A, '1', t));
    await h.store.personaPayments.setPolicy(policy('w', 0));
    await h.store.personas.delete(personaId);
    const left = (await h.rawRecords()).filter(([key]) => key.includes(personaId));
    expect(left).toEqual([]);
  });
});
