/**
 * The control plane's approval key: signs `approval_response`s (docs/approvals.md gives
 * the bytes) so the harness can check, before it runs an approved call, that the answer
 * came from the control plane and binds exactly that request, tool and arguments.
 */
import type { OutboundPaymentReceipt } from '../../proto/gen/polychrome/events/v1/events';
import { receiptSigningBytes } from '../../common/payment-receipt';
import { createPublicKey, randomBytes, sign, type KeyObject } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import {
  approvalKeyId,
  approvalSigningBytes,
  type ApprovalBinding,
  type ApprovalScope,
} from '../../common/approval-bytes';
import { AppError } from '../../common/errors';
import { ed25519PrivateKey } from './ed25519-private-key';

export class ApprovalSigner {
  /** First 16 bytes of SHA-256 of the public key, lowercase hex. */
  readonly keyId: string;
  /** The raw 32-byte ed25519 public key (what harness pods are given, as hex). */
  readonly publicKey: Uint8Array;

  private constructor(private readonly key: KeyObject) {
    const jwk = createPublicKey(key).export({ format: 'jwk' });
    if (jwk.x === undefined)
      throw new AppError('invalid_argument', 'approval key has no public half');
    this.publicKey = new Uint8Array(Buffer.from(jwk.x, 'base64url'));
    this.keyId = approvalKeyId(this.publicKey);
  }

  /**
   * Loads an ed25519 private key (PKCS#8 PEM, as `openssl genpkey -algorithm ed25519`
   * writes it).
   *
   * @throws AppError `invalid_argument` naming the file when it is unreadable or not an
   *   ed25519 private key.
   */
  static async fromFile(path: string): Promise<ApprovalSigner> {
    let pem: string;
    try {
      pem = await readFile(path, 'utf8');
    } catch (error) {
      throw new AppError('invalid_argument', `approval key file ${path} cannot be read`, {
        cause: error,
      });
    }
    return ApprovalSigner.fromPem(pem, path);
  }

  static fromPem(pem: string, source = 'approval key'): ApprovalSigner {
    const key = ed25519PrivateKey(pem, source, 'approvals');
    return new ApprovalSigner(key);
  }

  /**
   * Signs a payment receipt (common/payment-receipt.ts): the receipt with `keyId` and
   * `signature` filled in.
   */
  signReceipt(receipt: OutboundPaymentReceipt): OutboundPaymentReceipt {
    const signature = sign(null, receiptSigningBytes(receipt), this.key);
    return { ...receipt, keyId: this.keyId, signature };
  }

  /** The ed25519 signature over the binding's bytes. */
  sign(binding: ApprovalBinding): Uint8Array {
    return new Uint8Array(sign(null, approvalSigningBytes(binding), this.key));
  }

  /**
   * Signs `binding` in format v2 (docs/approvals.md): bound to `conversation` (its uid),
   * valid until `expiresAtMs`, with a fresh single-use id. The result carries the scope
   * so the batch records exactly what was signed.
   */
  signScoped(
    binding: Omit<ApprovalBinding, 'scope'>,
    conversation: string,
    expiresAtMs: number,
  ): ScopedApproval {
    const scope: ApprovalScope = { conversation, expiresAtMs, approvalId: newApprovalId() };
    const signed = { ...binding, scope };
    return { signed, scope, keyId: this.keyId, signature: this.sign(signed) };
  }
}

/** A v2 approval signature and the binding it covers. */
export interface ScopedApproval {
  readonly signed: ApprovalBinding & { readonly scope: ApprovalScope };
  readonly scope: ApprovalScope;
  readonly keyId: string;
  readonly signature: Uint8Array;
}

/** `apv_` and 128 random bits in hex: never reused, so the harness can refuse a replay. */
export function newApprovalId(): string {
  return `apv_${randomBytes(16).toString('hex')}`;
}
