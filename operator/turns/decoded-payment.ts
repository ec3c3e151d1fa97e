/**
 * Decoding the payment events for the fold (docs/payments.md): a turn's charges, their
 * sends and receipts onto the turn, each send also onto the conversation's totals, and the
 * wallet policy onto the view. Stateless, like the rest of decoded-event.ts.
 */
import type { DecodedEvent, PaymentKind } from './decoded-event-types';
import { turnEvent } from './decoded-turn-event';
import type { RecordedPayment, TypedEvent } from './journal-view-types';

/** A charge, its `payment_sent` or its receipt: each after the charge of its tool call. */
export function paymentEvent(
  position: number,
  event: Extract<TypedEvent, { readonly kind: PaymentKind | 'payment_policy' }>,
): DecodedEvent {
  if (event.kind === 'payment_policy') {
    const { wallet, limitsJson, actor, setAtMs } = event.payload;
    return { type: 'payment_policy', policy: { position, wallet, limitsJson, actor, setAtMs } };
  }
  if (event.kind === 'payment_charge') {
    const charge = event.payload;
    return turnEvent(position, event.kind, charge.turnId, charge, (turn) => ({
      ...turn,
      payments: [...turn.payments, { position, charge }],
    }));
  }
  const { turnId, toolCallId } = event.payload;
  const decoded = turnEvent(position, event.kind, turnId, event.payload, (turn) => {
    // The newest charge of the call: a call meets one 402 at a time.
    const index = turn.payments.findLastIndex((p) => p.charge.toolCallId === toolCallId);
    const payment = turn.payments[index];
    if (payment === undefined) return turn;
    const recorded = { position, payload: event.payload };
    const next =
      event.kind === 'payment_sent'
        ? { ...payment, sent: recorded as NonNullable<RecordedPayment['sent']> }
        : { ...payment, receipt: recorded as NonNullable<RecordedPayment['receipt']> };
    return { ...turn, payments: turn.payments.map((p, i) => (i === index ? next : p)) };
  });
  if (event.kind !== 'payment_sent' || decoded.type !== 'turn') return decoded;
  const { network, asset, amount, sentAtMs } = event.payload;
  return { ...decoded, spent: { network, asset, amount, at: new Date(sentAtMs).toISOString() } };
}
