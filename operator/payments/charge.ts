import { createHash } from 'node:crypto';
import { AppError, ErrorCode } from '../../common/errors';

/**
 * The provider-neutral payment core (docs/payments.md). A `Charge` is what a 402 asks for,
 * in terms every protocol shares and a person can approve; the turn layer and the journal
 * see only charges and settlements, never a protocol's own shapes.
 */

/** The protocols Polychrome can pay, one adapter each (`PaymentProtocol`). */
export const PaymentProtocolName = { X402: 'x402', Mpp: 'mpp' } as const;
export type PaymentProtocolName = (typeof PaymentProtocolName)[keyof typeof PaymentProtocolName];

/** One payment a 402 asks for, parsed from its challenge. Every field is a string or a number the approval card shows as is. */
export interface Charge {
  readonly protocol: PaymentProtocolName;
  /** SHA-256 (hex) over the exact challenge bytes as received: the header value, unchanged. */
  readonly challengeDigest: string;
  /** The amount in the asset's base units, as decimal digits (never a float). */
  readonly amount: string;
  /** The asset (a token contract address, lower-case hex) or currency code. */
  readonly asset: string;
  /** The network, as CAIP-2 (`eip155:8453`). */
  readonly network: string;
  /** Who is paid (an address, lower-case hex). */
  readonly payee: string;
  /** The URL the request goes to (what the tool called). */
  readonly resourceUrl: string;
  /** When the challenge stops being payable (ISO 8601, UTC). */
  readonly expiresAt: string;
}

/**
 * How long past a charge's expiry an MPP credential the control plane signed may still be
 * valid: `mppx`'s `evm` client makes the credential of a challenge without `expires` valid
 * for five minutes from signing, and a charge is signed only before it expires.
 * mpp-settle.ts refuses to send a credential valid any longer.
 */
export const MPP_CREDENTIAL_SLACK_MS = 5 * 60_000;

/**
 * The last moment a payment authorization the control plane signed for `charge` can move
 * money, in ms since the epoch: x402's EIP-3009 `validBefore` is the charge's expiry
 * (x402-settle.ts); an MPP credential's is at most {@link MPP_CREDENTIAL_SLACK_MS} later
 * (mpp-settle.ts checks it before sending). Undefined for a protocol not known here.
 */
export function authorizationValidUntilMs(charge: {
  readonly protocol: string;
  readonly expiresAt: string;
}): number | undefined {
  const expiresMs = Date.parse(charge.expiresAt);
  if (Number.isNaN(expiresMs)) return undefined;
  switch (charge.protocol) {
    case PaymentProtocolName.X402:
      return expiresMs;
    case PaymentProtocolName.Mpp:
      return expiresMs + MPP_CREDENTIAL_SLACK_MS;
    default:
      return undefined;
  }
}

/**
 * A challenge the control plane refuses to turn into a charge: the message names the
 * protocol and what was wrong, `details.field` the part of the challenge at fault.
 */
export class ChallengeError extends AppError {
  override readonly name = 'ChallengeError';

  constructor(protocol: PaymentProtocolName, field: string, problem: string) {
    super(
      ErrorCode.InvalidArgument,
      `${protocol} payment challenge: ${field} ${problem}; the charge was not made`,
      { details: { protocol, field } },
    );
  }
}

/** SHA-256 (hex) of a challenge's exact bytes (the header value as received, UTF-8). */
export function challengeDigest(challenge: string): string {
  return createHash('sha256').update(challenge, 'utf8').digest('hex');
}

/** The largest challenge header the parsers read; a larger one is refused unread. */
export const MAX_CHALLENGE_BYTES = 16 * 1024;

/** The largest amount a charge may carry: a uint256, the EVM token amount's range. */
export const MAX_AMOUNT = (1n << 256n) - 1n;

/** Decimal digits of a positive integer amount no larger than `MAX_AMOUNT`, or a problem. */
export function amountProblem(value: unknown): string | undefined {
  if (typeof value !== 'string') return 'is not a string of decimal digits';
  if (!/^[0-9]{1,78}$/.test(value)) return `is not a whole number of base units ("${clip(value)}")`;
  if (/^0+$/.test(value)) return 'is zero';
  if (value.length > 1 && value.startsWith('0')) return `has leading zeros ("${clip(value)}")`;
  if (BigInt(value) > MAX_AMOUNT) return 'is larger than a uint256';
  return undefined;
}

/** True for a 0x-prefixed 20-byte hex address. */
export function isEvmAddress(value: unknown): value is string {
  return typeof value === 'string' && /^0x[0-9a-fA-F]{40}$/.test(value);
}

/** True for an EVM CAIP-2 network (`eip155:<chain id>`). */
export function isEvmNetwork(value: unknown): value is string {
  return typeof value === 'string' && /^eip155:[1-9][0-9]{0,17}$/.test(value);
}

/** A value cut to 40 characters for an error message (challenges are attacker-written). */
export function clip(value: string): string {
  const printable = value.replace(/[^\x20-\x7e]/g, '?');
  return printable.length > 40 ? `${printable.slice(0, 40)}...` : printable;
}
