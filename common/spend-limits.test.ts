import { describe, expect, it } from '@jest/globals';
import {
  checkSpendLimits,
  type PriorPayment,
  type SpendCharge,
  type SpendLimits,
} from './spend-limits';

const NOW = new Date('2026-12-06T12:00:00.000Z');
const USDC = '0x036cbd53842c5426634e7929541ec2318f3dcf7e';
const PAYEE = '0x209693bc6afc0c5328ba36faf03c514ef312287c';

const limits: SpendLimits = {
  networks: ['eip155:84532'],
  assets: [
    {
      network: 'eip155:84532',
      asset: USDC.toUpperCase().replace('0X', '0x'),
      maxPerPayment: '1000000',
      maxPerPeriod: '2500000',
    },
  ],
  payees: [PAYEE],
  periodSeconds: 86_400,
  expiresAt: '2027-01-01T00:00:00.000Z',
};

const charge: SpendCharge = {
  amount: '1000000',
  asset: USDC,
  network: 'eip155:84532',
  payee: PAYEE,
  expiresAt: '2026-12-06T12:01:00.000Z',
};

const paid = (
  amount: string,
  at: string,
  asset = USDC,
  network = 'eip155:84532',
): PriorPayment => ({ amount, at, asset, network });

describe('checkSpendLimits', () => {
  const cases: [string, SpendLimits, SpendCharge, PriorPayment[], string | undefined][] = [
    ['a charge inside every limit', limits, charge, [], undefined],
    [
      'exactly the per-period total',
      limits,
      charge,
      [paid('1500000', '2026-12-06T01:00:00.000Z')],
      undefined,
    ],
    [
      'any payee when payees is "any"',
      { ...limits, payees: 'any' },
      { ...charge, payee: '0x'.padEnd(42, '1') },
      [],
      undefined,
    ],
    [
      'payments older than the period do not count',
      limits,
      charge,
      [paid('2500000', '2026-12-05T11:59:59.000Z')],
      undefined,
    ],
    [
      'payments in another asset do not count',
      limits,
      charge,
      [paid('2500000', '2026-12-06T11:00:00.000Z', '0x'.padEnd(42, '2'))],
      undefined,
    ],
    [
      'a malformed cap fails closed',
      { ...limits, assets: [{ ...limits.assets[0]!, maxPerPeriod: '1e9' }] },
      charge,
      [],
      'invalid_limits',
    ],
    ['no period fails closed', { ...limits, periodSeconds: 0 }, charge, [], 'invalid_limits'],
    [
      'expired limits',
      { ...limits, expiresAt: '2026-12-06T12:00:00.000Z' },
      charge,
      [],
      'limits_expired',
    ],
    [
      'an expired charge',
      limits,
      { ...charge, expiresAt: '2026-12-06T11:59:00.000Z' },
      [],
      'charge_expired',
    ],
    ['another network', limits, { ...charge, network: 'eip155:8453' }, [], 'network'],
    ['an asset not listed', limits, { ...charge, asset: '0x'.padEnd(42, '3') }, [], 'asset'],
    [
      'the asset listed on another network only',
      { ...limits, networks: ['eip155:84532', 'eip155:1'] },
      { ...charge, network: 'eip155:1' },
      [],
      'asset',
    ],
    ['a payee not listed', limits, { ...charge, payee: '0x'.padEnd(42, '4') }, [], 'payee'],
    ['no payees listed', { ...limits, payees: [] }, charge, [], 'payee'],
    [
      'one base unit over per payment',
      limits,
      { ...charge, amount: '1000001' },
      [],
      'max_per_payment',
    ],
    [
      'an amount no float can hold',
      limits,
      { ...charge, amount: '9007199254740993000000' },
      [],
      'max_per_payment',
    ],
    [
      'one base unit over the period',
      limits,
      charge,
      [paid('1500001', '2026-12-06T11:00:00.000Z')],
      'max_per_period',
    ],
    [
      'many small payments adding up',
      limits,
      { ...charge, amount: '1' },
      Array.from({ length: 25 }, () => paid('100000', '2026-12-06T11:00:00.000Z')),
      'max_per_period',
    ],
  ];
  it.each(cases)('%s', (_name, l, c, prior, limit) => {
    const decision = checkSpendLimits(l, c, prior, NOW);
    if (limit === undefined) {
      expect(decision).toEqual({ allowed: true });
    } else {
      expect(decision).toMatchObject({ allowed: false, limit });
      expect(decision.allowed ? '' : decision.message).not.toBe('');
    }
  });

  it('names the amounts in a per-period refusal', () => {
    const decision = checkSpendLimits(
      limits,
      charge,
      [paid('2000000', '2026-12-06T11:00:00.000Z')],
      NOW,
    );
    expect(decision.allowed ? '' : decision.message).toBe(
      `1000000 on top of 2000000 already spent in the last 86400 s is over the limit of 2500000 of ${USDC}`,
    );
  });
});
