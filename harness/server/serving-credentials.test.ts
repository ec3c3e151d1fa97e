import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Server } from '@grpc/grpc-js';
import { X509Certificate } from 'node:crypto';
import { copyFile, mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect } from 'node:tls';
import pino from 'pino';

import { harnessServerName } from '../../common/harness-identity';
import { CertUsage, DevCertificateAuthority, type CertFiles } from '../../hack/lib/pki';
import { harnessServerCredentials, loadHarnessCertificate } from './serving-credentials';

const logger = pino({ level: 'silent' });

/** What a TLS client that trusts `caPem` and checks for `team-a`'s name sees at `port`. */
async function served(port: number, caPem: string): Promise<string> {
  return await new Promise((resolve, reject) => {
    const socket = connect(
      {
        host: '127.0.0.1',
        port,
        ca: caPem,
        servername: harnessServerName('team-a'),
        ALPNProtocols: ['h2'],
      },
      () => {
        const fingerprint = socket.getPeerX509Certificate()?.fingerprint256 ?? '';
        socket.end();
        resolve(fingerprint);
      },
    );
    socket.once('error', reject);
  });
}

describe("the harness's serving certificate", () => {
  let dir: string;
  let ca: DevCertificateAuthority;
  let first: CertFiles;
  let renewed: CertFiles;
  let otherNamespace: CertFiles;
  let mounted: CertFiles;

  const issue = (name: string, namespace: string): Promise<CertFiles> =>
    ca.issue({
      name,
      commonName: harnessServerName(namespace),
      dnsNames: [harnessServerName(namespace)],
      usage: CertUsage.Server,
    });
  const mount = async (files: CertFiles): Promise<void> => {
    await copyFile(files.certPath, mounted.certPath);
    await copyFile(files.keyPath, mounted.keyPath);
  };
  const fingerprintOf = async (files: CertFiles): Promise<string> =>
    new X509Certificate(await readFile(files.certPath)).fingerprint256;

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'harness-serving-'));
    ca = await DevCertificateAuthority.create(dir, 'ca', 'harness-serving-test-ca');
    first = await issue('first', 'team-a');
    renewed = await issue('renewed', 'team-a');
    otherNamespace = await issue('other', 'team-b');
    mounted = { certPath: join(dir, 'tls.crt'), keyPath: join(dir, 'tls.key') };
  });

  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it("refuses at start a certificate that does not name the pod's namespace, saying what to mount", async () => {
    await mount(otherNamespace);
    await expect(
      loadHarnessCertificate({ ...mounted, namespace: 'team-a', logger }),
    ).rejects.toThrow(
      /harness's serving certificate .*tls\.crt and key .*tls\.key are not usable \(it names DNS:polychrome-harness\.team-b, not DNS:polychrome-harness\.team-a.*\); mount the Secret polychrome-harness-tls of namespace team-a/,
    );
  });

  it('presents a renewed certificate to new connections without a restart, and keeps the one in use when the new files name another namespace', async () => {
    await mount(first);
    const certificate = await loadHarnessCertificate({
      ...mounted,
      namespace: 'team-a',
      logger,
      intervalMs: 3_600_000,
    });
    const server = new Server();
    const port = await new Promise<number>((resolve, reject) => {
      server.bindAsync('127.0.0.1:0', harnessServerCredentials(certificate), (error, bound) =>
        error === null ? resolve(bound) : reject(error),
      );
    });
    const caPem = await readFile(ca.certPath, 'utf8');
    try {
      expect(await served(port, caPem)).toBe(await fingerprintOf(first));

      await mount(renewed);
      expect(await certificate.check()).toBe(true);
      expect(await served(port, caPem)).toBe(await fingerprintOf(renewed));

      // Another namespace's pair is never taken into use: the renewed one stays.
      await mount(otherNamespace);
      expect(await certificate.check()).toBe(false);
      expect(await served(port, caPem)).toBe(await fingerprintOf(renewed));
    } finally {
      server.forceShutdown();
      certificate.stop();
    }
  });
});
