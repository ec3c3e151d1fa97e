import { Credential } from 'mppx';
import { clip, type Charge } from './charge';
import { parseMppMcpChallenge } from './mpp-challenge';
import { checkBound, signMppCredential, type TokenDomain } from './mpp-settle';
import { refuseIfExpired } from './send-paid';
import {
  SettlementError,
  SettlementOutcome,
  settlementUnknown,
  type McpPaidOutcome,
  type SettleInput,
  type Settlement,
} from './settlement';

/**
 * MPP over MCP (draft-httpauth-payment's MCP binding; docs/payments.md, "A paid MCP tool"):
 * a paid tool answers its call with a JSON-RPC error -32042 whose `data` holds the
 * challenges (or a result carrying them in `_meta["org.paymentauth/payment-required"]`),
 * and is called again with the credential object in `_meta["org.paymentauth/credential"]`;
 * its paid result carries the receipt in `_meta["org.paymentauth/receipt"]`.
 *
 * The MCP session lives in the sandbox, so the control plane does not send the paid call:
 * it signs the credential here (the key never leaves it) and the harness carries it. The
 * credential's EIP-3009 authorization names the payee, the amount and the token, is valid
 * no longer than the charge allows (mpp-settle.ts `signMppCredential`), and its nonce is
 * derived from the challenge, so however often it is sent the token moves money once.
 */

/** The payment-required object relayed for an MCP tool, when it is MPP's: itself. */
export function mppMcpChallengeIn(paymentRequired: string): string | undefined {
  try {
    const data = JSON.parse(paymentRequired) as { challenges?: unknown } | null;
    return Array.isArray(data?.challenges) ? paymentRequired : undefined;
  } catch {
    return undefined;
  }
}

/** Signs the credential of an approved MCP charge: mppx's credential object, as JSON. */
export async function authorizeMppMcp(
  input: Omit<SettleInput, 'request'> & { readonly tokenDomain: TokenDomain },
): Promise<string> {
  const { charge, challenge, wallet } = input;
  const now = (input.options?.now ?? (() => new Date()))();
  const { header } = checkBound(charge, challenge, charge.resourceUrl, now, parseMppMcpChallenge);
  refuseIfExpired(charge.expiresAt, now);
  const { serialized } = await signMppCredential(header, wallet, input.tokenDomain, charge);
  return JSON.stringify(Credential.deserialize(serialized));
}

/** An MPP receipt as the MCP transport carries it, as far as it is read. */
interface McpReceipt {
  readonly status?: unknown;
  readonly reference?: unknown;
  readonly challengeId?: unknown;
}

/**
 * What the paid MCP call settled, from the result the harness relayed, or a
 * `SettlementError` saying whether money may have moved:
 *
 * - the call's outcome unknown (its transport broke after it was sent): `unknown`;
 * - the server asked for payment again, or refused the call before running it: it took
 *   no payment, `rejected` (with the problem it gave, when it gave one);
 * - no receipt, one that is not a JSON object, not `success`, without a transaction, or
 *   for another challenge than the one approved: `unknown` (the server may have settled;
 *   the turn is quarantined naming the charge, never paid again).
 *
 * An MPP receipt does not name the payer: the payer is the wallet that signed.
 */
export function mppMcpSettlement(
  outcome: McpPaidOutcome,
  charge: Charge,
  payer: string,
  idempotencyKey: string,
  challenge: string,
): Settlement {
  if (outcome.outcomeUnknownReason !== '') {
    throw settlementUnknown(
      `the paid MCP call's outcome is unknown (${clip(outcome.outcomeUnknownReason)})`,
    );
  }
  if (outcome.paymentNotTaken) {
    const problem = objectOf(outcome.paymentResponse) as { detail?: unknown; title?: unknown };
    const reason = [problem?.detail, problem?.title].find((v) => typeof v === 'string');
    throw new SettlementError(
      SettlementOutcome.Rejected,
      `the MCP server did not take the MPP payment (reason: ${clip(reason ?? 'none given')})`,
    );
  }
  const receipt = objectOf(outcome.paymentResponse) as McpReceipt | undefined;
  if (receipt === undefined) {
    throw settlementUnknown('the paid MCP result carries no org.paymentauth/receipt object');
  }
  const { reference } = receipt;
  if (
    receipt.status !== 'success' ||
    typeof reference !== 'string' ||
    !/^0x[0-9a-fA-F]{64}$/.test(reference)
  ) {
    throw settlementUnknown('the MPP receipt is not a success naming a transaction');
  }
  let approved: string;
  try {
    approved = parseMppMcpChallenge(challenge, charge.resourceUrl, new Date(0)).id;
  } catch {
    // The recorded challenge parsed when it was charged; if it no longer does, fail closed.
    throw settlementUnknown('the approved MPP challenge cannot be read to check the receipt');
  }
  if (receipt.challengeId !== approved) {
    throw settlementUnknown(
      `the MPP receipt is for challenge ${clip(String(receipt.challengeId))}, not the approved ${clip(approved)}`,
    );
  }
  return {
    protocol: charge.protocol,
    transaction: reference.toLowerCase(),
    payer: payer.toLowerCase(),
    network: charge.network,
    idempotencyKey,
    upstreamReceipt: outcome.paymentResponse,
  };
}

/** A JSON object, or undefined (not JSON, not an object, empty). */
function objectOf(json: string): Record<string, unknown> | undefined {
  try {
    const value: unknown = JSON.parse(json);
    return typeof value === 'object' && value !== null && !Array.isArray(value)
      ? (value as Record<string, unknown>)
      : undefined;
  } catch {
    return undefined;
  }
}
