import { execFileSync } from 'node:child_process';
import { mkdtemp, readFile, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';

import { loadRecordsKey } from '../../state/records/records-key';
import { loadSigningKey } from '../../state/store/signing-key';
import { devCliEnv, devStateEnv, ensureDevCerts, type DevCerts } from './dev-certs';
import { CertUsage, DevCertificateAuthority } from './pki';

function openssl(args: readonly string[]): string {
  return execFileSync('openssl', args, { encoding: 'utf8' });
}

let dir: string;
let certs: DevCerts;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'polychrome-dev-certs-'));
  certs = await ensureDevCerts(join(dir, 'pki'));
}, 60_000);

afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe('ensureDevCerts', () => {
  it('issues a server certificate for every name the state plane is dialled by', () => {
    const text = openssl([
      'x509',
      '-in',
      certs.server.certPath,
      '-noout',
      '-ext',
      'subjectAltName,extendedKeyUsage',
    ]);
    for (const name of [
      'localhost',
      'polychrome-state',
      'polychrome-state.polychrome-system.svc',
    ]) {
      expect(text).toContain(`DNS:${name}`);
    }
    expect(text).toContain('IP Address:127.0.0.1');
    expect(text).toContain('TLS Web Server Authentication');
  });

  it.each([
    [
      'controlPlane',
      'CN = polychrome-control-plane, O = polychrome:writer, O = polychrome:repair, ' +
        'O = polychrome:erase, O = polychrome:retire, O = polychrome:control-plane-replica',
    ],
    ['verifier', 'CN = polychrome-verifier, O = polychrome:verifier'],
    ['recordsAdmin', 'CN = polychrome-records-admin, O = polychrome:records-admin'],
    ['backup', 'CN = polychrome-backup, O = polychrome:backup'],
  ] as const)('issues the %s client identity, signed by the dev CA', (identity, subject) => {
    const files = certs[identity];
    expect(openssl(['x509', '-in', files.certPath, '-noout', '-subject'])).toBe(
      `subject=${subject}\n`,
    );
    expect(
      openssl(['verify', '-CAfile', certs.ca.certPath, '-purpose', 'sslclient', files.certPath]),
    ).toBe(`${files.certPath}: OK\n`);
  });

  it('makes the control-plane certificate a server certificate too, for the peer listener', () => {
    expect(
      openssl([
        'verify',
        '-CAfile',
        certs.ca.certPath,
        '-purpose',
        'sslserver',
        certs.controlPlane.certPath,
      ]),
    ).toBe(`${certs.controlPlane.certPath}: OK\n`);
    expect(() =>
      execFileSync(
        'openssl',
        ['verify', '-CAfile', certs.ca.certPath, '-purpose', 'sslserver', certs.verifier.certPath],
        { stdio: 'pipe' },
      ),
    ).toThrow();
  });

  it('issues the control-plane certificate again when an older run made it client-only', async () => {
    const copy = await ensureDevCerts(join(dir, 'client-only'));
    const ca = DevCertificateAuthority.open(copy.dir, 'ca');
    await ca.issue({
      name: 'control-plane',
      commonName: 'polychrome-control-plane',
      organizations: ['polychrome:writer'],
      usage: CertUsage.Client,
    });
    const clientOnly = await readFile(copy.controlPlane.certPath);
    const again = await ensureDevCerts(copy.dir);
    expect(await readFile(again.controlPlane.certPath)).not.toEqual(clientOnly);
    expect(
      openssl(['x509', '-in', again.controlPlane.certPath, '-noout', '-ext', 'extendedKeyUsage']),
    ).toContain('TLS Web Server Authentication');
  });

  it('issues the control-plane certificate again when an older run made it without its roles', async () => {
    const copy = await ensureDevCerts(join(dir, 'writer-only'));
    await DevCertificateAuthority.open(copy.dir, 'ca').issue({
      name: 'control-plane',
      commonName: 'polychrome-control-plane',
      organizations: ['polychrome:writer'],
      usage: CertUsage.Both,
    });
    const writerOnly = await readFile(copy.controlPlane.certPath);
    const again = await ensureDevCerts(copy.dir);
    expect(await readFile(again.controlPlane.certPath)).not.toEqual(writerOnly);
    expect(openssl(['x509', '-in', again.controlPlane.certPath, '-noout', '-subject'])).toContain(
      'O = polychrome:control-plane-replica',
    );
  });

  it('writes a signing key the state plane loads', async () => {
    const key = await loadSigningKey(certs.signingKey);
    expect(key.keyId).toMatch(/^[0-9a-f]{32}$/);
  });

  it('writes a records key the state plane loads, readable by its owner only', async () => {
    const key = await loadRecordsKey(certs.recordsKey);
    expect(key.keyId).toMatch(/^[0-9a-f]{16}$/);
    expect((await stat(certs.recordsKey)).mode & 0o777).toBe(0o600);
  });

  it('reuses existing files on a second run', async () => {
    const before = await Promise.all(
      [
        certs.ca.certPath,
        certs.server.certPath,
        certs.verifier.keyPath,
        certs.signingKey,
        certs.recordsKey,
      ].map((p) => readFile(p)),
    );
    const again = await ensureDevCerts(certs.dir);
    expect(again).toEqual(certs);
    const after = await Promise.all(
      [
        certs.ca.certPath,
        certs.server.certPath,
        certs.verifier.keyPath,
        certs.signingKey,
        certs.recordsKey,
      ].map((p) => readFile(p)),
    );
    expect(after).toEqual(before);
  });

  it('issues every certificate again when the CA is gone, so they chain to the new one', async () => {
    const copy = await ensureDevCerts(join(dir, 'second'));
    const oldServer = await readFile(copy.server.certPath);
    await rm(copy.ca.certPath);
    const renewed = await ensureDevCerts(copy.dir);
    expect(await readFile(renewed.server.certPath)).not.toEqual(oldServer);
    expect(openssl(['verify', '-CAfile', renewed.ca.certPath, renewed.server.certPath])).toBe(
      `${renewed.server.certPath}: OK\n`,
    );
  });

  it('names the files in the environments of the state plane and the CLI', () => {
    expect(devStateEnv(certs, 'data')).toEqual({
      STATE_TLS_CA_FILE: certs.ca.certPath,
      STATE_TLS_CERT_FILE: certs.server.certPath,
      STATE_TLS_KEY_FILE: certs.server.keyPath,
      STATE_SIGNING_KEY_FILE: certs.signingKey,
      STATE_DATA_DIR: 'data',
      STATE_RECORDS_KEY_FILE: certs.recordsKey,
    });
    expect(devCliEnv(certs, 'localhost:7443')).toMatchObject({
      POLYCHROME_STATE_CERT: certs.verifier.certPath,
    });
  });
});
