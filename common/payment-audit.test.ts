import { describe, expect, it } from '@jest/globals';
import { generateKeyPairSync, sign, verify, type KeyObject } from 'node:crypto';
import { approvalArgsSha256, approvalKeyId, approvalSigningBytes } from './approval-bytes';
import { encodePayload } from './event-kinds';
import type { PaymentJournalEvent } from './journal-payments';
import { chargeFactsOf, paymentApprovalArgsJson, PAYMENT_APPROVAL_TOOL } from './payment-approval';
import {
  auditJournalPayments,
  auditPayments,
  type PaymentAuditOptions,
  type SignatureCheck,
} from './payment-audit';
import { receiptSigningBytes } from './payment-receipt';
import {
  ApprovalDecision,
  type OutboundPaymentReceipt,
  type PaymentCharge,
} from '../proto/gen/polychrome/events/v1/events';

/*
 * The payment audit's table (docs/payments.md, "Auditing payments"): journals built event by
 * event, signed with a real ed25519 key as the control plane signs, then changed the way
 * someone who can rewrite a journal but holds no approval key could change them.
 */

interface Key {
  readonly publicKey: Uint8Array;
  readonly privateKey: KeyObject;
}

function newKey(): Key {
  const pair = generateKeyPairSync('ed25519');
  const jwk = pair.publicKey.export({ format: 'jwk' });
  return { publicKey: Buffer.from(String(jwk.x), 'base64url'), privateKey: pair.privateKey };
}

const APPROVAL = newKey();
const OTHER = newKey();
const nodeCheck: SignatureCheck = {
  verify(publicKey, message, signature) {
    const key = {
      key: { kty: 'OKP', crv: 'Ed25519', x: Buffer.from(publicKey).toString('base64url') },
      format: 'jwk',
    } as const;
    return verify(null, message, key, signature);
  },
};
const OPTIONS: PaymentAuditOptions = {
  approvalKeys: [APPROVAL.publicKey],
  verifier: nodeCheck,
  conversationId: 'conv-uid',
};

const NETWORK = 'eip155:31337';
const TOKEN = '0x' + 'aa'.repeat(20);
const PAYEE = '0x' + 'bb'.repeat(20);
const T0 = Date.parse('2026-12-07T10:00:00.000Z');
const LIMITS = {
  assets: [{ asset: TOKEN, maxPerPayment: '1000', maxPerPeriod: '2500', network: NETWORK }],
  networks: [NETWORK],
  payees: [PAYEE],
  periodSeconds: 3600,
};

type Event = PaymentJournalEvent;

function policy(wallet: string, limits: unknown = LIMITS): Omit<Event, 'position'> {
  return {
    kind: 'payment_policy',
    payload: {
      wallet,
      limitsJson: wallet === '' ? '' : JSON.stringify(limits),
      actor: 'root',
      caller: 'root',
      reason: 'test',
      setAtMs: T0,
      session: '',
    },
  };
}

function chargeOf(call: string, amount: string, payee = PAYEE): PaymentCharge {
  return {
    turnId: `turn-${call}`,
    toolCallId: call,
    currency: '',
    amountMinor: 0,
    payee,
    approvalRequestId: `pay-${call}`,
    protocol: 'x402',
    challengeSha256: Buffer.alloc(32, 7),
    amount,
    asset: TOKEN,
    network: NETWORK,
    resourceUrl: 'http://127.0.0.1/paid',
    expiresAt: new Date(T0 + 86_400_000).toISOString(),
    idempotencyKey: `idem-${call}`,
    challenge: 'challenge',
    thread: '',
  };
}

/** The approval answer of `charge`, signed by `key` as the control plane signs (v2). */
function answer(
  charge: PaymentCharge,
  key: Key = APPROVAL,
  approve = true,
): Omit<Event, 'position'> {
  const argsSha256 = approvalArgsSha256(paymentApprovalArgsJson(chargeFactsOf(charge)));
  const scope = {
    conversation: 'conv-uid',
    expiresAtMs: T0 + 3_600_000,
    approvalId: `a-${charge.toolCallId}`,
  };
  const decision = approve ? 'approved' : 'denied';
  const signed = approvalSigningBytes({
    requestId: charge.approvalRequestId,
    toolName: PAYMENT_APPROVAL_TOOL,
    argsSha256,
    decision,
    turnId: charge.turnId,
    scope,
  });
  return {
    kind: 'approval_response',
    payload: {
      turnId: charge.turnId,
      requestId: charge.approvalRequestId,
      toolName: PAYMENT_APPROVAL_TOOL,
      argsSha256: Buffer.from(argsSha256),
      decision: approve
        ? ApprovalDecision.APPROVAL_DECISION_APPROVED
        : ApprovalDecision.APPROVAL_DECISION_DENIED,
      answeredBy: 'root',
      keyId: approvalKeyId(key.publicKey),
      signature: sign(null, signed, key.privateKey),
      answeredAtMs: T0,
      comment: '',
      selfApproval: false,
      ...scope,
    },
  };
}

function sent(charge: PaymentCharge, sentAtMs: number, wallet = 'ops'): Omit<Event, 'position'> {
  const { turnId, toolCallId, idempotencyKey, approvalRequestId, network, asset, amount } = charge;
  return {
    kind: 'payment_sent',
    payload: {
      turnId,
      toolCallId,
      idempotencyKey,
      approvalRequestId,
      sentAtMs,
      wallet,
      network,
      asset,
      amount,
    },
  };
}

function receiptOf(charge: PaymentCharge, settledAtMs: number): OutboundPaymentReceipt {
  return {
    turnId: charge.turnId,
    toolCallId: charge.toolCallId,
    receiptId: `r-${charge.toolCallId}`,
    currency: '',
    amountMinor: 0,
    keyId: '',
    signature: Buffer.alloc(0),
    protocol: charge.protocol,
    transaction: '0x' + 'cd'.repeat(32),
    payer: '0x' + 'ee'.repeat(20),
    network: charge.network,
    amount: charge.amount,
    asset: charge.asset,
    payee: charge.payee,
    challengeSha256: charge.challengeSha256,
    approvalRequestId: charge.approvalRequestId,
    idempotencyKey: charge.idempotencyKey,
    upstreamReceipt: 'upstream',
    responseStatus: 200,
    responseContentType: 'text/plain',
    responseBody: 'the report',
    conversationId: 'conv-uid',
    settledAtMs,
    wallet: 'ops',
    resolvedBy: '',
  };
}

/** `receipt` signed by `key` over its signing bytes, as the control plane signs it. */
function signed(receipt: OutboundPaymentReceipt, key: Key = APPROVAL): Omit<Event, 'position'> {
  return {
    kind: 'outbound_payment_receipt',
    payload: {
      ...receipt,
      keyId: approvalKeyId(key.publicKey),
      signature: sign(null, receiptSigningBytes(receipt), key.privateKey),
    },
  };
}

function chargeEvent(charge: PaymentCharge): Omit<Event, 'position'> {
  return { kind: 'payment_charge', payload: charge };
}

/** A whole paid call: charge, answer, send, signed receipt. */
function paidCall(charge: PaymentCharge, atMs: number): Omit<Event, 'position'>[] {
  return [
    chargeEvent(charge),
    answer(charge),
    sent(charge, atMs),
    signed(receiptOf(charge, atMs + 1)),
  ];
}

const journal = (...events: Omit<Event, 'position'>[]): Event[] =>
  events.map((e, position) => ({ ...e, position }) as Event);

const A = chargeOf('c1', '1000');
const B = chargeOf('c2', '1000');
const C = chargeOf('c3', '1000');
const VALID = journal(policy('ops'), ...paidCall(A, T0));

const problems = (events: Event[], options = OPTIONS): [number, string, string][] =>
  auditPayments(events, options).findings.map((f) => [f.position, f.idempotencyKey, f.problem]);

describe('auditPayments: a receipt stands for its approved charge', () => {
  it('passes a paid call signed by the approval key, and lists it verified', () => {
    const audit = auditPayments(VALID, OPTIONS);
    expect(audit.findings).toEqual([]);
    expect(audit.ok).toBe(true);
    expect(audit.payments).toEqual([
      expect.objectContaining({
        position: 1,
        toolCallId: 'c1',
        amount: '1000',
        state: 'paid',
        transaction: '0x' + 'cd'.repeat(32),
        receiptVerified: true,
        atMs: T0 + 1,
      }),
    ]);
  });

  const changed = (change: Partial<OutboundPaymentReceipt>): Event[] =>
    VALID.map((e) =>
      e.kind === 'outbound_payment_receipt' ? { ...e, payload: { ...e.payload, ...change } } : e,
    );
  const cases: [string, Event[], RegExp][] = [
    [
      'a receipt whose amount was changed',
      changed({ amount: '1' }),
      /differs from its charge \(position 1\) in amount/,
    ],
    [
      'a receipt whose transaction was changed',
      changed({ transaction: '0x' + '00'.repeat(32) }),
      /signature that does not verify/,
    ],
    [
      'a receipt whose signature is garbage',
      changed({ signature: Buffer.alloc(64, 1) }),
      /signature that does not verify/,
    ],
    [
      'a receipt of a short signature',
      changed({ signature: Buffer.alloc(3) }),
      /signature that does not verify/,
    ],
    [
      'a receipt re-signed by another key',
      journal(
        policy('ops'),
        chargeEvent(A),
        answer(A),
        sent(A, T0),
        signed(receiptOf(A, T0), OTHER),
      ),
      new RegExp(`signed by key ${approvalKeyId(OTHER.publicKey)}, not the approval key`),
    ],
    [
      "a receipt claiming the trusted key id over another key's signature",
      journal(policy('ops'), chargeEvent(A), answer(A), sent(A, T0), {
        ...signed(receiptOf(A, T0), OTHER),
        payload: {
          ...(signed(receiptOf(A, T0), OTHER).payload as OutboundPaymentReceipt),
          keyId: approvalKeyId(APPROVAL.publicKey),
        },
      }),
      /signature that does not verify/,
    ],
    [
      'a receipt for another conversation',
      journal(
        policy('ops'),
        chargeEvent(A),
        answer(A),
        sent(A, T0),
        signed({ ...receiptOf(A, T0), conversationId: 'other' }),
      ),
      /for conversation other, not conv-uid/,
    ],
    [
      'a receipt with no payment_sent before it',
      journal(policy('ops'), chargeEvent(A), answer(A), signed(receiptOf(A, T0))),
      /follows no payment_sent/,
    ],
    [
      'a receipt naming another wallet than its send',
      journal(
        policy('ops'),
        chargeEvent(A),
        answer(A),
        sent(A, T0),
        signed({ ...receiptOf(A, T0), wallet: 'other' }),
      ),
      /names wallet other, but the payment was sent with ops/,
    ],
  ];
  it.each(cases)('fails %s, at the receipt', (_, events, problem) => {
    const findings = auditPayments(events, OPTIONS).findings;
    const receiptAt = events.find((e) => e.kind === 'outbound_payment_receipt')?.position;
    expect(findings).toEqual([
      { position: receiptAt, idempotencyKey: 'idem-c1', problem: expect.stringMatching(problem) },
    ]);
    expect(auditPayments(events, OPTIONS).payments[0]?.receiptVerified).toBe(false);
  });

  it('fails a second receipt of one charge, and a second send', () => {
    const events = journal(
      policy('ops'),
      ...paidCall(A, T0),
      sent(A, T0 + 5),
      signed(receiptOf(A, T0 + 6)),
    );
    expect(problems(events)).toEqual([
      [
        5,
        'idem-c1',
        expect.stringMatching(/a second payment_sent of the charge at 1: a charge is sent once/),
      ],
      [
        6,
        'idem-c1',
        expect.stringMatching(/a second receipt of the charge at 1: a charge is paid once/),
      ],
    ]);
  });

  it('passes a receipt an admin recorded by resolving the quarantine, naming them', () => {
    const quarantine: Omit<Event, 'position'> = {
      kind: 'turn_ambiguous',
      payload: {
        turnId: A.turnId,
        toolCallId: A.toolCallId,
        reason: 'no receipt',
        detectedAtMs: T0,
      },
    };
    const resolved = {
      ...receiptOf(A, T0 + 9),
      upstreamReceipt: '',
      responseStatus: 0,
      responseContentType: '',
      responseBody: '',
      resolvedBy: 'web:root',
    };
    const events = journal(
      policy('ops'),
      chargeEvent(A),
      answer(A),
      sent(A, T0),
      quarantine,
      signed(resolved),
    );
    expect(auditPayments(events, OPTIONS)).toMatchObject({
      ok: true,
      payments: [{ state: 'paid', receiptVerified: true }],
    });
    // The name of who resolved it is bound by the signature.
    const renamed = events.map((e) =>
      e.kind === 'outbound_payment_receipt'
        ? { ...e, payload: { ...e.payload, resolvedBy: 'web:other' } }
        : e,
    );
    expect(problems(renamed)).toEqual([[5, 'idem-c1', expect.stringMatching(/does not verify/)]]);
  });

  it('fails a send or receipt that names no charge', () => {
    const events = journal(policy('ops'), sent(A, T0), signed(receiptOf(A, T0)));
    expect(problems(events)).toEqual([
      [1, 'idem-c1', 'payment_sent of tool call c1 names no payment_charge committed before it'],
      [
        2,
        'idem-c1',
        'outbound_payment_receipt of tool call c1 names no payment_charge committed before it',
      ],
    ]);
  });

  it('cannot check a receipt without an approval key, and says so', () => {
    const found = problems(VALID, { ...OPTIONS, approvalKeys: [] });
    expect(found.map(([p]) => p)).toEqual([3, 4]);
    expect(found[1]?.[2]).toMatch(/cannot be checked: no approval public key was given/);
  });
});

describe('auditPayments: every send was approved, exactly', () => {
  const sendAt = 3;
  const cases: [string, Event[], RegExp][] = [
    [
      'a receipt whose approval was removed',
      journal(
        policy('ops'),
        chargeEvent(A),
        policy('ops', { ...LIMITS, periodSeconds: 3600 }),
        sent(A, T0),
        signed(receiptOf(A, T0)),
      ),
      /sent without approval: no approval_response for pay-c1 is recorded/,
    ],
    [
      'a denied charge that was sent',
      journal(policy('ops'), chargeEvent(A), answer(A, APPROVAL, false), sent(A, T0)),
      /sent without approval: the answer at 2 denied it/,
    ],
    [
      'an approval of other fields (the charge raised after the approval)',
      journal(
        policy('ops'),
        chargeEvent({ ...A, amount: '900' }),
        answer(A),
        sent({ ...A, amount: '900' }, T0),
      ),
      /approved other fields than the charge's/,
    ],
    [
      'an approval signed by another key',
      journal(policy('ops'), chargeEvent(A), answer(A, OTHER), sent(A, T0)),
      /not the approval key/,
    ],
    [
      'a send that differs from its charge',
      journal(policy('ops'), chargeEvent(A), answer(A), sent({ ...A, amount: '999' }, T0)),
      /payment_sent differs from its charge in amount/,
    ],
  ];
  it.each(cases)('fails %s, at the send', (_, events, problem) => {
    expect(problems(events)).toContainEqual([sendAt, 'idem-c1', expect.stringMatching(problem)]);
  });

  it('fails a send before its approval', () => {
    const events = journal(policy('ops'), chargeEvent(A), sent(A, T0), answer(A));
    expect(problems(events)).toEqual([[2, 'idem-c1', 'sent before its approval (answered at 3)']]);
  });

  it('fails an approval for another conversation', () => {
    expect(problems(VALID, { ...OPTIONS, conversationId: 'another' })).toContainEqual([
      3,
      'idem-c1',
      expect.stringMatching(/is for conversation conv-uid, not another/),
    ]);
  });
});

describe('auditPayments: totals never exceed the limits in force', () => {
  const minute = 60_000;
  it('passes payments inside the caps, and fails the one that takes the period over', () => {
    const ok = journal(policy('ops'), ...paidCall(A, T0), ...paidCall(B, T0 + minute));
    expect(problems(ok)).toEqual([]);
    const over = journal(
      policy('ops'),
      ...paidCall(A, T0),
      ...paidCall(B, T0 + minute),
      ...paidCall(C, T0 + 2 * minute),
    );
    expect(problems(over)).toEqual([
      [
        11,
        'idem-c3',
        expect.stringMatching(
          /over the limits in force \(position 0\).*spend limit max_per_period: 1000 on top of 2000 already spent/,
        ),
      ],
    ]);
    // Outside the period, the earlier payments no longer count.
    const later = journal(
      policy('ops'),
      ...paidCall(A, T0),
      ...paidCall(B, T0 + minute),
      ...paidCall(C, T0 + 3_600_000 + 2 * minute),
    );
    expect(problems(later)).toEqual([]);
  });

  const D = chargeOf('c4', '1001');
  const cases: [string, Event[], RegExp][] = [
    [
      'an amount over the per-payment cap',
      journal(policy('ops'), ...paidCall(D, T0)),
      /spend limit max_per_payment: 1001 is over the limit of 1000/,
    ],
    [
      'a payee not allowed',
      journal(policy('ops'), ...paidCall(chargeOf('c4', '10', '0x' + 'cc'.repeat(20)), T0)),
      /spend limit payee/,
    ],
    [
      'limits past their expiry when sent',
      journal(
        policy('ops', { ...LIMITS, expiresAt: new Date(T0 - 1).toISOString() }),
        ...paidCall(chargeOf('c4', '10'), T0),
      ),
      /spend limit limits_expired/,
    ],
    [
      'an asset not allowed',
      journal(
        policy('ops', {
          ...LIMITS,
          assets: [{ ...LIMITS.assets[0], asset: '0x' + '11'.repeat(20) }],
        }),
        ...paidCall(chargeOf('c4', '10'), T0),
      ),
      /spend limit asset/,
    ],
    [
      'a paid charge sent after it expired',
      journal(
        policy('ops'),
        ...paidCall({ ...chargeOf('c4', '10'), expiresAt: new Date(T0 - 1).toISOString() }, T0),
      ),
      /spend limit charge_expired/,
    ],
    [
      'a charge with no wallet linked',
      journal(policy(''), ...paidCall(chargeOf('c4', '10'), T0)),
      /paid with no wallet linked when it was charged \(position 1\)/,
    ],
    [
      'a charge before any policy',
      journal(...paidCall(chargeOf('c4', '10'), T0)),
      /paid with no wallet linked/,
    ],
    [
      'limits that do not read',
      journal(policy('ops', { networks: 'all' }), ...paidCall(chargeOf('c4', '10'), T0)),
      /cannot be read: the recorded limits have no list of networks/,
    ],
  ];
  it.each(cases)('fails %s, at the send', (_, events, problem) => {
    const send = events.find((e) => e.kind === 'payment_sent');
    expect(problems(events)).toEqual([[send?.position, 'idem-c4', expect.stringMatching(problem)]]);
  });

  it('reads the limits in force at the send, and the wallet linked at the send', () => {
    const tightened = { ...LIMITS, assets: [{ ...LIMITS.assets[0], maxPerPayment: '1' }] };
    // Tightened after the charge, before the send: the control plane asks the limits again
    // at the send, so a send over them is a finding.
    expect(
      problems(
        journal(policy('ops'), chargeEvent(A), policy('ops', tightened), answer(A), sent(A, T0)),
      ),
    ).toEqual([[4, 'idem-c1', expect.stringMatching(/\(position 2\).*max_per_payment/)]]);
    // Loosened after the charge: the send is within the limits then.
    expect(
      problems(
        journal(policy('ops', tightened), chargeEvent(A), policy('ops'), answer(A), sent(A, T0)),
      ),
    ).toEqual([]);
    // Tightened before both: over the limit.
    expect(
      problems(journal(policy('ops', tightened), chargeEvent(A), answer(A), sent(A, T0))),
    ).toEqual([[3, 'idem-c1', expect.stringMatching(/max_per_payment/)]]);
    // Unlinked between the approval and the send: nothing may be sent.
    expect(
      problems(journal(policy('ops'), chargeEvent(A), answer(A), policy(''), sent(A, T0))),
    ).toEqual([[4, 'idem-c1', 'sent with wallet ops, but the wallet linked then is (none)']]);
  });

  it('does not count a send refused for an expired charge that paid nothing', () => {
    const expired = { ...chargeOf('c4', '10'), expiresAt: new Date(T0 - 1).toISOString() };
    expect(
      problems(journal(policy('ops'), chargeEvent(expired), answer(expired), sent(expired, T0))),
    ).toEqual([]);
  });
});

describe('payment states', () => {
  const result = (charge: PaymentCharge): Omit<Event, 'position'> => ({
    kind: 'tool_result',
    payload: {
      turnId: charge.turnId,
      toolCallId: charge.toolCallId,
      content: 'nothing was paid',
      isError: true,
      denied: false,
      thread: '',
      delegate: '',
    },
  });
  const ambiguous = (charge: PaymentCharge): Omit<Event, 'position'> => ({
    kind: 'turn_ambiguous',
    payload: {
      turnId: charge.turnId,
      toolCallId: charge.toolCallId,
      reason: 'sent, no receipt',
      detectedAtMs: T0,
    },
  });
  const cases: [string, Omit<Event, 'position'>[], string][] = [
    ['asked', [chargeEvent(A)], 'asked'],
    ['approved', [chargeEvent(A), answer(A)], 'approved'],
    ['denied', [chargeEvent(A), answer(A, APPROVAL, false), result(A)], 'denied'],
    ['approved, then not made', [chargeEvent(A), answer(A), result(A)], 'refused'],
    ['sent', [chargeEvent(A), answer(A), sent(A, T0)], 'sent'],
    ['sent, settlement refused', [chargeEvent(A), answer(A), sent(A, T0), result(A)], 'refused'],
    ['sent, outcome unknown', [chargeEvent(A), answer(A), sent(A, T0), ambiguous(A)], 'unknown'],
    ['paid', paidCall(A, T0), 'paid'],
  ];
  it.each(cases)('%s', (_, events, state) => {
    const [payment] = auditPayments(journal(policy('ops'), ...events), OPTIONS).payments;
    expect(payment?.state).toBe(state);
    expect(payment?.receiptVerified).toBe(state === 'paid');
  });
});

describe('auditJournalPayments', () => {
  it('decodes stored entries, and names a payment entry that does not decode', () => {
    const entries = VALID.map((e) => ({
      position: e.position,
      kind: e.kind,
      payload: encodePayload(e.kind, e.payload as never),
    }));
    expect(auditJournalPayments(entries, OPTIONS).ok).toBe(true);
    const broken = [
      ...entries,
      { position: 5, kind: 'outbound_payment_receipt', payload: Uint8Array.of(0xff, 0xff) },
    ];
    const audit = auditJournalPayments(broken, OPTIONS);
    expect(audit.ok).toBe(false);
    expect(audit.findings).toEqual([
      {
        position: 5,
        idempotencyKey: '',
        problem: 'the outbound_payment_receipt entry does not decode',
      },
    ]);
  });
});
