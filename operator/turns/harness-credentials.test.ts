import { describe, expect, it } from '@jest/globals';
import { generateKeyPairSync, verify } from 'node:crypto';
import { approvalSigningBytes } from '../../common/approval-bytes';
import {
  HARNESS_CREDENTIAL_AUDIENCE,
  verifyHarnessCredential,
} from '../../common/harness-credential';
import { ApprovalSigner } from './approval-signer';
import { HARNESS_CREDENTIAL_TTL_MS, HarnessCredentialMinter } from './harness-credentials';

const { privateKey, publicKey } = generateKeyPairSync('ed25519');
const pem = privateKey.export({ format: 'pem', type: 'pkcs8' }).toString();
const raw = new Uint8Array(ApprovalSigner.fromPem(pem).publicKey);
const nodeVerifier = {
  verify: (message: Uint8Array, signature: Uint8Array): boolean =>
    verify(null, message, publicKey, signature),
};

describe('HarnessCredentialMinter', () => {
  it('mints a short-lived credential bound to the conversation uid, which the public key verifies', () => {
    const minter = HarnessCredentialMinter.fromPem(pem, 'key', () => 1_000);
    const verdict = verifyHarnessCredential(
      minter.mint('uid-a', 'team-a'),
      [raw],
      nodeVerifier,
      1_001,
    );
    expect(verdict).toEqual({
      ok: true,
      claims: {
        aud: HARNESS_CREDENTIAL_AUDIENCE,
        conversation: 'uid-a',
        namespace: 'team-a',
        iat: 1_000,
        exp: 1_000 + HARNESS_CREDENTIAL_TTL_MS,
      },
    });
    const late = verifyHarnessCredential(
      minter.mint('uid-a', 'team-a'),
      [raw],
      nodeVerifier,
      1_000 + HARNESS_CREDENTIAL_TTL_MS,
    );
    expect(late.ok).toBe(false);
  });

  it('signs under its own domain: the signature is no approval signature, and no claim can be edited', () => {
    const credential = HarnessCredentialMinter.fromPem(pem, 'key', () => 1_000).mint(
      'uid-a',
      'team-a',
    );
    const [, body, sig] = credential.split('.');
    const signature = Buffer.from(sig ?? '', 'base64url');
    const asApproval = approvalSigningBytes({
      requestId: Buffer.from(body ?? '', 'base64url').toString(),
      toolName: '',
      argsSha256: new Uint8Array(32),
      decision: 'approved',
      turnId: '',
    });
    expect(verify(null, asApproval, publicKey, signature)).toBe(false);
    const edited = Buffer.from(
      Buffer.from(body ?? '', 'base64url')
        .toString()
        .replace('uid-a', 'uid-b'),
    ).toString('base64url');
    const forged = verifyHarnessCredential(`phc1.${edited}.${sig ?? ''}`, [raw], nodeVerifier, 1);
    expect(forged).toMatchObject({ ok: false, reason: expect.stringContaining('not signed') });
  });

  it('refuses a conversation without a uid, and a key that is not ed25519', () => {
    expect(() => HarnessCredentialMinter.fromPem(pem).mint('', 'team-a')).toThrow(
      'a harness credential needs the conversation uid',
    );
    const rsa = generateKeyPairSync('rsa', { modulusLength: 1024 })
      .privateKey.export({ format: 'pem', type: 'pkcs8' })
      .toString();
    expect(() => HarnessCredentialMinter.fromPem(rsa, 'rsa.pem')).toThrow(
      'rsa.pem is a rsa key; harness credentials need ed25519',
    );
  });
});
