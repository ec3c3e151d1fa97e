import { chargeFactsOf, type ChargeFacts } from '../../common/payment-approval';
import { auditJournalPayments, type PaymentAudit } from '../../common/payment-audit';
import type { PaymentCharge } from '../../proto/gen/polychrome/events/v1/events';
import type { Decoded, ReplayEntry } from './journal-turns';
import type { ToolOutcome } from './ports/tool-port';
import type { ReplayOptions } from './replay-options';
import type { TurnEvent } from './turn-machine';

/**
 * Paid calls in replay (docs/replay.md, docs/payments.md "A paid call in a turn"): the
 * journal holds what the control plane answered, so the machine is fed it instead of a
 * 402 and a chain. An attempt is given the charges committed before it, as its dispatch
 * was; a call that met its 402 within the attempt is told so, and its charge comes from
 * the `payment_charge` the control plane committed then; a paid call's result is its
 * `tool_result`, as any tool's.
 */

/** The charges committed before the attempt's dispatch, as the control plane gave them. */
export function chargesBefore(before: readonly Decoded[]): ChargeFacts[] {
  return before.flatMap((e) => (e.kind === 'payment_charge' ? [chargeFactsOf(e.payload)] : []));
}

/** The charges an attempt committed, by tool call id: those after its dispatch, before its end. */
export function attemptCharges(
  events: readonly Decoded[],
  dispatchPosition: number,
  endPosition: number,
): Map<string, PaymentCharge> {
  const charges = new Map<string, PaymentCharge>();
  for (const e of events) {
    if (e.kind !== 'payment_charge') continue;
    if (e.position <= dispatchPosition || e.position >= endPosition) continue;
    if (!charges.has(e.payload.toolCallId)) charges.set(e.payload.toolCallId, e.payload);
  }
  return charges;
}

/**
 * What the tool met, as far as the machine reads it: a 402 for the charge's resource. The
 * challenge's headers are not fed (the machine only passes them on, and the recorded
 * charge is the control plane's reading of them).
 */
export function recordedPaymentRequired(charge: PaymentCharge): ToolOutcome {
  return { content: '', isError: true, paymentRequired: { url: charge.resourceUrl, headers: [] } };
}

/**
 * The next paid-call event for the machine, taken from the queues: the recorded charge of a
 * call that asked for one (`charging`), else the 402 of a running call that met one in this
 * attempt (it has a charge, and its result is not next); `missing` names a call that asked
 * for a charge the attempt did not commit.
 */
export function nextPaymentEvent(
  charging: string[],
  running: string[],
  charges: ReadonlyMap<string, PaymentCharge>,
  found: Decoded | undefined,
): TurnEvent | { readonly missing: string } | undefined {
  const asked = charging.shift();
  if (asked !== undefined) {
    const charge = charges.get(asked);
    if (charge === undefined) return { missing: asked };
    return {
      type: 'charge_answered',
      toolCallId: asked,
      answer: { charge: chargeFactsOf(charge) },
    };
  }
  const met = running.find(
    (id) => charges.has(id) && !(found?.kind === 'tool_result' && found.payload.toolCallId === id),
  );
  const charge = met === undefined ? undefined : charges.get(met);
  if (met === undefined || charge === undefined) return undefined;
  running.splice(running.indexOf(met), 1);
  return { type: 'tool_finished', toolCallId: met, outcome: recordedPaymentRequired(charge) };
}

/**
 * The audit of the journal's payments (common/payment-audit.ts): receipts and approvals
 * checked with the approval key replay was given, totals against the limits in force.
 */
export function auditRecordedPayments(
  entries: readonly ReplayEntry[],
  options: Pick<ReplayOptions, 'verifier' | 'approvalPublicKey'>,
): PaymentAudit {
  const { verifier, approvalPublicKey } = options;
  return auditJournalPayments(entries, {
    approvalKeys: approvalPublicKey === undefined ? [] : [approvalPublicKey],
    verifier: { verify: (key, message, signature) => verifier.verify(message, signature, key) },
  });
}
