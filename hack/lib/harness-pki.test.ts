import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { X509Certificate } from 'node:crypto';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { harnessCertificateProblem } from '../../common/harness-identity';
import { ensureHarnessCa, ensureHarnessCertificate } from './harness-pki';

const certificateOf = async (path: string): Promise<X509Certificate> =>
  new X509Certificate(await readFile(path));

describe('development harness certificates', () => {
  let dir: string;

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'harness-pki-'));
  });

  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it("issues a namespace's serving certificate from the harness CA, and reuses both on the next run", async () => {
    const ca = await ensureHarnessCa(dir);
    const issued = await ensureHarnessCertificate(ca, 'team-a');
    const certificate = await certificateOf(issued.certPath);
    expect(harnessCertificateProblem(await readFile(issued.certPath, 'utf8'), 'team-a')).toBe(
      undefined,
    );
    expect(certificate.verify((await certificateOf(ca.certPath)).publicKey)).toBe(true);
    expect((await certificateOf(ca.certPath)).ca).toBe(true);

    const again = await ensureHarnessCertificate(await ensureHarnessCa(dir), 'team-a');
    expect((await certificateOf(again.certPath)).fingerprint256).toBe(certificate.fingerprint256);
  });

  it('issues again when the CA was made anew: a certificate of a lost CA would not verify', async () => {
    const before = await certificateOf(
      (await ensureHarnessCertificate(await ensureHarnessCa(dir), 'team-b')).certPath,
    );
    await rm(join(dir, 'harness-ca.key'));
    const ca = await ensureHarnessCa(dir);
    const after = await certificateOf((await ensureHarnessCertificate(ca, 'team-b')).certPath);
    expect(after.fingerprint256).not.toBe(before.fingerprint256);
    expect(after.verify((await certificateOf(ca.certPath)).publicKey)).toBe(true);
  });

  it('refuses, as the harness does, a certificate for another namespace or without server auth', async () => {
    const ca = await ensureHarnessCa(dir);
    const teamA = await readFile((await ensureHarnessCertificate(ca, 'team-a')).certPath, 'utf8');
    expect(harnessCertificateProblem(teamA, 'team-b')).toMatch(
      /^it names DNS:polychrome-harness\.team-a, not DNS:polychrome-harness\.team-b; issue the harness certificate of namespace team-b for that name$/,
    );
    const client = await ca.issue({
      name: 'client-only',
      commonName: 'polychrome-harness.team-a',
      dnsNames: ['polychrome-harness.team-a'],
      usage: 'client',
    });
    expect(harnessCertificateProblem(await readFile(client.certPath, 'utf8'), 'team-a')).toMatch(
      /does not allow server auth/,
    );
    expect(harnessCertificateProblem('not a certificate', 'team-a')).toMatch(
      /^not a PEM certificate/,
    );
  });
});
