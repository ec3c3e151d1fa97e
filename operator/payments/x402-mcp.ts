import { clip, type Charge } from './charge';
import { refuseIfExpired } from './send-paid';
import {
  SettlementError,
  SettlementOutcome,
  settlementUnknown,
  type McpPaidOutcome,
  type SettleInput,
  type Settlement,
} from './settlement';
import { parseX402McpChallenge } from './x402-challenge';
import { boundChallenge, signX402Payment } from './x402-settle';

/**
 * x402 over MCP (x402's MCP transport): a paid tool answers its call with a result that
 * is an error carrying `PaymentRequired`, and is called again with a `PaymentPayload` in
 * `_meta["x402/payment"]`; its paid result carries the settlement in
 * `_meta["x402/payment-response"]` (docs/payments.md, "A paid MCP tool").
 *
 * The MCP session lives in the sandbox, so the control plane does not send the paid call:
 * it signs the payload here (the key never leaves it) and the harness carries it. The
 * signed payload pays exactly the approved charge and nothing else: its EIP-3009
 * authorization names the payee, the amount and the token, expires with the charge, and
 * its nonce is the charge's idempotency key, so however often it is sent the token moves
 * money for it once.
 */

/** The payment-required object relayed for an MCP tool, when it is x402's: itself. */
export function x402McpChallengeIn(paymentRequired: string): string | undefined {
  try {
    const body = JSON.parse(paymentRequired) as { x402Version?: unknown } | null;
    return body !== null && typeof body === 'object' && 'x402Version' in body
      ? paymentRequired
      : undefined;
  } catch {
    return undefined;
  }
}

/** Signs the payment of an approved MCP charge: the `PaymentPayload` as JSON. */
export async function authorizeX402Mcp(input: Omit<SettleInput, 'request'>): Promise<string> {
  const { charge, challenge, wallet, idempotencyKey } = input;
  const parsed = boundChallenge(charge, challenge, charge.resourceUrl, parseX402McpChallenge);
  refuseIfExpired(charge.expiresAt, (input.options?.now ?? (() => new Date()))());
  return JSON.stringify(await signX402Payment(parsed, wallet, idempotencyKey, charge.expiresAt));
}

/** An x402 `SettlementResponse`, as far as it is read. */
interface SettleResponse {
  readonly success?: unknown;
  readonly transaction?: unknown;
  readonly network?: unknown;
  readonly payer?: unknown;
  readonly errorReason?: unknown;
}

/**
 * What the paid MCP call settled, from the result the harness relayed, or a
 * `SettlementError` saying whether money may have moved:
 *
 * - the call's outcome unknown (its transport broke after it was sent): `unknown`;
 * - `PaymentRequired` again, or a `payment-response` with `success: false`: the server
 *   took no payment, `rejected`;
 * - no `payment-response` at all, one that is not JSON, or a successful one that does not
 *   name a transaction on the charge's network paid by this wallet: `unknown` (the server
 *   may have settled; the turn is quarantined naming the charge, never paid again).
 */
export function x402McpSettlement(
  outcome: McpPaidOutcome,
  charge: Charge,
  payer: string,
  idempotencyKey: string,
): Settlement {
  if (outcome.outcomeUnknownReason !== '') {
    throw settlementUnknown(
      `the paid MCP call's outcome is unknown (${clip(outcome.outcomeUnknownReason)})`,
    );
  }
  const response = settleResponseOf(outcome.paymentResponse);
  if (response?.success === false || (outcome.paymentNotTaken && response === undefined)) {
    const reason = typeof response?.errorReason === 'string' ? response.errorReason : 'none given';
    throw new SettlementError(
      SettlementOutcome.Rejected,
      `the MCP server did not take the x402 payment (reason: ${clip(reason)})`,
    );
  }
  if (response === undefined) {
    throw settlementUnknown('the paid MCP result carries no x402/payment-response');
  }
  const { transaction, network } = response;
  const paidBy = typeof response.payer === 'string' ? response.payer.toLowerCase() : '';
  if (
    response.success !== true ||
    typeof transaction !== 'string' ||
    !/^0x[0-9a-fA-F]{64}$/.test(transaction)
  ) {
    throw settlementUnknown('the x402/payment-response names no transaction');
  }
  if (network !== charge.network || paidBy !== payer.toLowerCase()) {
    throw settlementUnknown(
      `the x402/payment-response names ${clip(String(network))} and payer ${clip(paidBy)}, not the charge's ${charge.network} and this wallet's ${payer.toLowerCase()}`,
    );
  }
  return {
    protocol: charge.protocol,
    transaction: transaction.toLowerCase(),
    payer: paidBy,
    network,
    idempotencyKey,
    upstreamReceipt: outcome.paymentResponse,
  };
}

/** The settle response as JSON, or undefined when there is none; not JSON is unknown. */
function settleResponseOf(json: string): SettleResponse | undefined {
  if (json === '') return undefined;
  let parsed: unknown;
  try {
    parsed = JSON.parse(json);
  } catch {
    throw settlementUnknown('the x402/payment-response is not JSON');
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
    throw settlementUnknown('the x402/payment-response is not a JSON object');
  }
  return parsed;
}
