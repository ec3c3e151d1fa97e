import { describe, expect, it } from '@jest/globals';
import { createPublicKey, generateKeyPairSync, verify } from 'node:crypto';
import { approvalKeyId, approvalSigningBytes } from '../../common/approval-bytes';
import { ApprovalSigner } from './approval-signer';

describe('ApprovalSigner', () => {
  const { privateKey } = generateKeyPairSync('ed25519');
  const pem = privateKey.export({ format: 'pem', type: 'pkcs8' }).toString();
  const binding = {
    requestId: 'apr_0123',
    toolName: 'refund',
    argsSha256: new Uint8Array(32).fill(7),
    decision: 'approved' as const,
    turnId: 'turn_abc',
  };

  it('signs the approval bytes so the public half verifies them, and only them', () => {
    const signer = ApprovalSigner.fromPem(pem);
    const signature = signer.sign(binding);
    const publicKey = createPublicKey(privateKey);
    expect(verify(null, approvalSigningBytes(binding), publicKey, signature)).toBe(true);
    const denied = approvalSigningBytes({ ...binding, decision: 'denied' });
    expect(verify(null, denied, publicKey, signature)).toBe(false);
    expect(signer.publicKey).toHaveLength(32);
    expect(signer.keyId).toBe(approvalKeyId(signer.publicKey));
  });

  it('signs format v2: the scope is bound, and each signature gets a fresh single-use id', () => {
    const signer = ApprovalSigner.fromPem(pem);
    const a = signer.signScoped(binding, 'uid-1', 5_000);
    const b = signer.signScoped(binding, 'uid-1', 5_000);
    const publicKey = createPublicKey(privateKey);
    expect(a.scope).toMatchObject({ conversation: 'uid-1', expiresAtMs: 5_000 });
    expect(a.scope.approvalId).toMatch(/^apv_[0-9a-f]{32}$/);
    expect(b.scope.approvalId).not.toBe(a.scope.approvalId);
    expect(verify(null, approvalSigningBytes(a.signed), publicKey, a.signature)).toBe(true);
    const other = { ...a.signed, scope: { ...a.scope, conversation: 'uid-2' } };
    expect(verify(null, approvalSigningBytes(other), publicKey, a.signature)).toBe(false);
    expect(verify(null, approvalSigningBytes(binding), publicKey, a.signature)).toBe(false);
  });

  it('refuses what is not an ed25519 private key, naming what to do', () => {
    expect(() => ApprovalSigner.fromPem('not a key', 'key.pem')).toThrow(
      /key.pem is not a PEM private key; generate one with openssl genpkey -algorithm ed25519/,
    );
    const rsa = generateKeyPairSync('rsa', { modulusLength: 1024 })
      .privateKey.export({ format: 'pem', type: 'pkcs8' })
      .toString();
    expect(() => ApprovalSigner.fromPem(rsa, 'rsa.pem')).toThrow(
      /rsa.pem is a rsa key; approvals need ed25519/,
    );
  });
});
