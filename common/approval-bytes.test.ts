import { describe, expect, it } from '@jest/globals';
import { ed25519 } from '@noble/curves/ed25519.js';
import {
  APPROVAL_DOMAIN,
  APPROVAL_DOMAIN_V2,
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

// The v2 vector in docs/approvals.md: the v1 binding plus a scope.
//   message = "polychrome/approval/v2" | the v1 fields as above
//             | 00000024 conversation uid | 0000019b76daa800 (expiry 1767225600000 ms)
//             | 00000006 "apv_01"
const CONVERSATION = '6b1f1c9e-2f4d-4c55-9a1e-0d3c7e2a9b10';
const MESSAGE_V2 =
  '706f6c796368726f6d652f617070726f76616c2f7632' +
  MESSAGE_APPROVED.slice(44) +
  '00000024' +
  Buffer.from(CONVERSATION).toString('hex') +
  '0000019b76daa800' +
  '00000006' +
  Buffer.from('apv_01').toString('hex');
const SIGNATURE_V2 =
  '3072041f87277e6f9390a98d95603f88dce6ae03f4dc3cf22f9bfaeee3c99e99' +
  '131c6beec682c0ec8c94e5a4e8fb166802e05b7be07c0d30d7468e2230b47204';
const scoped: ApprovalBinding = {
  ...binding,
  scope: { conversation: CONVERSATION, expiresAtMs: 1_767_225_600_000, approvalId: 'apv_01' },
};

describe('approvalSigningBytes, format v2', () => {
  it('matches the pinned v2 vector and its signature', () => {
    expect(hex(approvalSigningBytes(scoped))).toBe(MESSAGE_V2);
    expect(Buffer.from(APPROVAL_DOMAIN_V2).toString('hex')).toBe(MESSAGE_V2.slice(0, 44));
    expect(hex(ed25519.sign(fromHex(MESSAGE_V2), SEED))).toBe(SIGNATURE_V2);
  });

  it('never shares bytes with v1: a v1 signature does not verify as v2', () => {
    expect(
      ed25519.verify(
        fromHex(SIGNATURE_APPROVED),
        approvalSigningBytes(scoped),
        fromHex(PUBLIC_KEY),
      ),
    ).toBe(false);
  });

  it.each<[string, Partial<NonNullable<ApprovalBinding['scope']>>]>([
    ['conversation', { conversation: 'another-uid' }],
    ['expiry', { expiresAtMs: 1_767_225_600_001 }],
    ['approval id', { approvalId: 'apv_02' }],
  ])('changes when the %s changes', (_field, change) => {
    const changed = { ...scoped, scope: { ...scoped.scope!, ...change } };
    expect(hex(approvalSigningBytes(changed))).not.toBe(MESSAGE_V2);
  });

  it('rejects an expiry that is not a whole non-negative number of ms', () => {
    expect(() =>
      approvalSigningBytes({ ...scoped, scope: { ...scoped.scope!, expiresAtMs: 1.5 } }),
    ).toThrow('approval apr_0123: expiry 1.5 is not a non-negative whole number of milliseconds');
  });
});
