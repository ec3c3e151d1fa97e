import { describe, expect, it } from '@jest/globals';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DevCertificateAuthority } from '../hack/lib/pki';
import { caBundle } from './ca-bundle';

describe('caBundle (POLYCHROME_HARNESS_CA_FILE)', () => {
  it('takes a CA certificate, and refuses a leaf or no certificate with the variable named', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'ca-bundle-'));
    try {
      const ca = await DevCertificateAuthority.create(dir, 'ca', 'harness CA');
      const leaf = await ca.issue({ name: 'leaf', commonName: 'leaf', usage: 'server' });
      const caPem = await readFile(ca.certPath, 'utf8');
      const leafPem = await readFile(leaf.certPath, 'utf8');
      expect(caBundle(caPem, 'POLYCHROME_HARNESS_CA_FILE').toString('utf8')).toBe(caPem);
      expect(() => caBundle(leafPem, 'POLYCHROME_HARNESS_CA_FILE')).toThrow(
        /POLYCHROME_HARNESS_CA_FILE: names CN=leaf, which is not a CA certificate; give the CA that signs the harness certificates/,
      );
      expect(() => caBundle('token\n', 'POLYCHROME_HARNESS_CA_FILE')).toThrow(
        /POLYCHROME_HARNESS_CA_FILE: names a file that holds no PEM certificate/,
      );
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
