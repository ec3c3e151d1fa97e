import { sha256 } from '@noble/hashes/sha2.js';
import { AppError } from './errors';

/**
 * The bytes the control plane's approval key signs and the harness verifies. Both planes
 * build them here so they cannot drift; docs/approvals.md specifies them for third parties.
 */

/** Domain prefix: a signature over these bytes can never be mistaken for a journal root's. */
export const APPROVAL_DOMAIN = 'polychrome/approval/v1';
/** Domain prefix of format v2, which also binds {@link ApprovalScope}. */
export const APPROVAL_DOMAIN_V2 = 'polychrome/approval/v2';

/** The decision an approval answer carries; the byte values match `ApprovalDecision` in events.proto. */
export const ApprovalDecision = {
  Approved: 'approved',
  Denied: 'denied',
} as const;
export type ApprovalDecision = (typeof ApprovalDecision)[keyof typeof ApprovalDecision];

/** The decision byte in the signed message. */
export const approvalDecisionByte: Readonly<Record<ApprovalDecision, number>> = {
  approved: 1,
  denied: 2,
};

/** What an approval signature binds. */
export interface ApprovalBinding {
  /** The approval request id (derived from turn id and tool call id). */
  readonly requestId: string;
  readonly toolName: string;
  /** SHA-256 of the canonical args JSON's UTF-8 bytes: exactly 32 bytes. */
  readonly argsSha256: Uint8Array;
  readonly decision: ApprovalDecision;
  readonly turnId: string;
  /**
   * Format v2: where, until when and how often the answer may be used. Absent: format v1
   * (journals written before v2; still verifiable, refused by a live harness).
   */
  readonly scope?: ApprovalScope;
}

/** What a v2 approval signature binds beyond the call. */
export interface ApprovalScope {
  /** The conversation's uid (metadata.uid): the answer is void in any other conversation. */
  readonly conversation: string;
  /** Unix ms after which the harness refuses the answer. */
  readonly expiresAtMs: number;
  /** Single-use id: the harness refuses an answer whose id it has already used. */
  readonly approvalId: string;
}

const encoder = new TextEncoder();
const MAX_U32 = 0xffff_ffff;

/**
 * Builds the signed message:
 * UTF-8 `polychrome/approval/v1` ‖ u32be len ‖ request id ‖ u32be len ‖ tool name ‖
 * 32-byte args SHA-256 ‖ decision byte (1 approved, 2 denied) ‖ u32be len ‖ turn id.
 * With a scope (v2) the domain is `polychrome/approval/v2` and the message goes on with
 * u32be len ‖ conversation uid ‖ u64be expiry (unix ms) ‖ u32be len ‖ approval id.
 * Lengths count UTF-8 bytes; the prefixes make the encoding injective, so no two
 * different bindings share bytes, and the domains keep the two formats apart.
 *
 * @throws AppError `invalid_argument` when `argsSha256` is not 32 bytes, or the scope's
 *   expiry is not a non-negative safe integer.
 */
export function approvalSigningBytes(binding: ApprovalBinding): Uint8Array {
  if (binding.argsSha256.length !== 32) {
    throw new AppError(
      'invalid_argument',
      `approval ${binding.requestId}: args SHA-256 has ${binding.argsSha256.length} bytes, want 32`,
      { details: { requestId: binding.requestId, length: binding.argsSha256.length } },
    );
  }
  const { scope } = binding;
  const parts = [
    encoder.encode(scope === undefined ? APPROVAL_DOMAIN : APPROVAL_DOMAIN_V2),
    lengthPrefixed(binding.requestId),
    lengthPrefixed(binding.toolName),
    binding.argsSha256,
    Uint8Array.of(approvalDecisionByte[binding.decision]),
    lengthPrefixed(binding.turnId),
    ...(scope === undefined
      ? []
      : [
          lengthPrefixed(scope.conversation),
          u64be(scope.expiresAtMs, binding.requestId),
          lengthPrefixed(scope.approvalId),
        ]),
  ];
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let offset = 0;
  for (const part of parts) {
    out.set(part, offset);
    offset += part.length;
  }
  return out;
}

/** SHA-256 of the UTF-8 bytes of canonical args JSON: the hash an approval binds. */
export function approvalArgsSha256(argsJson: string): Uint8Array {
  return sha256(encoder.encode(argsJson));
}

/**
 * Key id of an ed25519 public key: the first 16 bytes of its SHA-256, lowercase hex (the
 * same rule as the journal's signing key, docs/design.md "Integrity bytes").
 */
export function approvalKeyId(publicKey: Uint8Array): string {
  return Buffer.from(sha256(publicKey).subarray(0, 16)).toString('hex');
}

function u64be(value: number, requestId: string): Uint8Array {
  if (!Number.isSafeInteger(value) || value < 0) {
    throw new AppError(
      'invalid_argument',
      `approval ${requestId}: expiry ${value} is not a non-negative whole number of milliseconds`,
      { details: { requestId } },
    );
  }
  const out = new Uint8Array(8);
  new DataView(out.buffer).setBigUint64(0, BigInt(value), false);
  return out;
}

function lengthPrefixed(text: string): Uint8Array {
  const bytes = encoder.encode(text);
  if (bytes.length > MAX_U32) {
    throw new AppError('invalid_argument', 'approval field is longer than 2^32-1 bytes');
  }
  const out = new Uint8Array(4 + bytes.length);
  new DataView(out.buffer).setUint32(0, bytes.length, false);
  out.set(bytes, 4);
  return out;
}
