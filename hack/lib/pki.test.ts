import { afterAll, describe, expect, it } from '@jest/globals';
import { X509Certificate } from 'node:crypto';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DevCertificateAuthority } from './pki';

describe('DevCertificateAuthority', () => {
  const dirs: string[] = [];
  const tempDir = async (): Promise<string> => {
    const dir = await mkdtemp(join(tmpdir(), 'pki-test-'));
    dirs.push(dir);
    return dir;
  };
  afterAll(async () => {
    await Promise.all(dirs.map((d) => rm(d, { recursive: true, force: true })));
  });

  it('issues a client certificate whose subject carries the user and groups', async () => {
    const ca = await DevCertificateAuthority.create(await tempDir(), 'ca', 'test-ca');
    const files = await ca.issue({
      name: 'op',
      commonName: 'system:serviceaccount:polychrome-system:polychrome-control-plane',
      organizations: ['system:serviceaccounts', 'polychrome'],
      usage: 'client',
    });
    const caCert = new X509Certificate(await readFile(ca.certPath));
    const cert = new X509Certificate(await readFile(files.certPath));
    expect(caCert.ca).toBe(true);
    expect(cert.ca).toBe(false);
    expect(cert.verify(caCert.publicKey)).toBe(true);
    expect(cert.checkIssued(caCert)).toBe(true);
    expect(cert.subject.split('\n')).toEqual([
      'CN=system:serviceaccount:polychrome-system:polychrome-control-plane',
      'O=system:serviceaccounts',
      'O=polychrome',
    ]);
    expect(cert.keyUsage).toEqual(['1.3.6.1.5.5.7.3.2']); // clientAuth only
  });

  it('issues a serving certificate for the names and addresses asked', async () => {
    const ca = await DevCertificateAuthority.create(await tempDir(), 'ca', 'test-ca');
    const files = await ca.issue({
      name: 'srv',
      commonName: 'state',
      dnsNames: ['localhost', 'polychrome-state'],
      ipAddresses: ['127.0.0.1'],
      usage: 'server',
    });
    const cert = new X509Certificate(await readFile(files.certPath));
    expect(cert.subjectAltName).toBe('DNS:localhost, DNS:polychrome-state, IP Address:127.0.0.1');
    expect(cert.checkHost('polychrome-state')).toBe('polychrome-state');
    expect(cert.checkIP('127.0.0.1')).toBe('127.0.0.1');
    expect(cert.checkHost('elsewhere.example')).toBeUndefined();
    // A certificate from another CA must not pass as this CA's.
    const other = await DevCertificateAuthority.create(await tempDir(), 'ca', 'other-ca');
    expect(cert.checkIssued(new X509Certificate(await readFile(other.certPath)))).toBe(false);
  });
});
