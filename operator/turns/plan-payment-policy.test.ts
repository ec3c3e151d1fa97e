import { describe, expect, it } from '@jest/globals';
import { canonicalJson } from '../../common/canonical-json';
import { payloadCodecs, type EventKind, type EventPayloads } from '../../common/event-kinds';
import type { JournalEntry } from '../../common/state-journal';
import { Visibility } from '../api/v1alpha1/conversation-values';
import { conversation as conversationFixture, UID } from '../controller/snapshot-fixtures';
import { checkSpendLimits } from '../../common/spend-limits';
import { foldJournal } from './journal-view';
import type { JournalView } from './journal-view-types';
import { paymentPolicyView, planPaymentPolicy } from './plan-payment-policy';
import { parseSpendLimits } from './spend-limits-input';
import type { Caller, SetPaymentPolicy } from './turn-service';

const OWNER = 'web:owner';
const PARTICIPANT = 'web:bob';
const ADMIN = 'web:admin';
const NOW_MS = 7_000;
const TOKEN = '0x036CbD53842c5426634e7929541eC2318f3dCF7e';
const PAYEE = '0x209693Bc6afc0C5328bA36FaF03C514EF312287C';

function caller(identity: string, roles: string[], over: Partial<Caller> = {}): Caller {
  return {
    identity,
    identities: [identity],
    personaId: `p-${identity}`,
    roles,
    sessionId: 's-1',
    ...over,
  };
}
const admin = caller(ADMIN, ['admin'], { identities: [ADMIN, 'email:root@example.com'] });
const owner = caller(OWNER, ['member']);
const participant = caller(PARTICIPANT, ['member']);
const edge = caller('bot:edge', ['edge']);
const otherTenant = caller('web:mallory', ['member']);
const kubeAdmin = (subresource: string, verb: string, conversationId = UID): Caller =>
  caller('kubernetes:alice', [], {
    identities: ['kubernetes:alice'],
    personaId: '',
    sessionId: '',
    kubernetes: { conversationId, subresource, verb, groups: [] },
  });

const shared = conversationFixture({
  owner: OWNER,
  visibility: Visibility.Shared,
  participants: [PARTICIPANT, 'bot:edge'],
});

const LIMITS = {
  networks: ['eip155:84532'],
  assets: [
    { network: 'eip155:84532', asset: TOKEN, maxPerPayment: '1000000', maxPerPeriod: '5000000' },
  ],
  payees: [PAYEE],
  periodSeconds: 86_400,
};

type E = { kind: string; payload: Uint8Array };
function ev<K extends EventKind>(kind: K, payload: Partial<EventPayloads[K]>): E {
  const codec = payloadCodecs[kind];
  return { kind, payload: codec.encode(codec.fromPartial(payload)).finish() };
}
function view(events: E[] = []): JournalView {
  return foldJournal(events.map((e, position): JournalEntry => ({ position, ...e })));
}
const linkedView = (wallet: string, limits: unknown): JournalView =>
  view([
    ev('payment_policy', {
      wallet,
      limitsJson: parseSpendLimits(limits).canonical,
      actor: ADMIN,
      setAtMs: 3,
    }),
  ]);

function plan(over: Partial<SetPaymentPolicy> = {}, who: Caller = admin, journal = view()) {
  const request: SetPaymentPolicy = {
    conversationId: UID,
    wallet: 'ops-wallet',
    limits: LIMITS,
    reason: 'paid search for the support desk',
    actor: who.identity,
    ...over,
  };
  return planPaymentPolicy({
    view: journal,
    conversation: shared,
    caller: who,
    request,
    nowMs: NOW_MS,
  });
}

function refused(result: ReturnType<typeof plan>): {
  code: string;
  field?: unknown;
  message: string;
} {
  if (result.kind !== 'refuse') throw new Error(`expected a refusal, got ${result.kind}`);
  return {
    code: result.error.code,
    field: result.error.details?.field,
    message: result.error.message,
  };
}

describe('who may link a wallet (the attacker rows)', () => {
  it.each([
    ['the owner', owner, 'permission_denied'],
    ['a participant', participant, 'permission_denied'],
    ['an edge taking part', edge, 'permission_denied'],
    ['another tenant', otherTenant, 'permission_denied'],
    [
      'a Kubernetes caller granted another subresource',
      kubeAdmin('accept-rollback', 'create'),
      'permission_denied',
    ],
    [
      'a Kubernetes caller granted reading, not setting',
      kubeAdmin('payment-policy', 'get'),
      'permission_denied',
    ],
    [
      'a Kubernetes caller granted another conversation',
      kubeAdmin('payment-policy', 'create', 'c-other'),
      'permission_denied',
    ],
  ])('refuses %s', (_who, who, code) => {
    expect(refused(plan({}, who)).code).toBe(code);
  });

  it('refuses an admin acting as an identity that is not theirs (a forged actor)', () => {
    const result = refused(plan({ actor: OWNER }));
    expect(result).toMatchObject({ code: 'permission_denied', field: 'actor' });
  });

  it('refuses a conversation that does not exist with 404', () => {
    const result = planPaymentPolicy({
      view: view(),
      conversation: undefined,
      caller: admin,
      request: { conversationId: UID, wallet: 'w', limits: LIMITS, reason: 'r', actor: ADMIN },
      nowMs: NOW_MS,
    });
    expect(refused(result).code).toBe('not_found');
  });

  it('lets an admin act as another of their own identities, and records both', () => {
    const result = plan({ actor: 'email:root@example.com' });
    if (result.kind !== 'set') throw new Error(refused(result).message);
    expect(result.events).toEqual([
      {
        kind: 'payment_policy',
        payload: {
          wallet: 'ops-wallet',
          limitsJson: canonicalJson(parseSpendLimits(LIMITS).limits),
          actor: 'email:root@example.com',
          caller: ADMIN,
          reason: 'paid search for the support desk',
          setAtMs: NOW_MS,
          session: 's-1',
        },
      },
    ]);
  });

  it('lets a Kubernetes caller granted create payment-policy on this conversation', () => {
    expect(plan({}, kubeAdmin('payment-policy', 'create')).kind).toBe('set');
  });
});

describe('what a policy must be', () => {
  const asset = LIMITS.assets[0]!;
  it.each([
    ['no reason', { reason: '  ' }, 'reason'],
    ['a reason too long', { reason: 'x'.repeat(4097) }, 'reason'],
    ['a wallet that is not a DNS label', { wallet: 'Ops_Wallet' }, 'wallet'],
    ['a wallet name too long for its Secret', { wallet: 'w'.repeat(47) }, 'wallet'],
    ['a wallet with no limits', { limits: undefined }, 'limits'],
    ['an unlink with limits', { wallet: '' }, 'limits'],
    ['limits that are not an object', { limits: [LIMITS] }, 'limits'],
    ['limits text that is not JSON', { limits: '{"networks": [' }, 'limits'],
    ['an unknown field', { limits: { ...LIMITS, maxTotal: '1' } }, 'limits.maxTotal'],
    ['no networks', { limits: { ...LIMITS, networks: [] } }, 'limits.networks'],
    [
      'a network not CAIP-2 EVM',
      { limits: { ...LIMITS, networks: ['base-sepolia'] } },
      'limits.networks[0]',
    ],
    [
      'a network twice',
      { limits: { ...LIMITS, networks: ['eip155:1', 'eip155:1'] } },
      'limits.networks[1]',
    ],
    ['no assets', { limits: { ...LIMITS, assets: [] } }, 'limits.assets'],
    [
      'an asset on a network not allowed',
      { limits: { ...LIMITS, assets: [{ ...asset, network: 'eip155:1' }] } },
      'limits.assets[0].network',
    ],
    [
      'an asset that is not an address',
      { limits: { ...LIMITS, assets: [{ ...asset, asset: 'USDC' }] } },
      'limits.assets[0].asset',
    ],
    [
      'a fractional cap',
      { limits: { ...LIMITS, assets: [{ ...asset, maxPerPayment: '1.5' }] } },
      'limits.assets[0].maxPerPayment',
    ],
    [
      'a cap as a number',
      { limits: { ...LIMITS, assets: [{ ...asset, maxPerPeriod: 5000000 }] } },
      'limits.assets[0].maxPerPeriod',
    ],
    [
      'a negative cap',
      { limits: { ...LIMITS, assets: [{ ...asset, maxPerPeriod: '-1' }] } },
      'limits.assets[0].maxPerPeriod',
    ],
    [
      'the same asset twice, in another case',
      { limits: { ...LIMITS, assets: [asset, { ...asset, asset: TOKEN.toLowerCase() }] } },
      'limits.assets[1]',
    ],
    ['no period', { limits: { ...LIMITS, periodSeconds: undefined } }, 'limits.periodSeconds'],
    ['a zero period', { limits: { ...LIMITS, periodSeconds: 0 } }, 'limits.periodSeconds'],
    ['a fractional period', { limits: { ...LIMITS, periodSeconds: 1.5 } }, 'limits.periodSeconds'],
    ['payees neither "any" nor a list', { limits: { ...LIMITS, payees: 'all' } }, 'limits.payees'],
    ['an empty payee list', { limits: { ...LIMITS, payees: [] } }, 'limits.payees'],
    [
      'a payee that is not an address',
      { limits: { ...LIMITS, payees: ['bob'] } },
      'limits.payees[0]',
    ],
    [
      'an expiry that is not an instant',
      { limits: { ...LIMITS, expiresAt: 'tomorrow' } },
      'limits.expiresAt',
    ],
    [
      'an expiry without its zone',
      { limits: { ...LIMITS, expiresAt: '2027-01-01T00:00:00' } },
      'limits.expiresAt',
    ],
  ])('refuses %s, naming the field', (_case, over, field) => {
    expect(refused(plan(over as Partial<SetPaymentPolicy>))).toMatchObject({
      code: 'invalid_argument',
      field,
    });
  });

  it('reads limits that checkSpendLimits then applies, with addresses in one case', () => {
    const { limits, canonical } = parseSpendLimits({
      ...LIMITS,
      payees: [PAYEE, PAYEE.toLowerCase()],
    });
    expect(limits.payees).toEqual([PAYEE.toLowerCase()]);
    expect(JSON.parse(canonical)).toEqual(limits);
    const charge = {
      protocol: 'x402' as const,
      challengeDigest: 'ab'.repeat(32),
      amount: '1000000',
      asset: TOKEN.toLowerCase(),
      network: 'eip155:84532',
      payee: PAYEE.toLowerCase(),
      resourceUrl: 'https://api.example.com/search',
      expiresAt: '2026-12-07T06:00:00.000Z',
    };
    const now = new Date('2026-12-07T05:00:00Z');
    expect(checkSpendLimits(limits, charge, [], now)).toEqual({ allowed: true });
    expect(checkSpendLimits(limits, { ...charge, amount: '1000001' }, [], now)).toMatchObject({
      allowed: false,
      limit: 'max_per_payment',
    });
  });

  it('reads the limits from their JSON text as from the object', () => {
    expect(parseSpendLimits(JSON.stringify(LIMITS))).toEqual(parseSpendLimits(LIMITS));
  });
});

describe('a change that changes nothing', () => {
  it('refuses the same wallet and limits, even written in another key order and case', () => {
    const reordered = {
      periodSeconds: 86_400,
      payees: [PAYEE.toLowerCase()],
      assets: LIMITS.assets,
      networks: LIMITS.networks,
    };
    expect(refused(plan({ limits: reordered }, admin, linkedView('ops-wallet', LIMITS))).code).toBe(
      'conflict',
    );
  });

  it('refuses an unlink when no wallet is linked, and after an unlink', () => {
    expect(refused(plan({ wallet: '', limits: undefined })).code).toBe('conflict');
    const unlinked = view([ev('payment_policy', { wallet: '', limitsJson: '', actor: ADMIN })]);
    expect(refused(plan({ wallet: '', limits: undefined }, admin, unlinked)).code).toBe('conflict');
  });

  it.each([
    ['another wallet (a rotation)', { wallet: 'ops-wallet-2' }],
    ['other limits', { limits: { ...LIMITS, periodSeconds: 3600 } }],
    ['an unlink', { wallet: '', limits: undefined }],
  ])('records %s', (_case, over) => {
    const result = plan(over, admin, linkedView('ops-wallet', LIMITS));
    expect(result.kind).toBe('set');
  });
});

describe('the policy in force', () => {
  it('shows nothing linked before any policy', () => {
    expect(paymentPolicyView(UID, view())).toEqual({ conversationId: UID, wallet: '', head: 0 });
  });

  it('shows the newest policy: its wallet, limits, who set it, when and where', () => {
    const journal = view([
      ev('payment_policy', {
        wallet: 'old',
        limitsJson: parseSpendLimits(LIMITS).canonical,
        actor: 'web:x',
        setAtMs: 1,
      }),
      ev('payment_policy', {
        wallet: 'ops-wallet',
        limitsJson: parseSpendLimits(LIMITS).canonical,
        actor: ADMIN,
        setAtMs: 2,
      }),
    ]);
    expect(paymentPolicyView(UID, journal)).toEqual({
      conversationId: UID,
      wallet: 'ops-wallet',
      limits: parseSpendLimits(LIMITS).limits,
      setBy: ADMIN,
      setAtMs: 2,
      position: 1,
      head: 2,
    });
  });
});
