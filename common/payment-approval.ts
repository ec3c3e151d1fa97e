import type { PaymentCharge } from '../proto/gen/polychrome/events/v1/events';
import { canonicalJson } from './canonical-json';

/**
 * A paid call in a turn (docs/payments.md, "A paid call in a turn"): what the turn machine
 * in the harness and the control plane's checks both read of a committed `payment_charge`,
 * and the one rule for what a person approves when they approve a payment. The harness
 * builds the approval request from the charge by this rule; the control plane commits it
 * only when it is exactly this, so the signed answer binds the charge the control plane
 * parsed, its challenge digest included.
 */

/**
 * The built-in tool whose 402s the control plane pays (harness/tools/fetch-tool.ts): the
 * harness offers it by this name. The other paid calls are MCP servers' tools, paid over
 * x402's MCP transport ({@link mcpResourceUrl}).
 */
export const FETCH_TOOL = 'fetch';

/**
 * The resource a paid MCP tool call is charged for, `mcp://<server>/<tool>` of the call
 * `<server>/<tool>` (each part percent-encoded), or undefined for a name that is not an
 * MCP server's tool. The harness sends it with the challenge and the control plane derives
 * it again from the committed call, so the card names the call the journal holds.
 */
export function mcpResourceUrl(toolName: string): string | undefined {
  const slash = toolName.indexOf('/');
  if (slash <= 0 || slash === toolName.length - 1 || toolName.startsWith('__')) return undefined;
  const server = encodeURIComponent(toolName.slice(0, slash));
  return `mcp://${server}/${encodeURIComponent(toolName.slice(slash + 1))}`;
}

/** True for a charge's resource that is an MCP tool's ({@link mcpResourceUrl}). */
export function isMcpResource(resourceUrl: string): boolean {
  return resourceUrl.startsWith('mcp://');
}

/** The reserved tool name a payment's approval request and answer carry. */
export const PAYMENT_APPROVAL_TOOL = '__payment';

/** A committed charge, as the turn reads it (events.proto `PaymentCharge`). */
export interface ChargeFacts {
  readonly turnId: string;
  readonly toolCallId: string;
  /** The delegation thread whose tool met the 402 ('' for the turn's own agent). */
  readonly thread: string;
  readonly protocol: string;
  /** Lower-case hex SHA-256 of the challenge as received. */
  readonly challengeSha256: string;
  /** Base units of the asset, decimal digits. */
  readonly amount: string;
  readonly asset: string;
  /** CAIP-2. */
  readonly network: string;
  readonly payee: string;
  readonly resourceUrl: string;
  /** RFC 3339, UTC. */
  readonly expiresAt: string;
  readonly idempotencyKey: string;
  /** The approval the charge waits for. */
  readonly approvalRequestId: string;
}

/**
 * The approval's `args_json`: canonical JSON of exactly the fields the card shows. Any
 * other amount, asset, network, payee, resource, expiry or challenge is another digest,
 * so another approval.
 */
export function paymentApprovalArgsJson(charge: ChargeFacts): string {
  return canonicalJson({
    amount: charge.amount,
    asset: charge.asset,
    challengeSha256: charge.challengeSha256,
    expiresAt: charge.expiresAt,
    network: charge.network,
    payee: charge.payee,
    protocol: charge.protocol,
    resourceUrl: charge.resourceUrl,
  });
}

/** The approval request's reason: what the person is asked, in one line. */
export function paymentApprovalReason(charge: ChargeFacts, toolName: string): string {
  return `${toolName} asks to pay ${charge.amount} base units of ${charge.asset} on ${charge.network} to ${charge.payee} for ${charge.resourceUrl} (${charge.protocol}; payable until ${charge.expiresAt}).`;
}

/** A `payment_charge` payload as the turn reads it. */
export function chargeFactsOf(charge: PaymentCharge): ChargeFacts {
  return {
    turnId: charge.turnId,
    toolCallId: charge.toolCallId,
    thread: charge.thread,
    protocol: charge.protocol,
    challengeSha256: Buffer.from(charge.challengeSha256).toString('hex'),
    amount: charge.amount,
    asset: charge.asset,
    network: charge.network,
    payee: charge.payee,
    resourceUrl: charge.resourceUrl,
    expiresAt: charge.expiresAt,
    idempotencyKey: charge.idempotencyKey,
    approvalRequestId: charge.approvalRequestId,
  };
}

/**
 * The `payment_charge` fields a turn reads, from its facts (the raw challenge and the
 * legacy fields left empty): what a harness test's `TurnStart` carries.
 */
export function chargeProtoOf(facts: ChargeFacts): PaymentCharge {
  return {
    turnId: facts.turnId,
    toolCallId: facts.toolCallId,
    currency: '',
    amountMinor: 0,
    payee: facts.payee,
    approvalRequestId: facts.approvalRequestId,
    protocol: facts.protocol,
    challengeSha256: Buffer.from(facts.challengeSha256, 'hex'),
    amount: facts.amount,
    asset: facts.asset,
    network: facts.network,
    resourceUrl: facts.resourceUrl,
    expiresAt: facts.expiresAt,
    idempotencyKey: facts.idempotencyKey,
    challenge: '',
    thread: facts.thread,
  };
}
