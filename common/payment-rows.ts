import type { AuditedPayment } from './payment-audit';

/**
 * A conversation's payments as a table (docs/payments.md, "Auditing payments"): the
 * columns and cells `payments NAME` prints and the forensics UI's Payments panel shows, so
 * both read alike.
 */

/** The column titles, in order. */
export const PAYMENT_COLUMNS = [
  'WHEN',
  'TOOL CALL',
  'PROTOCOL',
  'AMOUNT',
  'NETWORK',
  'PAYEE',
  'RESOURCE',
  'STATE',
  'TRANSACTION',
  'RECEIPT VERIFIED',
] as const;

/**
 * One charge's cells: when it last moved (ISO 8601, `-` when the journal does not say), the
 * tool call, the protocol, the amount with its asset, the network, the payee, the resource,
 * its state, the receipt's transaction and whether the receipt verified (`yes`, `NO`, or
 * `-` without a receipt).
 */
export function paymentCells(p: AuditedPayment): string[] {
  return [
    p.atMs === undefined ? '-' : new Date(p.atMs).toISOString(),
    p.toolCallId,
    p.protocol,
    `${p.amount} ${p.asset}`,
    p.network,
    p.payee,
    p.resourceUrl,
    p.state,
    p.transaction === '' ? '-' : p.transaction,
    p.transaction === '' ? '-' : p.receiptVerified ? 'yes' : 'NO',
  ];
}

/** A finding as one line: where, which charge, what is wrong. */
export function findingLine(f: {
  readonly position: number;
  readonly idempotencyKey: string;
  readonly problem: string;
}): string {
  const charge = f.idempotencyKey === '' ? '' : ` (charge ${f.idempotencyKey})`;
  return `payment problem at ${String(f.position)}${charge}: ${f.problem}`;
}
