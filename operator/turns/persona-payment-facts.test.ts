/*
 * The shell between a paid call and the persona records, against the real Records service
 * over mutual TLS: what the plan is given (the persona's policy and its payments in the
 * period) and the count before a send, which the records refuse in the same step when it
 * would pass the persona's period cap (two conversations sending at once cannot both pass).
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { PaymentCharge } from '../../proto/gen/polychrome/events/v1/events';
import { startTestRecords, type TestRecords } from '../../test/support/records-server';
import { countPersonaSpend, personaPaymentOf } from './persona-payment-facts';

const NETWORK = 'eip155:31337';
const ASSET = `0x${'11'.repeat(20)}`;
const NOW = Date.parse('2026-12-07T12:00:00.000Z');
const LIMITS = JSON.stringify({
  assets: [{ asset: ASSET, maxPerPayment: '25', maxPerPeriod: '25', network: NETWORK }],
  networks: [NETWORK],
  payees: 'any',
  periodSeconds: 3600,
});

let records: TestRecords;
let personaId: string;

beforeAll(async () => {
  records = await startTestRecords();
  personaId = await records.persona('web:facts');
  await records.records.setPersonaPaymentPolicy({
    personaId,
    wallet: 'w',
    limitsJson: LIMITS,
    setBy: 'web:admin',
    session: '',
    reason: 'test',
    expectedSequence: 0,
  });
}, 60_000);

afterAll(async () => {
  await records.close();
});

const charge = (idempotencyKey: string, amount: string) =>
  ({ idempotencyKey, network: NETWORK, asset: ASSET, amount }) as PaymentCharge;

describe('the persona records around a paid call', () => {
  it('counts a payment, then refuses in the same step one that would pass the period cap', async () => {
    const before = await personaPaymentOf(records.records, personaId, NOW);
    expect(before).toMatchObject({ personaId, wallet: 'w', limitsJson: LIMITS, spent: [] });
    const first = charge('a'.repeat(64), '20');
    expect(await countPersonaSpend(records.records, personaId, first, 'c1', NOW, before)).toBe(
      undefined,
    );
    // A second conversation that read the persona before the first count (a race): the
    // records still refuse it.
    const second = charge('b'.repeat(64), '10');
    const refused = await countPersonaSpend(records.records, personaId, second, 'c2', NOW, before);
    expect(refused).toContain(`persona ${personaId}'s spend limit max_per_period`);
    const after = await personaPaymentOf(records.records, personaId, NOW);
    expect(after?.spent.map((s) => [s.amount, s.idempotencyKey])).toEqual([['20', 'a'.repeat(64)]]);
    // A retried send of the counted charge is no new count.
    expect(await countPersonaSpend(records.records, personaId, first, 'c1', NOW, after)).toBe(
      undefined,
    );
  });

  it('gives the plan nothing for a turn without a persona, or a persona without a policy', async () => {
    expect(await personaPaymentOf(records.records, '', NOW)).toBeUndefined();
    const bare = await records.persona('web:bare');
    expect(await personaPaymentOf(records.records, bare, NOW)).toBeUndefined();
  });
});
