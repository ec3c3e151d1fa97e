import { describe, expect, it } from '@jest/globals';

import type { SpendCharge } from '../../common/spend-limits';
import {
  effectivePayment,
  NO_WALLET,
  type CountedPayment,
  type EffectivePayment,
  type PaymentPolicies,
  type PersonaPayment,
} from './effective-payment';
import type { PaymentPolicyRef } from './journal-view-types';

// The one rule of who pays and which limits hold a charge, by table. Both the
// conversation's and the persona's limits apply, so neither can widen the other; the
// conversation's wallet pays when one is linked, else the persona's; with neither nothing
// is paid. The attacker's rows: a persona policy wider than the conversation's, a persona
// total used up in other conversations, and a retried send counting itself.

const NOW = Date.parse('2026-12-07T12:00:00.000Z');
const NETWORK = 'eip155:31337';
const ASSET = `0x${'11'.repeat(20)}`;
const PAYEE = `0x${'22'.repeat(20)}`;

const limitsJson = (maxPerPayment: string, maxPerPeriod: string): string =>
  JSON.stringify({
    networks: [NETWORK],
    assets: [{ network: NETWORK, asset: ASSET, maxPerPayment, maxPerPeriod }],
    payees: 'any',
    periodSeconds: 3600,
  });

const conversationLink = (
  wallet: string,
  limits = limitsJson('20000', '25000'),
): PaymentPolicyRef => ({
  position: 3,
  wallet,
  limitsJson: wallet === '' ? '' : limits,
  actor: 'admin:ada',
  setAtMs: 0,
});

const persona = (over: Partial<PersonaPayment> = {}): PersonaPayment => ({
  personaId: 'p',
  wallet: 'persona-wallet',
  limitsJson: limitsJson('20000', '25000'),
  spent: [],
  ...over,
});

const spent = (amount: string, idempotencyKey?: string): CountedPayment => ({
  network: NETWORK,
  asset: ASSET,
  amount,
  at: new Date(NOW - 60_000).toISOString(),
  ...(idempotencyKey === undefined ? {} : { idempotencyKey }),
});

const charge = (amount: string): SpendCharge => ({
  amount,
  asset: ASSET,
  network: NETWORK,
  payee: PAYEE,
  expiresAt: new Date(NOW + 60_000).toISOString(),
});

const policies = (over: Partial<PaymentPolicies>): PaymentPolicies => ({
  conversation: undefined,
  conversationSpent: [],
  persona: undefined,
  ...over,
});

const pays = (wallet: string, payer: 'conversation' | 'persona'): EffectivePayment => ({
  kind: 'pay',
  wallet,
  payer,
});
const refuses = (reason: string) => ({
  kind: 'refuse',
  reason: expect.stringContaining(reason),
  noWallet: false,
});

describe('who pays a charge, and which limits hold it', () => {
  it.each<[string, Partial<PaymentPolicies>, string, unknown]>([
    ['no link anywhere', {}, '10000', { kind: 'refuse', reason: NO_WALLET, noWallet: true }],
    [
      'a persona with limits but no wallet, and no conversation link',
      { persona: persona({ wallet: '' }) },
      '10000',
      { kind: 'refuse', reason: NO_WALLET, noWallet: true },
    ],
    [
      'only a persona link: its wallet',
      { persona: persona() },
      '10000',
      pays('persona-wallet', 'persona'),
    ],
    [
      'only a conversation link: its wallet',
      { conversation: conversationLink('ops') },
      '10000',
      pays('ops', 'conversation'),
    ],
    [
      'both linked: the conversation’s wallet pays',
      { conversation: conversationLink('ops'), persona: persona() },
      '10000',
      pays('ops', 'conversation'),
    ],
    [
      'a conversation unlinked: the persona’s wallet pays',
      { conversation: conversationLink(''), persona: persona() },
      '10000',
      pays('persona-wallet', 'persona'),
    ],
    [
      'a persona policy wider than the conversation’s does not widen it',
      {
        conversation: conversationLink('ops'),
        persona: persona({ limitsJson: limitsJson('1000000000', '1000000000') }),
      },
      '30000',
      refuses("the conversation's spend limit max_per_payment: 30000 is over the limit of 20000"),
    ],
    [
      'a conversation link wider than the persona’s limits does not widen them',
      {
        conversation: conversationLink('ops', limitsJson('1000000000', '1000000000')),
        persona: persona({ wallet: '', limitsJson: limitsJson('5000', '5000') }),
      },
      '10000',
      refuses("persona p's spend limit max_per_payment: 10000 is over the limit of 5000"),
    ],
    [
      'a persona total used up in its other conversations',
      { persona: persona({ spent: [spent('20000')] }) },
      '10000',
      refuses("persona p's spend limit max_per_period: 10000 on top of 20000"),
    ],
    [
      'a conversation total used up, the persona’s not',
      {
        conversation: conversationLink('ops'),
        conversationSpent: [spent('20000')],
        persona: persona(),
      },
      '10000',
      refuses("the conversation's spend limit max_per_period"),
    ],
    [
      'a persona limit on another network',
      { persona: persona({ limitsJson: limitsJson('1', '1').replace(NETWORK, 'eip155:8453') }) },
      '1',
      refuses("persona p's spend limit"),
    ],
  ])('%s', (_name, over, amount, expected) => {
    expect(effectivePayment(policies(over), charge(amount), NOW)).toEqual(expected);
  });

  it('does not count a retried send against itself: its spend may be recorded already', () => {
    const retried = policies({ persona: persona({ spent: [spent('20000', 'k1')] }) });
    expect(effectivePayment(retried, charge('20000'), NOW, 'k1')).toEqual(
      pays('persona-wallet', 'persona'),
    );
    expect(effectivePayment(retried, charge('20000'), NOW, 'k2').kind).toBe('refuse');
  });
});
