import type { Attributes } from '@opentelemetry/api';
import { conversationAttributes } from '../../common/genai-attributes';
import { inSpan, isTracing, setActiveSpanAttributes, type Span } from '../../common/tracing';
import type { PaymentCharge } from '../../proto/gen/polychrome/events/v1/events';
import type { Settlement } from '../payments/settlement';

/**
 * The control plane's spans of a paid call (docs/observability.md#spans, docs/payments.md):
 * `payment_charge <protocol>` while it reads a tool's 402 and commits the charge, and
 * `payment_settle <protocol>` while it pays an approved charge and commits the receipt,
 * each a child of the request span whose turn met it (the post, or the approval's answer).
 * They carry what an operator needs to find the payment and nothing a wallet signs: the
 * charge's public fields, its idempotency key, the payer and transaction once settled,
 * and the outcome. Never the challenge, the payment header sent, a signature or a key.
 */

/** A paid call's step: reading the charge, or paying it. */
export type PaymentOperation = 'charge' | 'settle';

/** `polychrome.payment.outcome` of a span of {@link PaymentOperation}. */
export const PaymentSpanOutcome = {
  /** charge: committed; the turn pauses for its approval. */
  Charged: 'charged',
  /** charge: refused before anyone was asked (no wallet, no protocol, a limit). */
  Refused: 'refused',
  /** either: the harness's message is not about a waiting call; the turn is quarantined. */
  Forged: 'forged',
  /** settle: paid now, the receipt committed. */
  Paid: 'paid',
  /** settle: answered from the receipt already recorded; nothing paid again. */
  Answered: 'answered',
  /** settle: not paid (a limit at the send, a settlement `refused` or `rejected`). */
  NotPaid: 'not_paid',
  /** settle: sent (now, or before without a receipt), and nothing says whether money moved; the turn is quarantined. */
  Unknown: 'unknown',
  /**
   * settle of an MCP tool's charge: the signed payment handed to the harness, which calls
   * the tool; its result's settle span says paid, not paid or unknown.
   */
  Handed: 'handed',
} as const;
export type PaymentSpanOutcome = (typeof PaymentSpanOutcome)[keyof typeof PaymentSpanOutcome];

/** Whose call the span is about. */
export interface PaymentSpanCall {
  readonly conversationId: string;
  readonly turnId: string;
  readonly toolCallId: string;
}

/**
 * Runs `run` in the span of `operation` for `call` (INTERNAL, a child of the active span);
 * `run` names the charge and the outcome through {@link PaymentSpanNotes} once it knows
 * them. With tracing off, `run` with notes that do nothing.
 */
export function inPaymentSpan<T>(
  operation: PaymentOperation,
  call: PaymentSpanCall,
  run: (notes: PaymentSpanNotes) => Promise<T>,
): Promise<T> {
  if (!isTracing()) return run(new PaymentSpanNotes(undefined, operation));
  const attributes: Attributes = {
    ...conversationAttributes(call.conversationId),
    'polychrome.turn.id': call.turnId,
    'gen_ai.tool.call.id': call.toolCallId,
  };
  return inSpan(`payment_${operation}`, { attributes }, (span) =>
    run(new PaymentSpanNotes(span, operation)),
  );
}

/** What a paid call's span learns while it runs. */
export class PaymentSpanNotes {
  constructor(
    private readonly span: Span | undefined,
    private readonly operation: PaymentOperation,
  ) {}

  /** The charge the step is about: its public fields, and the span's name its protocol. */
  charge(charge: PaymentCharge): void {
    this.span?.updateName(`payment_${this.operation} ${charge.protocol}`);
    this.span?.setAttributes(paymentChargeAttributes(charge));
  }

  outcome(outcome: PaymentSpanOutcome): void {
    this.span?.setAttribute('polychrome.payment.outcome', outcome);
  }
}

/** A charge's public fields as span attributes: what the approval card shows, and its key. */
export function paymentChargeAttributes(charge: PaymentCharge): Attributes {
  return {
    'polychrome.payment.protocol': charge.protocol,
    'polychrome.payment.network': charge.network,
    'polychrome.payment.asset': charge.asset,
    'polychrome.payment.amount': charge.amount,
    'polychrome.payment.payee': charge.payee,
    'polychrome.payment.idempotency_key': charge.idempotencyKey,
    'polychrome.payment.approval_request_id': charge.approvalRequestId,
  };
}

/**
 * Writes a settlement onto the active span (the `payment_settle` span it is paid in): the
 * transaction and the payer, never the seller's receipt header as received.
 */
export function noteSettlement(settlement: Settlement): void {
  setActiveSpanAttributes({
    'polychrome.payment.transaction': settlement.transaction,
    'polychrome.payment.payer': settlement.payer,
  });
}
