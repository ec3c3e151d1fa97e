import { describe, expect, it } from '@jest/globals';
import { ed25519 } from '@noble/curves/ed25519.js';
import {
  APPROVAL_DOMAIN,
  approvalArgsSha256,
  approvalKeyId,
  approvalSigningBytes,
  type ApprovalBinding,
} from './approval-bytes';

const hex = (bytes: Uint8Array): string => Buffer.from(bytes).toString('hex');
const fromHex = (text: string): Uint8Array => new Uint8Array(Buffer.from(text, 'hex'));

// The vector in docs/approvals.md. Recompute with nothing but the spec:
//   printf '%s' '{"amount_minor":500,"currency":"EUR","order":"A-17"}' | sha256sum
//   message = "polychrome/approval/v1" | 00000008 "apr_0123" | 0000000e "refund_payment"
//             | args sha256 | 01 | 00000008 "turn-é1" (é is two UTF-8 bytes)
//   key: ed25519 seed = 32 bytes of 0x07.
const ARGS_JSON = '{"amount_minor":500,"currency":"EUR","order":"A-17"}';
const ARGS_SHA256 = 'affe485ba903c106b55626ac4e91a7c297b5105add4fd6f5c5f1fae31638e04e';
const MESSAGE_APPROVED =
  '706f6c796368726f6d652f617070726f76616c2f7631' +
  '00000008' +
  '6170725f30313233' +
  '0000000e' +
  '726566756e645f7061796d656e74' +
  ARGS_SHA256 +
  '01' +
  '00000008' +
  '7475726e2dc3a931';
const SEED = new Uint8Array(32).fill(7);
const PUBLIC_KEY = 'ea4a6c63e29c520abef5507b132ec5f9954776aebebe7b92421eea691446d22c';
const KEY_ID = 'fe812c12f3ab4ce6ac5db69ac352f906';
const SIGNATURE_APPROVED =
  '25659a91b60ecc0a808cdda572596bfa91d5b8055fb39c257d762c0dcebd826f' +
  '5d4d7b16e36ca1b6f658500d242a494e329cd2903e115f8eee7d8974ec70e701';

const binding: ApprovalBinding = {
  requestId: 'apr_0123',
  toolName: 'refund_payment',
  argsSha256: fromHex(ARGS_SHA256),
  decision: 'approved',
  turnId: 'turn-é1',
};

describe('approvalSigningBytes', () => {
  it('matches the pinned vector', () => {
    expect(hex(approvalArgsSha256(ARGS_JSON))).toBe(ARGS_SHA256);
    expect(hex(approvalSigningBytes(binding))).toBe(MESSAGE_APPROVED);
    expect(Buffer.from(APPROVAL_DOMAIN).toString('hex')).toBe(MESSAGE_APPROVED.slice(0, 44));
  });

  it('pins the signature of the vector (ed25519 is deterministic)', () => {
    expect(hex(ed25519.getPublicKey(SEED))).toBe(PUBLIC_KEY);
    expect(approvalKeyId(fromHex(PUBLIC_KEY))).toBe(KEY_ID);
    expect(hex(ed25519.sign(fromHex(MESSAGE_APPROVED), SEED))).toBe(SIGNATURE_APPROVED);
  });

  it('encodes denied as decision byte 2 and changes nothing else', () => {
    const denied = hex(approvalSigningBytes({ ...binding, decision: 'denied' }));
    const at = MESSAGE_APPROVED.length - 2 * (4 + 8) - 2;
    expect(denied.slice(at, at + 2)).toBe('02');
    expect(denied.slice(0, at) + '01' + denied.slice(at + 2)).toBe(MESSAGE_APPROVED);
  });

  it.each<[string, Partial<ApprovalBinding>]>([
    ['request id', { requestId: 'apr_0124' }],
    ['tool name', { toolName: 'refund_payments' }],
    ['args hash', { argsSha256: approvalArgsSha256('{"amount_minor":501}') }],
    ['decision', { decision: 'denied' }],
    ['turn id', { turnId: 'turn-2' }],
  ])('changes when the %s changes', (_field, change) => {
    expect(hex(approvalSigningBytes({ ...binding, ...change }))).not.toBe(MESSAGE_APPROVED);
  });

  it('length prefixes keep field boundaries apart', () => {
    const a = approvalSigningBytes({ ...binding, requestId: 'ab', toolName: 'c' });
    const b = approvalSigningBytes({ ...binding, requestId: 'a', toolName: 'bc' });
    expect(hex(a)).not.toBe(hex(b));
  });

  it('rejects an args hash that is not 32 bytes', () => {
    expect(() => approvalSigningBytes({ ...binding, argsSha256: new Uint8Array(31) })).toThrow(
      'approval apr_0123: args SHA-256 has 31 bytes, want 32',
    );
  });
});
