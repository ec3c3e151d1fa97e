/**
 * An admin settles a turn quarantined on a payment (docs/payments.md, "Exactly once"): the
 * control plane committed `payment_sent` for an approved charge and never recorded its
 * receipt (it died after sending, or the settlement's outcome was unknown), so money may
 * have moved. Only a person looking at the chain knows. They give the transaction that
 * paid it, and the batch records it: the `turn_resolved` (`ran`), an
 * `outbound_payment_receipt` signed with the approval key that names them
 * (`resolved_by`) and has no response, and the call's `tool_result` saying it was paid and
 * its response lost. The call never runs and the charge is never paid again.
 *
 * A payment that moved no money is resolved `did_not_run`, but only once it can no longer
 * move any: its signed authorization must have expired (charge.ts
 * `authorizationValidUntilMs`: for x402 the charge's expiry, for MPP at most five minutes
 * later), and {@link AUTHORIZATION_MARGIN_MS} more passed (the chain's clock is not ours).
 * The batch is the `turn_resolved` (`did_not_run`) and the call's
 * `tool_result` saying nothing was paid; the send still counts against the spend limits
 * (failing closed). Pure.
 */
import { AppError } from '../../common/errors';
import { EventKind } from '../../common/event-kinds';
import {
  ResolveDecision,
  type OutboundPaymentReceipt,
} from '../../proto/gen/polychrome/events/v1/events';
import { authorizationValidUntilMs } from '../payments/charge';
import { chargeFromProto, receiptIdOf, receiptToProto } from '../payments/payment-events';
import type { RecordedPayment, TurnView } from './journal-view-types';
import { planned, refuse, type PlannedEvent, type Refusal } from './plan-common';
import { paidResult } from './paid-result';
import type { Caller, ResolveTurn } from './turn-service';

/** An EVM transaction hash (the `eip155` networks'). */
const EVM_TRANSACTION = /^0x[0-9a-f]{64}$/u;

/** Other networks' references: one token of printable characters. */
const OTHER_TRANSACTION = /^[\x21-\x7e]{1,256}$/u;

/** What the plan needs besides the turn and the request. */
export interface PaymentResolveInput {
  readonly caller: Caller;
  readonly conversationId: string;
  readonly nowMs: number;
  /** The quarantine's `turn_ambiguous` position. */
  readonly quarantinePosition: number;
  /** The address of the wallet that sent the payment, read by the shell from its store. */
  readonly payer: string;
  /** Signs a receipt with the approval key (approval-signer.ts `signReceipt`). */
  signReceipt(receipt: OutboundPaymentReceipt): OutboundPaymentReceipt;
}

/** The payment of the quarantined call that was sent and has no receipt, if there is one. */
export function unsettledPayment(turn: TurnView, toolCallId: string): RecordedPayment | undefined {
  return turn.payments.find(
    (payment) =>
      payment.charge.toolCallId === toolCallId &&
      payment.sent !== undefined &&
      payment.receipt === undefined,
  );
}

/** How long after a charge's expiry its authorization is taken as unusable: clocks differ. */
export const AUTHORIZATION_MARGIN_MS = 5 * 60_000;

/** What a payment quarantine is about, for a person: the charge, whom it paid, from what. */
function describe(payment: RecordedPayment): string {
  const { charge } = payment;
  return `the payment of charge ${charge.idempotencyKey} (${charge.amount} of ${charge.asset} on ${charge.network} to ${charge.payee}, from wallet ${payment.sent?.payload.wallet ?? ''}) was sent and its receipt was never recorded`;
}

/** The refusal for `ran` without a transaction (409, naming the charge and what to give). */
export function paymentResolveRefusal(turn: TurnView, payment: RecordedPayment): Refusal {
  return refuse(
    new AppError(
      'conflict',
      `turn ${turn.turnId} is quarantined because ${describe(payment)}, so money may have moved; look the payment up on ${payment.charge.network} and resolve the turn "ran" with the transaction that paid it ("transaction"), or, if it moved no money, "did_not_run" once its authorization expired (docs/payments.md, "Exactly once")`,
      {
        details: {
          turnId: turn.turnId,
          field: 'transaction',
          charge: payment.charge.idempotencyKey,
        },
      },
    ),
  );
}

/** What resolving a payment as never made records besides the turn and the request. */
export interface PaymentNotMadeInput {
  readonly caller: Caller;
  readonly nowMs: number;
  /** The quarantine's `turn_ambiguous` position. */
  readonly quarantinePosition: number;
}

/**
 * The batch that records `payment` as never made, or why not yet (409): a protocol whose
 * authorization's lifetime Polychrome does not set, or an authorization that may still be
 * used.
 */
export function planPaymentNotMade(
  turn: TurnView,
  payment: RecordedPayment,
  request: ResolveTurn,
  input: PaymentNotMadeInput,
): Refusal | { readonly events: readonly PlannedEvent[] } {
  const { charge } = payment;
  const conflict = (why: string): Refusal =>
    refuse(
      new AppError('conflict', `turn ${turn.turnId}: ${describe(payment)}; ${why}`, {
        details: { turnId: turn.turnId, field: 'decision', charge: charge.idempotencyKey },
      }),
    );
  const validUntil = authorizationValidUntilMs(charge);
  if (validUntil === undefined) {
    return conflict(
      `Polychrome cannot say when a ${charge.protocol} payment's authorization stops being usable; resolve it "ran" with the transaction if it paid, or leave it quarantined`,
    );
  }
  const usableUntil = validUntil + AUTHORIZATION_MARGIN_MS;
  if (!(input.nowMs >= usableUntil)) {
    return conflict(
      `its signed authorization can still move money until ${new Date(usableUntil).toISOString()} (valid before ${new Date(validUntil).toISOString()}, and ${AUTHORIZATION_MARGIN_MS / 60_000} minutes for the chain's clock); if it paid, resolve "ran" with the transaction; if not, resolve "did_not_run" after that`,
    );
  }
  const content = `The approved payment of ${charge.amount} of ${charge.asset} (${charge.network}) to ${charge.payee} was not made: an admin (${request.actor}) found no transfer, and its authorization expired at ${new Date(validUntil).toISOString()}, so it can no longer be made. Nothing was paid; ask the user before trying again.`;
  return {
    events: [
      planned(EventKind.TurnResolved, {
        turnId: turn.turnId,
        decision: ResolveDecision.RESOLVE_DECISION_DID_NOT_RUN,
        toolCallId: charge.toolCallId,
        result: '',
        resultUnknown: false,
        actor: request.actor,
        caller: input.caller.identity,
        session: input.caller.sessionId,
        resolvedAtMs: input.nowMs,
        quarantinePosition: input.quarantinePosition,
      }),
      planned(EventKind.ToolResult, {
        turnId: turn.turnId,
        toolCallId: charge.toolCallId,
        content,
        isError: true,
        denied: false,
        thread: charge.thread,
      }),
    ],
  };
}

/**
 * The batch that records `payment` paid in `transaction`, or why not: a transaction that is
 * not one of the charge's network (400).
 */
export function planPaymentResolve(
  turn: TurnView,
  payment: RecordedPayment,
  request: ResolveTurn,
  transaction: string,
  input: PaymentResolveInput,
): Refusal | { readonly events: readonly PlannedEvent[] } {
  const { charge } = payment;
  const reference = transactionOf(charge.network, transaction);
  if (typeof reference !== 'string') return reference;
  const receipt = resolvedReceipt(payment, reference, request.actor, input);
  const result = paidResult(charge.toolCallId, receipt);
  return {
    events: [
      planned(EventKind.TurnResolved, {
        turnId: turn.turnId,
        decision: ResolveDecision.RESOLVE_DECISION_RAN,
        toolCallId: charge.toolCallId,
        result: result.content,
        resultUnknown: false,
        actor: request.actor,
        caller: input.caller.identity,
        session: input.caller.sessionId,
        resolvedAtMs: input.nowMs,
        quarantinePosition: input.quarantinePosition,
      }),
      planned(EventKind.OutboundPaymentReceipt, receipt),
      planned(EventKind.ToolResult, {
        turnId: turn.turnId,
        toolCallId: charge.toolCallId,
        content: result.content,
        isError: result.isError,
        denied: false,
        thread: charge.thread,
      }),
    ],
  };
}

/** `transaction` as the charge's network writes it (lower-case on `eip155`), or why not (400). */
function transactionOf(network: string, transaction: string): string | Refusal {
  const evm = network.startsWith('eip155:');
  const reference = evm ? transaction.toLowerCase() : transaction;
  if ((evm ? EVM_TRANSACTION : OTHER_TRANSACTION).test(reference)) return reference;
  return refuse(
    new AppError(
      'invalid_argument',
      evm
        ? `transaction "${transaction.slice(0, 80)}" is not a transaction hash of ${network}: give 0x and 64 hex digits`
        : `transaction "${transaction.slice(0, 80)}" is not a reference: give it as one token of printable characters, at most 256`,
      { details: { field: 'transaction' } },
    ),
  );
}

/** The receipt of `payment`, paid in `transaction` by the admin's word: signed, naming them. */
function resolvedReceipt(
  payment: RecordedPayment,
  transaction: string,
  actor: string,
  input: PaymentResolveInput,
): OutboundPaymentReceipt {
  const { charge } = payment;
  const neutral = chargeFromProto(charge);
  const settlement = {
    protocol: neutral.protocol,
    transaction,
    payer: input.payer.toLowerCase(),
    network: charge.network,
    idempotencyKey: charge.idempotencyKey,
    upstreamReceipt: '',
  };
  const call = {
    conversationId: input.conversationId,
    turnId: charge.turnId,
    toolCallId: charge.toolCallId,
  };
  return input.signReceipt({
    ...receiptToProto(neutral, settlement, call, {
      approvalRequestId: charge.approvalRequestId,
      response: { status: 0, contentType: '', body: '' },
      settledAtMs: input.nowMs,
      wallet: payment.sent?.payload.wallet ?? '',
      resolvedBy: actor,
    }),
    receiptId: receiptIdOf(charge.idempotencyKey),
  });
}
