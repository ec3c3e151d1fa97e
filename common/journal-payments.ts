import { decodePayload, EventKind } from './event-kinds';
import {
  ApprovalDecision,
  type ApprovalRequest,
  type ApprovalResponse,
  type OutboundPaymentReceipt,
  type PaymentCharge,
  type PaymentPolicy,
  type PaymentSent,
  ResolveDecision,
  type ToolResult,
  type TurnAmbiguous,
  type TurnResolved,
} from '../proto/gen/polychrome/events/v1/events';

/**
 * A conversation's payments as its journal records them (docs/payments.md, "Auditing
 * payments"): each committed `payment_charge` with what followed it, gathered in journal
 * order. Pure and DOM-free: replay, the CLI and the forensics UI read the same gathering,
 * and payment-audit.ts checks it.
 */

/** The journal events a payment is made of, decoded. */
export type PaymentJournalEvent =
  | Positioned<'payment_policy', PaymentPolicy>
  | Positioned<'payment_charge', PaymentCharge>
  | Positioned<'approval_request', ApprovalRequest>
  | Positioned<'approval_response', ApprovalResponse>
  | Positioned<'payment_sent', PaymentSent>
  | Positioned<'outbound_payment_receipt', OutboundPaymentReceipt>
  | Positioned<'tool_result', ToolResult>
  | Positioned<'turn_ambiguous', TurnAmbiguous>
  | Positioned<'turn_resolved', TurnResolved>;

/** One decoded event at its journal position. */
export interface Positioned<K extends string, P> {
  readonly position: number;
  readonly kind: K;
  readonly payload: P;
}

const PAYMENT_KINDS: ReadonlySet<string> = new Set<string>([
  EventKind.PaymentPolicy,
  EventKind.PaymentCharge,
  EventKind.ApprovalRequest,
  EventKind.ApprovalResponse,
  EventKind.PaymentSent,
  EventKind.OutboundPaymentReceipt,
  EventKind.ToolResult,
  EventKind.TurnAmbiguous,
  EventKind.TurnResolved,
]);

/** A journal entry whose payload is still bytes (an export's, the state plane's). */
export interface EncodedEntry {
  readonly position: number;
  readonly kind: string;
  readonly payload: Uint8Array;
}

/** The payment events of a journal, and the payment entries that did not decode. */
export interface DecodedPaymentEvents {
  readonly events: readonly PaymentJournalEvent[];
  readonly unreadable: readonly { readonly position: number; readonly kind: string }[];
}

/**
 * Decodes the entries a payment audit reads, in journal order. An erased entry (only its
 * leaf digest kept: an empty payload of an erasable kind) is left out.
 */
export function paymentEventsOf(entries: readonly EncodedEntry[]): DecodedPaymentEvents {
  const events: PaymentJournalEvent[] = [];
  const unreadable: { position: number; kind: string }[] = [];
  for (const { position, kind, payload } of entries) {
    if (!PAYMENT_KINDS.has(kind)) continue;
    try {
      const decoded = decodePayload(kind as PaymentJournalEvent['kind'], payload);
      events.push({ position, kind, payload: decoded } as PaymentJournalEvent);
    } catch {
      if (kind !== EventKind.ToolResult) unreadable.push({ position, kind });
    }
  }
  return { events, unreadable };
}

/** What became of a charge, as the journal tells it. */
export const PaymentState = {
  /** Committed and shown for approval; no answer yet. */
  Asked: 'asked',
  /** Approved; not sent yet. */
  Approved: 'approved',
  /** A person denied it; nothing was paid. */
  Denied: 'denied',
  /** Approved, then not paid: the settlement was refused or rejected, or no wallet was linked any more. */
  Refused: 'refused',
  /** `payment_sent`, and nothing since. */
  Sent: 'sent',
  /** Receipt recorded. */
  Paid: 'paid',
  /** Sent without a receipt and the turn quarantined: money may or may not have moved. */
  Unknown: 'unknown',
  /**
   * Sent without a receipt, quarantined, and resolved by an admin as never made, once its
   * authorization could no longer move money (docs/payments.md, "Exactly once").
   */
  NotMade: 'not_made',
} as const;
export type PaymentState = (typeof PaymentState)[keyof typeof PaymentState];

/** One committed charge and what the journal recorded of it after. */
export interface RecordedCharge {
  readonly charge: Positioned<'payment_charge', PaymentCharge>;
  /** The newest `payment_policy` before the charge: the limits in force when it was checked. */
  readonly policy: Positioned<'payment_policy', PaymentPolicy> | undefined;
  request: Positioned<'approval_request', ApprovalRequest> | undefined;
  /** The answers to its approval request, in order. */
  readonly responses: Positioned<'approval_response', ApprovalResponse>[];
  readonly sends: Positioned<'payment_sent', PaymentSent>[];
  readonly receipts: Positioned<'outbound_payment_receipt', OutboundPaymentReceipt>[];
  /** The tool call's first result after the charge. */
  result: Positioned<'tool_result', ToolResult> | undefined;
  /** The turn's first quarantine after the charge. */
  quarantine: Positioned<'turn_ambiguous', TurnAmbiguous> | undefined;
  /** The admin's resolve of that quarantine, when it names this charge's call. */
  resolved: Positioned<'turn_resolved', TurnResolved> | undefined;
}

/** A send or a receipt that names no charge committed before it. */
export interface StrayPaymentEvent {
  readonly event:
    | Positioned<'payment_sent', PaymentSent>
    | Positioned<'outbound_payment_receipt', OutboundPaymentReceipt>;
}

/** Every charge with its events, and the sends and receipts of no charge. */
export interface JournalPayments {
  readonly charges: readonly RecordedCharge[];
  readonly strays: readonly StrayPaymentEvent[];
  /** Every `payment_policy`, in order. */
  readonly policies: readonly Positioned<'payment_policy', PaymentPolicy>[];
}

/**
 * Gathers the payments: each event after a charge belongs to the newest charge of its tool
 * call (as the control plane's journal view does: a call meets one 402 at a time); an
 * approval request or answer belongs to the charge whose approval id it carries.
 */
export function gatherPayments(events: readonly PaymentJournalEvent[]): JournalPayments {
  const charges: RecordedCharge[] = [];
  const strays: StrayPaymentEvent[] = [];
  const policies: Positioned<'payment_policy', PaymentPolicy>[] = [];
  const byCall = new Map<string, RecordedCharge>();
  const byApproval = new Map<string, RecordedCharge>();
  const callKey = (turnId: string, toolCallId: string): string => `${turnId}\n${toolCallId}`;
  for (const event of events) {
    switch (event.kind) {
      case 'payment_policy':
        policies.push(event);
        break;
      case 'payment_charge': {
        const recorded = newCharge(event, policies.at(-1));
        charges.push(recorded);
        byCall.set(callKey(event.payload.turnId, event.payload.toolCallId), recorded);
        byApproval.set(event.payload.approvalRequestId, recorded);
        break;
      }
      case 'approval_request': {
        const recorded = byApproval.get(event.payload.requestId);
        if (recorded !== undefined && recorded.request === undefined) recorded.request = event;
        break;
      }
      case 'approval_response':
        byApproval.get(event.payload.requestId)?.responses.push(event);
        break;
      case 'payment_sent':
      case 'outbound_payment_receipt': {
        const recorded = byCall.get(callKey(event.payload.turnId, event.payload.toolCallId));
        if (recorded === undefined) strays.push({ event });
        else if (event.kind === 'payment_sent') recorded.sends.push(event);
        else recorded.receipts.push(event);
        break;
      }
      case 'tool_result': {
        const recorded = byCall.get(callKey(event.payload.turnId, event.payload.toolCallId));
        if (recorded !== undefined) recorded.result ??= event;
        break;
      }
      case 'turn_ambiguous':
        for (const recorded of charges) {
          if (recorded.charge.payload.turnId === event.payload.turnId)
            recorded.quarantine ??= event;
        }
        break;
      case 'turn_resolved': {
        const recorded = byCall.get(callKey(event.payload.turnId, event.payload.toolCallId));
        if (recorded?.quarantine !== undefined) recorded.resolved ??= event;
        break;
      }
    }
  }
  return { charges, strays, policies };
}

function newCharge(
  charge: Positioned<'payment_charge', PaymentCharge>,
  policy: Positioned<'payment_policy', PaymentPolicy> | undefined,
): RecordedCharge {
  return {
    charge,
    policy,
    request: undefined,
    responses: [],
    sends: [],
    receipts: [],
    result: undefined,
    quarantine: undefined,
    resolved: undefined,
  };
}

/**
 * Where a charge stands, from its events (the approval's validity aside: the audit says
 * whether the answer verifies).
 */
export function paymentStateOf(recorded: RecordedCharge): PaymentState {
  if (recorded.receipts.length > 0) return PaymentState.Paid;
  const answer = recorded.responses[0]?.payload;
  if (recorded.sends.length > 0) {
    if (recorded.quarantine !== undefined) {
      const notMade =
        recorded.resolved?.payload.decision === ResolveDecision.RESOLVE_DECISION_DID_NOT_RUN;
      return notMade ? PaymentState.NotMade : PaymentState.Unknown;
    }
    return recorded.result === undefined ? PaymentState.Sent : PaymentState.Refused;
  }
  if (answer === undefined) return PaymentState.Asked;
  if (answer.decision !== ApprovalDecision.APPROVAL_DECISION_APPROVED) return PaymentState.Denied;
  return recorded.result === undefined ? PaymentState.Approved : PaymentState.Refused;
}

/** When the charge last moved: settled, else sent, else answered, else asked (unix ms). */
export function paymentTimeOf(recorded: RecordedCharge): number | undefined {
  const times = [
    recorded.receipts[0]?.payload.settledAtMs,
    recorded.sends[0]?.payload.sentAtMs,
    recorded.responses[0]?.payload.answeredAtMs,
    recorded.request?.payload.requestedAtMs,
  ];
  return times.find((t) => t !== undefined && t > 0);
}
