import { describe, expect, it } from '@jest/globals';

import {
  certificateIdentityOf,
  CertificateRole,
  describeCertificateIdentity,
  isControlPlaneIdentity,
} from './certificate-identity';

const cert = (subject: Record<string, string | string[]>): unknown => ({
  subject,
  raw: Buffer.from('x'),
});

describe('certificateIdentityOf', () => {
  it.each([
    ['the control plane by CN', { CN: 'polychrome-control-plane' }, [CertificateRole.Writer]],
    ['a writer by O', { CN: 'other', O: 'polychrome:writer' }, [CertificateRole.Writer]],
    [
      'a writer by OU',
      { CN: 'other', O: 'acme', OU: 'polychrome:writer' },
      [CertificateRole.Writer],
    ],
    [
      'a verifier by O',
      { CN: 'polychrome-verifier', O: 'polychrome:verifier' },
      [CertificateRole.Verifier],
    ],
    [
      'both roles from repeated O',
      { CN: 'x', O: ['polychrome:verifier', 'polychrome:writer'] },
      [CertificateRole.Writer, CertificateRole.Verifier],
    ],
    ['no role', { CN: 'someone', O: 'polychrome:admin' }, []],
    ['no role for a look-alike CN', { CN: 'polychrome-control-plane-2' }, []],
  ])('reads %s', (_label, subject, roles) => {
    expect([...(certificateIdentityOf(cert(subject))?.roles ?? [])].sort()).toEqual(
      [...roles].sort(),
    );
  });

  // node:tls reports "no certificate" as an empty object.
  it.each([[undefined], [null], [{}], [{ subject: 'CN=x' }]])(
    'finds no identity in %p',
    (value) => {
      expect(certificateIdentityOf(value)).toBeUndefined();
    },
  );

  it('describes the subject for messages', () => {
    const identity = certificateIdentityOf(cert({ CN: 'a', O: ['b', 'c'], OU: 'd' }));
    expect(identity && describeCertificateIdentity(identity)).toBe('CN=a, O=b, O=c, OU=d');
  });
});

describe('isControlPlaneIdentity', () => {
  it.each([
    ['the control plane', { CN: 'polychrome-control-plane', O: 'polychrome:writer' }, true],
    ['a writer by O', { CN: 'other', O: 'polychrome:writer' }, true],
    ['the verifier', { CN: 'polychrome-verifier', O: 'polychrome:verifier' }, false],
    ['a harness', { CN: 'polychrome-harness' }, false],
    ['a look-alike CN', { CN: 'polychrome-control-plane ' }, false],
  ])('is %s: %p', (_label, subject, expected) => {
    expect(isControlPlaneIdentity(certificateIdentityOf(cert(subject)))).toBe(expected);
  });

  it('is false without a certificate', () => {
    expect(isControlPlaneIdentity(certificateIdentityOf({}))).toBe(false);
  });
});
