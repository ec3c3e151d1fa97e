import { approvalArgsSha256, approvalKeyId, approvalSigningBytes } from './approval-bytes';
import {
  gatherPayments,
  paymentEventsOf,
  type EncodedEntry,
  paymentStateOf,
  paymentTimeOf,
  type PaymentJournalEvent,
  type PaymentState,
  type RecordedCharge,
} from './journal-payments';
import { chargeFactsOf, paymentApprovalArgsJson, PAYMENT_APPROVAL_TOOL } from './payment-approval';
import { receiptSigningBytes } from './payment-receipt';
import {
  checkSpendLimits,
  readRecordedLimits,
  SpendLimit,
  type PriorPayment,
} from './spend-limits';
import {
  ApprovalDecision,
  type ApprovalResponse,
  type OutboundPaymentReceipt,
  type PaymentCharge,
  type PaymentSent,
} from '../proto/gen/polychrome/events/v1/events';

/**
 * The audit of a journal's payments (docs/payments.md, "Auditing payments"), the one rule
 * replay, `payments NAME` and the forensics UI check payments by. Pure: the ed25519 check
 * is injected (node:crypto in the CLI, @noble in the browser). For each receipt: it is
 * signed by a trusted approval key over its bytes (common/payment-receipt.ts), it repeats
 * its charge's fields, and it follows a `payment_sent` of that charge; a charge has at
 * most one send and one receipt. Each send follows an answer that approved exactly the
 * charge's fields (common/payment-approval.ts), signed by a trusted approval key. Walking
 * the sends in order, each payment fits the limits in force when it was sent (the newest
 * `payment_policy` before the send: the control plane asks them again then), counted
 * against every earlier send at the time it was sent (common/spend-limits.ts); a wallet
 * was linked when it was charged, and the same wallet when it was sent.
 */

/** An ed25519 check: true when `signature` by `publicKey` (raw 32 bytes) is over `message`. */
export interface SignatureCheck {
  verify(publicKey: Uint8Array, message: Uint8Array, signature: Uint8Array): boolean;
}

/** What the audit trusts. */
export interface PaymentAuditOptions {
  /** The control plane's approval public keys (raw 32 bytes): receipts and answers must verify with one. */
  readonly approvalKeys: readonly Uint8Array[];
  readonly verifier: SignatureCheck;
  /** The conversation's uid, when known: a receipt or a v2 answer for another one is refused. */
  readonly conversationId?: string;
}

/** One thing wrong with a recorded payment. */
export interface PaymentFinding {
  /** The journal position of the entry at fault. */
  readonly position: number;
  /** The charge's idempotency key ('' when the entry names no charge). */
  readonly idempotencyKey: string;
  readonly problem: string;
}

/** One charge as the audit lists it. */
export interface AuditedPayment {
  readonly position: number;
  readonly turnId: string;
  readonly toolCallId: string;
  readonly protocol: string;
  readonly amount: string;
  readonly asset: string;
  readonly network: string;
  readonly payee: string;
  readonly resourceUrl: string;
  readonly idempotencyKey: string;
  readonly state: PaymentState;
  /** When it last moved (unix ms), if the journal says. */
  readonly atMs: number | undefined;
  /** The on-chain transaction of its receipt ('' without one). */
  readonly transaction: string;
  /** True when it has a receipt and the receipt passed every check; false otherwise. */
  readonly receiptVerified: boolean;
}

/** The audit's verdict. */
export interface PaymentAudit {
  readonly ok: boolean;
  readonly payments: readonly AuditedPayment[];
  readonly findings: readonly PaymentFinding[];
}

/**
 * Audits a journal's entries as they are stored (an export's, the state plane's): decodes
 * the payment events and audits them; a payment entry that does not decode is a finding.
 */
export function auditJournalPayments(
  entries: readonly EncodedEntry[],
  options: PaymentAuditOptions,
): PaymentAudit {
  const { events, unreadable } = paymentEventsOf(entries);
  const audit = auditPayments(events, options);
  if (unreadable.length === 0) return audit;
  const findings = [
    ...unreadable.map(({ position, kind }) => ({
      position,
      idempotencyKey: '',
      problem: `the ${kind} entry does not decode`,
    })),
    ...audit.findings,
  ].sort((a, b) => a.position - b.position);
  return { ...audit, ok: false, findings };
}

/** Audits the payment events of a journal (journal-payments.ts `paymentEventsOf`), in journal order. */
export function auditPayments(
  events: readonly PaymentJournalEvent[],
  options: PaymentAuditOptions,
): PaymentAudit {
  const gathered = gatherPayments(events);
  const findings: PaymentFinding[] = gathered.strays.map(({ event }) => ({
    position: event.position,
    idempotencyKey: event.payload.idempotencyKey,
    problem: `${event.kind} of tool call ${event.payload.toolCallId} names no payment_charge committed before it`,
  }));
  const payments = gathered.charges.map((recorded) => {
    const own = chargeFindings(recorded, options);
    findings.push(...own);
    return listed(recorded, own);
  });
  findings.push(...limitFindings(gathered.charges, gathered.policies));
  findings.sort((a, b) => a.position - b.position);
  return { ok: findings.length === 0, payments, findings };
}

function listed(recorded: RecordedCharge, own: readonly PaymentFinding[]): AuditedPayment {
  const { position, payload: c } = recorded.charge;
  const receipt = recorded.receipts[0];
  return {
    position,
    turnId: c.turnId,
    toolCallId: c.toolCallId,
    protocol: c.protocol,
    amount: c.amount,
    asset: c.asset,
    network: c.network,
    payee: c.payee,
    resourceUrl: c.resourceUrl,
    idempotencyKey: c.idempotencyKey,
    state: paymentStateOf(recorded),
    atMs: paymentTimeOf(recorded),
    transaction: receipt?.payload.transaction ?? '',
    receiptVerified: receipt !== undefined && !own.some((f) => f.position === receipt.position),
  };
}

/** Everything wrong with one charge's approval, sends and receipts. */
function chargeFindings(recorded: RecordedCharge, options: PaymentAuditOptions): PaymentFinding[] {
  const charge = recorded.charge.payload;
  const found: PaymentFinding[] = [];
  const at = (position: number, problem: string): void => {
    found.push({ position, idempotencyKey: charge.idempotencyKey, problem });
  };
  const approval = approvalOf(recorded, options);
  for (const [index, send] of recorded.sends.entries()) {
    if (index > 0) {
      at(
        send.position,
        `a second payment_sent of the charge at ${String(recorded.charge.position)}: a charge is sent once`,
      );
    }
    const mismatch = sentMismatch(send.payload, charge);
    if (mismatch !== undefined) at(send.position, mismatch);
    if (typeof approval === 'string') at(send.position, `sent without approval: ${approval}`);
    else if (approval.position > send.position) {
      at(send.position, `sent before its approval (answered at ${String(approval.position)})`);
    }
  }
  for (const [index, receipt] of recorded.receipts.entries()) {
    if (index > 0) {
      at(
        receipt.position,
        `a second receipt of the charge at ${String(recorded.charge.position)}: a charge is paid once`,
      );
      continue;
    }
    const problem = receiptProblem(receipt, recorded, options);
    if (problem !== undefined) at(receipt.position, problem);
  }
  return found;
}

/** The answer that approved exactly the charge with a valid signature, or why there is none. */
function approvalOf(
  recorded: RecordedCharge,
  options: PaymentAuditOptions,
): { readonly position: number } | string {
  const charge = recorded.charge.payload;
  const argsSha256 = approvalArgsSha256(paymentApprovalArgsJson(chargeFactsOf(charge)));
  const problems: string[] = [];
  for (const { position, payload: answer } of recorded.responses) {
    const problem = answerProblem(answer, charge, argsSha256, options);
    if (problem === undefined) return { position };
    problems.push(`the answer at ${String(position)} ${problem}`);
  }
  return problems.length === 0
    ? `no approval_response for ${charge.approvalRequestId} is recorded`
    : problems.join('; ');
}

function answerProblem(
  answer: ApprovalResponse,
  charge: PaymentCharge,
  argsSha256: Uint8Array,
  options: PaymentAuditOptions,
): string | undefined {
  if (answer.decision !== ApprovalDecision.APPROVAL_DECISION_APPROVED) return 'denied it';
  if (answer.toolName !== PAYMENT_APPROVAL_TOOL || answer.turnId !== charge.turnId) {
    return `answers ${answer.toolName} of turn ${answer.turnId}, not ${PAYMENT_APPROVAL_TOOL} of turn ${charge.turnId}`;
  }
  if (!sameBytes(answer.argsSha256, argsSha256)) {
    return "approved other fields than the charge's (amount, asset, network, payee, resource, expiry or challenge)";
  }
  const scoped = answer.approvalId !== '';
  if (
    scoped &&
    options.conversationId !== undefined &&
    answer.conversation !== options.conversationId
  ) {
    return `is for conversation ${answer.conversation}, not ${options.conversationId}`;
  }
  const message = approvalSigningBytes({
    requestId: charge.approvalRequestId,
    toolName: PAYMENT_APPROVAL_TOOL,
    argsSha256,
    decision: 'approved',
    turnId: charge.turnId,
    ...(scoped
      ? {
          scope: {
            conversation: answer.conversation,
            expiresAtMs: answer.expiresAtMs,
            approvalId: answer.approvalId,
          },
        }
      : {}),
  });
  return signatureProblem(answer.keyId, message, answer.signature, options);
}

/** Why a signature by `keyId` over `message` is not a trusted approval key's, or undefined. */
function signatureProblem(
  keyId: string,
  message: Uint8Array,
  signature: Uint8Array,
  options: PaymentAuditOptions,
): string | undefined {
  if (options.approvalKeys.length === 0) {
    return "cannot be checked: no approval public key was given (pass the control plane's approval key)";
  }
  const key = options.approvalKeys.find((k) => approvalKeyId(k) === keyId);
  if (key === undefined) {
    const trusted = options.approvalKeys.map((k) => approvalKeyId(k)).join(' or ');
    return `is signed by key ${keyId}, not the approval key ${trusted}`;
  }
  let valid: boolean;
  try {
    valid = options.verifier.verify(key, message, signature);
  } catch {
    valid = false;
  }
  return valid
    ? undefined
    : 'has a signature that does not verify with the approval key (forged or changed)';
}

/** Why a send does not match its charge, or undefined. */
function sentMismatch(sent: PaymentSent, charge: PaymentCharge): string | undefined {
  const differs = (
    ['idempotencyKey', 'approvalRequestId', 'network', 'asset', 'amount'] as const
  ).filter((field) => sent[field] !== charge[field]);
  return differs.length === 0
    ? undefined
    : `payment_sent differs from its charge in ${differs.join(', ')}`;
}

/** Why the first receipt of a charge does not stand for it, or undefined. */
function receiptProblem(
  receipt: { readonly position: number; readonly payload: OutboundPaymentReceipt },
  recorded: RecordedCharge,
  options: PaymentAuditOptions,
): string | undefined {
  const r = receipt.payload;
  const charge = recorded.charge.payload;
  const differs: string[] = (
    [
      'idempotencyKey',
      'approvalRequestId',
      'protocol',
      'amount',
      'asset',
      'network',
      'payee',
    ] as const
  ).filter((field) => r[field] !== charge[field]);
  if (!sameBytes(r.challengeSha256, charge.challengeSha256)) differs.push('challengeSha256');
  if (differs.length > 0) {
    return `the receipt differs from its charge (position ${String(recorded.charge.position)}) in ${differs.join(', ')}`;
  }
  if (options.conversationId !== undefined && r.conversationId !== options.conversationId) {
    return `the receipt is for conversation ${r.conversationId}, not ${options.conversationId}`;
  }
  const send = recorded.sends.find((s) => s.position < receipt.position);
  if (send === undefined) return 'the receipt follows no payment_sent of its charge';
  if (send.payload.wallet !== r.wallet) {
    return `the receipt names wallet ${r.wallet}, but the payment was sent with ${send.payload.wallet}`;
  }
  const signed = signatureProblem(r.keyId, receiptSigningBytes(r), r.signature, options);
  return signed === undefined ? undefined : `the receipt ${signed}`;
}

/**
 * The spend limits, walked in journal order over every send: each must fit the limits in
 * force at its charge, counted against the earlier sends at the time it was sent, with a
 * wallet linked then. A send refused only for its charge's expiry moved no money unless a
 * receipt says it did, so only a paid one is a finding for that.
 */
function limitFindings(
  charges: readonly RecordedCharge[],
  policies: readonly {
    readonly position: number;
    readonly payload: { wallet: string; limitsJson: string };
  }[],
): PaymentFinding[] {
  const sends = charges
    .flatMap((recorded) => recorded.sends.slice(0, 1).map((send) => ({ send, recorded })))
    .sort((a, b) => a.send.position - b.send.position);
  const prior: PriorPayment[] = [];
  const found: PaymentFinding[] = [];
  for (const { send, recorded } of sends) {
    const charge = recorded.charge.payload;
    const at = new Date(send.payload.sentAtMs);
    const problem = limitProblem(recorded, send, policies, prior, at);
    if (problem !== undefined) {
      found.push({ position: send.position, idempotencyKey: charge.idempotencyKey, problem });
    }
    prior.push({
      network: charge.network,
      asset: charge.asset,
      amount: charge.amount,
      at: at.toISOString(),
    });
  }
  return found;
}

function limitProblem(
  recorded: RecordedCharge,
  send: { readonly position: number; readonly payload: PaymentSent },
  policies: readonly {
    readonly position: number;
    readonly payload: { wallet: string; limitsJson: string };
  }[],
  prior: readonly PriorPayment[],
  at: Date,
): string | undefined {
  const policy = recorded.policy?.payload;
  if (policy === undefined || policy.wallet === '') {
    return `paid with no wallet linked when it was charged (position ${String(recorded.charge.position)})`;
  }
  const linked = policies.filter((p) => p.position < send.position).at(-1)?.payload.wallet ?? '';
  if (linked !== send.payload.wallet) {
    return `sent with wallet ${send.payload.wallet || '(none)'}, but the wallet linked then is ${linked || '(none)'}`;
  }
  // The limits the send had to pass: the newest policy before it (the control plane asks
  // them again at the send, operator/turns/plan-payments.ts).
  const inForce = policies.filter((p) => p.position < send.position).at(-1);
  const limits = readRecordedLimits(inForce?.payload.limitsJson ?? '');
  const where = `position ${String(inForce?.position)}`;
  if (typeof limits === 'string') {
    return `the limits in force (${where}) cannot be read: ${limits}`;
  }
  const decision = checkSpendLimits(limits, recorded.charge.payload, prior, at);
  if (decision.allowed) return undefined;
  if (decision.limit === SpendLimit.ChargeExpired && recorded.receipts.length === 0)
    return undefined;
  return `over the limits in force (${where}) when sent at ${at.toISOString()}: spend limit ${decision.limit}: ${decision.message}`;
}

function sameBytes(a: Uint8Array, b: Uint8Array): boolean {
  return a.length === b.length && a.every((byte, i) => byte === b[i]);
}
