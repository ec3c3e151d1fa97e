import {
  approvalKeyId,
  approvalSigningBytes,
  type ApprovalBinding,
} from '../../common/approval-bytes';
import type { ApprovalAnswer } from './turn-records';

/**
 * Checks approval answers against the pending call (docs/approvals.md, "What the harness
 * checks"). Pure: the ed25519 primitive is injected (`harness/crypto/node-ed25519.ts` in
 * production), so this file does no I/O and holds no key.
 */

/** Verifies an ed25519 signature over `message` with a raw 32-byte public key. */
export interface SignatureVerifier {
  verify(message: Uint8Array, signature: Uint8Array, publicKey: Uint8Array): boolean;
}

/** Signs with an ed25519 key the caller holds (the control plane; tests). */
export interface ApprovalSigner {
  readonly publicKey: Uint8Array;
  sign(message: Uint8Array): Uint8Array;
}

/** The call an answer must bind. */
export interface PendingApproval {
  readonly turnId: string;
  readonly requestId: string;
  readonly toolName: string;
  readonly argsSha256: Uint8Array;
}

/**
 * Where and when a live harness uses answers (docs/approvals.md, "What the harness
 * checks"). Given, only v2 answers for `conversation`, unexpired at `nowMs` and never used
 * before pass; absent (forensic replay of a recorded journal), the signature alone is
 * checked, in whichever format the answer was signed.
 */
export interface ApprovalUse {
  /** The uid of the conversation the harness serves this turn for. */
  readonly conversation: string;
  /** The time the call started (the machine takes no clock). */
  readonly nowMs: number;
  /** True when the harness has already used the answer with this single-use id. */
  isUsed(approvalId: string): boolean;
}

/**
 * The approval public keys (raw 32 bytes) a verifier trusts: one, or the current and the
 * next during a rotation (docs/operator.md, "Rotating the control plane's key").
 */
export type ApprovalKeys = Uint8Array | readonly Uint8Array[];

/** Result of {@link verifyApprovalAnswer}. */
export type ApprovalVerdict =
  | { readonly ok: true; readonly answer: ApprovalAnswer }
  | { readonly ok: false; readonly reason: string };

/**
 * Accepts `answer` only when it binds exactly `pending` and carries a valid signature by
 * `publicKey`. The signed bytes are rebuilt from the pending call's values, not the
 * answer's, so a field the answer misreports can only make verification fail.
 */
export function verifyApprovalAnswer(
  answer: ApprovalAnswer,
  pending: PendingApproval,
  verifier: SignatureVerifier,
  publicKeys: ApprovalKeys,
  use?: ApprovalUse,
): ApprovalVerdict {
  if (answer.turnId !== pending.turnId) {
    return reject(`answer is for turn ${answer.turnId}, not ${pending.turnId} (replayed)`);
  }
  if (answer.requestId !== pending.requestId) {
    return reject(`answer is for request ${answer.requestId}, not ${pending.requestId}`);
  }
  if (answer.toolName !== pending.toolName) {
    return reject(`answer approves tool ${answer.toolName}, not ${pending.toolName}`);
  }
  if (!bytesEqual(answer.argsSha256, pending.argsSha256)) {
    return reject('answer binds different arguments; new arguments need a new approval');
  }
  if (use !== undefined) {
    const refused = refusedUse(answer, use);
    if (refused !== undefined) return reject(refused);
  }
  const keys = publicKeys instanceof Uint8Array ? [publicKeys] : publicKeys;
  const publicKey = keys.find((key) => approvalKeyId(key) === answer.keyId);
  if (publicKey === undefined) {
    const ids = keys.map((key) => approvalKeyId(key)).join(' or ');
    return reject(`answer is signed by key ${answer.keyId}, not the approval key ${ids}`);
  }
  const message = approvalSigningBytes({
    ...pending,
    decision: answer.decision,
    ...(answer.scope === undefined ? {} : { scope: answer.scope }),
  });
  let valid: boolean;
  try {
    valid = verifier.verify(message, answer.signature, publicKey);
  } catch {
    // A malformed signature (wrong length) is a bad signature, not a crash of the turn.
    valid = false;
  }
  if (!valid) return reject('answer signature does not verify with the approval key (forged)');
  return { ok: true, answer };
}

/**
 * Signs a decision the way the control plane does: the signature and key id to put in
 * `approval_response`.
 */
export function signApproval(
  binding: ApprovalBinding,
  signer: ApprovalSigner,
): { keyId: string; signature: Uint8Array } {
  return {
    keyId: approvalKeyId(signer.publicKey),
    signature: signer.sign(approvalSigningBytes(binding)),
  };
}

/** Why a live harness may not use `answer` now, or undefined when it may. */
function refusedUse(answer: ApprovalAnswer, use: ApprovalUse): string | undefined {
  const { scope } = answer;
  if (scope === undefined) {
    return 'answer is in approval format v1, which binds no conversation, expiry or single use; answer the approval again so the control plane signs it in format v2';
  }
  if (scope.conversation !== use.conversation) {
    return `answer is for conversation ${scope.conversation}, not ${use.conversation} (replayed from another conversation)`;
  }
  if (scope.expiresAtMs <= use.nowMs) {
    return `answer ${scope.approvalId} expired at ${new Date(scope.expiresAtMs).toISOString()}; answer the approval again`;
  }
  if (use.isUsed(scope.approvalId)) {
    return `answer ${scope.approvalId} was already used (replayed); each approval runs its call once`;
  }
  return undefined;
}

function reject(reason: string): ApprovalVerdict {
  return { ok: false, reason };
}

function bytesEqual(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}
