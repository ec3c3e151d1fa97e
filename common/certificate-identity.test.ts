import { describe, expect, it } from '@jest/globals';

import {
  certificateIdentityOf,
  CertificateRole,
  describeCertificateIdentity,
  describeRoles,
  isControlPlaneReplica,
} from './certificate-identity';

const cert = (subject: Record<string, string | string[]>): unknown => ({
  subject,
  raw: Buffer.from('x'),
});

describe('certificateIdentityOf', () => {
  it.each([
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
    ['a repair tool by O', { CN: 'x', O: 'polychrome:repair' }, [CertificateRole.Repair]],
    [
      'a records admin by OU',
      { CN: 'x', OU: 'polychrome:records-admin' },
      [CertificateRole.RecordsAdmin],
    ],
    [
      'a replica by O',
      { CN: 'x', O: 'polychrome:control-plane-replica' },
      [CertificateRole.ControlPlaneReplica],
    ],
    [
      'the shipped control plane',
      {
        CN: 'polychrome-control-plane',
        O: ['polychrome:writer', 'polychrome:repair', 'polychrome:control-plane-replica'],
      },
      [CertificateRole.Writer, CertificateRole.Repair, CertificateRole.ControlPlaneReplica],
    ],
    [
      'both roles from repeated O',
      { CN: 'x', O: ['polychrome:verifier', 'polychrome:writer'] },
      [CertificateRole.Writer, CertificateRole.Verifier],
    ],
    // The CN names; it grants nothing.
    ['no role from the control plane CN alone', { CN: 'polychrome-control-plane' }, []],
    ['no role for an unknown role name', { CN: 'someone', O: 'polychrome:admin' }, []],
    ['no role from a role name in the CN', { CN: 'polychrome:writer' }, []],
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

  it('describes the subject and the roles for messages', () => {
    const identity = certificateIdentityOf(cert({ CN: 'a', O: ['b', 'c'], OU: 'd' }));
    expect(identity && describeCertificateIdentity(identity)).toBe('CN=a, O=b, O=c, OU=d');
    expect(describeRoles([])).toBe('no Polychrome role');
    expect(describeRoles(['polychrome:writer', 'polychrome:repair'])).toBe(
      'polychrome:repair, polychrome:writer',
    );
  });
});

describe('isControlPlaneReplica', () => {
  it.each([
    [
      'the shipped control plane',
      {
        CN: 'polychrome-control-plane',
        O: ['polychrome:writer', 'polychrome:repair', 'polychrome:control-plane-replica'],
      },
      true,
    ],
    ['a replica by OU', { CN: 'other', OU: 'polychrome:control-plane-replica' }, true],
    // No state-plane role implies the replica.
    ['a writer', { CN: 'polychrome-control-plane', O: 'polychrome:writer' }, false],
    ['a records admin', { CN: 'x', O: 'polychrome:records-admin' }, false],
    ['a repair tool', { CN: 'x', O: 'polychrome:repair' }, false],
    ['the verifier', { CN: 'polychrome-verifier', O: 'polychrome:verifier' }, false],
    ['the control plane CN alone', { CN: 'polychrome-control-plane' }, false],
    ['a harness', { CN: 'polychrome-harness' }, false],
    ['a look-alike role', { CN: 'x', O: 'polychrome:control-plane-replica ' }, false],
  ])('is %s: %p', (_label, subject, expected) => {
    expect(isControlPlaneReplica(certificateIdentityOf(cert(subject)))).toBe(expected);
  });

  it('is false without a certificate', () => {
    expect(isControlPlaneReplica(certificateIdentityOf({}))).toBe(false);
  });
});
