/**
 * The control plane pays an approved charge (docs/payments.md, "A paid call in a turn"),
 * after plan-payments.ts decided it may and its `payment_sent` is committed: the wallet only
 * this process reads signs, the protocol's adapter sends the paid request, and the receipt,
 * signed with the approval key and holding the paid response, is committed before the tool
 * is answered. A failure says whether money may have moved: if it may, the outcome is
 * unknown and the turn is quarantined with the charge named, never paid again.
 */
import { AppError, isAppError } from '../../common/errors';
import { EventKind } from '../../common/event-kinds';
import type {
  OutboundPaymentReceipt,
  PaymentCharge,
} from '../../proto/gen/polychrome/events/v1/events';
import type { Charge } from '../payments/charge';
import type {
  McpPaidResult,
  McpPayment,
  TrustedToolResult,
} from '../../proto/gen/polychrome/harness/v1/harness';
import { chargeFromProto, receiptIdOf, receiptToProto } from '../payments/payment-events';
import type { PaymentProtocol } from '../payments/payment-protocol';
import type { SecretStore } from '../payments/secret-store';
import {
  SettlementError,
  SettlementOutcome,
  type PaidResponse,
  type SendOptions,
} from '../payments/settlement';
import type { ApprovalSigner } from './approval-signer';
import { planned, type PlannedEvent } from './plan-common';
import { paidResult } from './paid-result';
import { noteSettlement } from './payment-spans';

/** How the control plane pays: the deployment's choices (coordinator-options.ts). */
export interface PaymentSettings {
  /** The protocols it pays, in the order it prefers them when a 402 offers several. */
  readonly protocols: readonly PaymentProtocol[];
  /** Where wallet keys are read (Secrets in a cluster, a directory in development). */
  readonly wallets: SecretStore;
  readonly send?: SendOptions;
}

/** What paying needs besides the charge. */
export interface PayParts {
  readonly settings: PaymentSettings | undefined;
  readonly approvals: ApprovalSigner;
  readonly conversationId: string;
  readonly nowMs: () => number;
  /** Appends one batch under the turn's lease. */
  commit(events: readonly PlannedEvent[]): Promise<unknown>;
}

/** Pays `charge` from `wallet`; the answer the harness gets. */
export async function payCharge(
  charge: PaymentCharge,
  wallet: string,
  parts: PayParts,
): Promise<TrustedToolResult> {
  const { toolCallId } = charge;
  const protocol = parts.settings?.protocols.find((p) => p.name === charge.protocol);
  if (parts.settings === undefined || protocol === undefined) {
    return notPaid(
      toolCallId,
      `this control plane does not pay ${charge.protocol} (docs/payments.md)`,
    );
  }
  const neutral = chargeFromProto(charge);
  let paid: PaidResponse;
  try {
    paid = await protocol.settle({
      charge: neutral,
      challenge: charge.challenge,
      wallet: await parts.settings.wallets.wallet(wallet),
      request: { url: charge.resourceUrl, method: 'GET', headers: {} },
      idempotencyKey: charge.idempotencyKey,
      ...(parts.settings.send === undefined ? {} : { options: parts.settings.send }),
    });
  } catch (error) {
    return failedPayment(charge, error);
  }
  return commitReceipt(charge, neutral, paid, wallet, parts);
}

/** Signs and commits the receipt of a paid charge; the answer the tool gets. */
async function commitReceipt(
  charge: PaymentCharge,
  neutral: Charge,
  paid: PaidResponse,
  wallet: string,
  parts: PayParts,
): Promise<TrustedToolResult> {
  noteSettlement(paid.settlement);
  const receipt = receiptOf(charge, neutral, paid, wallet, parts);
  try {
    await parts.commit([planned(EventKind.OutboundPaymentReceipt, receipt)]);
  } catch (error) {
    // Paid, and the receipt not recorded: the `payment_sent` stands, so a retry finds an
    // unknown outcome and quarantines the turn naming the charge, never paying again.
    throw new AppError(
      'unavailable',
      `charge ${charge.idempotencyKey} was paid (transaction ${paid.settlement.transaction}) but its receipt could not be committed`,
      { cause: error },
    );
  }
  return paidResult(charge.toolCallId, receipt);
}

/**
 * An approved MCP tool's charge, after its `payment_sent` is committed (docs/payments.md,
 * "A paid MCP tool"): the payment signed with the wallet for the harness to carry in the
 * tool's call, or, when it cannot be signed, the answer that nothing was paid.
 */
export async function authorizeMcpCharge(
  charge: PaymentCharge,
  wallet: string,
  parts: PayParts,
): Promise<{ readonly payment: McpPayment } | { readonly result: TrustedToolResult }> {
  const mcp = parts.settings?.protocols.find((p) => p.name === charge.protocol)?.mcp;
  if (parts.settings === undefined || mcp === undefined) {
    return {
      result: notPaid(
        charge.toolCallId,
        `this control plane does not pay ${charge.protocol} over MCP`,
      ),
    };
  }
  try {
    const payment = await mcp.authorize({
      charge: chargeFromProto(charge),
      challenge: charge.challenge,
      wallet: await parts.settings.wallets.wallet(wallet),
      idempotencyKey: charge.idempotencyKey,
      ...(parts.settings.send === undefined ? {} : { options: parts.settings.send }),
    });
    // The protocol names the `_meta` key the harness carries it under.
    return { payment: { toolCallId: charge.toolCallId, payment, protocol: charge.protocol } };
  } catch (error) {
    return { result: failedPayment(charge, error) };
  }
}

/**
 * What the paid MCP call answered, as the harness relayed it: its settlement, read by the
 * protocol, becomes the signed receipt holding the tool's result, committed before the
 * tool is answered. A result that does not show the payment settled by this wallet leaves
 * the outcome unknown (the turn is quarantined naming the charge); one whose server says
 * it took no payment is a result saying nothing was paid.
 */
export async function recordMcpPaid(
  charge: PaymentCharge,
  wallet: string,
  relayed: McpPaidResult,
  parts: PayParts,
): Promise<TrustedToolResult> {
  const mcp = parts.settings?.protocols.find((p) => p.name === charge.protocol)?.mcp;
  const neutral = chargeFromProto(charge);
  let paid: PaidResponse;
  try {
    if (parts.settings === undefined || mcp === undefined) {
      throw new SettlementError(
        SettlementOutcome.Unknown,
        `this control plane no longer pays ${charge.protocol} over MCP, so it cannot read the settlement`,
      );
    }
    const payer = await walletAddress(parts.settings, wallet);
    const settlement = mcp.settlement(
      relayed,
      neutral,
      payer,
      charge.idempotencyKey,
      charge.challenge,
    );
    paid = {
      status: 0,
      contentType: undefined,
      body: Buffer.from(relayed.content, 'utf8'),
      settlement,
    };
  } catch (error) {
    return failedPayment(charge, error);
  }
  return commitReceipt(charge, neutral, paid, wallet, parts);
}

/** The wallet's address; a wallet that cannot be read now leaves the outcome unknown. */
async function walletAddress(settings: PaymentSettings, wallet: string): Promise<string> {
  try {
    return (await settings.wallets.wallet(wallet)).address;
  } catch (error) {
    throw new SettlementError(
      SettlementOutcome.Unknown,
      `wallet ${wallet} cannot be read to check the payer (${isAppError(error) ? error.message : 'unreadable'})`,
    );
  }
}

/** The signed receipt of a paid charge, holding the paid response. */
function receiptOf(
  charge: PaymentCharge,
  neutral: Charge,
  paid: PaidResponse,
  wallet: string,
  parts: PayParts,
): OutboundPaymentReceipt {
  const call = {
    conversationId: parts.conversationId,
    turnId: charge.turnId,
    toolCallId: charge.toolCallId,
  };
  return parts.approvals.signReceipt({
    ...receiptToProto(neutral, paid.settlement, call, {
      approvalRequestId: charge.approvalRequestId,
      response: {
        status: paid.status,
        contentType: paid.contentType ?? '',
        body: Buffer.from(paid.body).toString('utf8'),
      },
      settledAtMs: parts.nowMs(),
      wallet,
    }),
    receiptId: receiptIdOf(charge.idempotencyKey),
  });
}

/** A settlement that failed: unknown when money may have moved, else a result saying so. */
function failedPayment(charge: PaymentCharge, error: unknown): TrustedToolResult {
  if (error instanceof SettlementError && error.outcome === SettlementOutcome.Unknown) {
    return {
      toolCallId: charge.toolCallId,
      content: '',
      isError: false,
      outcomeUnknownReason: `the payment of charge ${charge.idempotencyKey} may or may not have moved money: ${error.message}`,
    };
  }
  if (isAppError(error)) return notPaid(charge.toolCallId, error.message);
  throw error;
}

/** The tool's result for an approved payment that was not made, saying why. */
export function notPaid(toolCallId: string, why: string): TrustedToolResult {
  return {
    toolCallId,
    content: `the approved payment was not made: ${why}. Nothing was paid.`,
    isError: true,
    outcomeUnknownReason: '',
  };
}
