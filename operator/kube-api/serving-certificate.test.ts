import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { X509Certificate } from 'node:crypto';
import { copyFile, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect } from 'node:tls';
import pino from 'pino';

import { DevCertificateAuthority, type CertFiles } from '../../hack/lib/pki';
import { startApi } from '../../test/support/api-fixtures';
import { KubeDoor } from './kube-door';
import { ServingCertificate } from '../../common/serving-certificate';

/** The certificate a TLS server at 127.0.0.1:`port` presents to a new connection. */
async function servedFingerprint(port: number): Promise<string> {
  return await new Promise((resolve, reject) => {
    const socket = connect({ host: '127.0.0.1', port, rejectUnauthorized: false }, () => {
      const fingerprint = socket.getPeerX509Certificate()?.fingerprint256 ?? '';
      socket.end();
      resolve(fingerprint);
    });
    socket.once('error', reject);
  });
}

/** What the door names its pair in messages, as operator/main.ts does. */
const DOOR = { purpose: "the Kubernetes door's serving certificate", remedy: 'check the Secret' };

const fingerprintOf = async (files: CertFiles): Promise<string> =>
  new X509Certificate(await readFile(files.certPath)).fingerprint256;

describe("the Kubernetes door's serving certificate, read again while running", () => {
  let dir: string;
  let ca: DevCertificateAuthority;
  let first: CertFiles;
  let renewed: CertFiles;
  /** The files the door reads, as the mounted Secret. */
  let mounted: CertFiles;
  const warnings: string[] = [];
  const logger = pino(
    { level: 'info' },
    {
      write(line: string) {
        const parsed = JSON.parse(line) as { level: number; msg: string };
        if (parsed.level === 40) warnings.push(parsed.msg);
      },
    },
  );

  const mount = async (cert: CertFiles, key: CertFiles = cert): Promise<void> => {
    await copyFile(cert.certPath, mounted.certPath);
    await copyFile(key.keyPath, mounted.keyPath);
  };

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'serving-cert-'));
    ca = await DevCertificateAuthority.create(dir, 'ca', 'serving-cert-test-ca');
    const issue = (name: string): Promise<CertFiles> =>
      ca.issue({
        name,
        commonName: 'polychrome-kube-api',
        dnsNames: ['localhost'],
        usage: 'server',
      });
    first = await issue('first');
    renewed = await issue('renewed');
    mounted = { certPath: join(dir, 'tls.crt'), keyPath: join(dir, 'tls.key') };
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('takes a renewed pair, keeps the pair in use when a new one does not load, and refuses a bad pair at start', async () => {
    await mount(first);
    const serving = await ServingCertificate.load({ ...mounted, logger, ...DOOR });
    const seen: string[] = [];
    serving.onChange((pair) => seen.push(new X509Certificate(pair.cert).fingerprint256));
    expect(await serving.check()).toBe(false); // unchanged

    await mount(renewed);
    expect(await serving.check()).toBe(true);
    expect(seen).toEqual([await fingerprintOf(renewed)]);

    // Halfway through a swap: the first certificate with the renewed key.
    await mount(first, renewed);
    expect(await serving.check()).toBe(false);
    expect(new X509Certificate(serving.pair.cert).fingerprint256).toBe(
      await fingerprintOf(renewed),
    );
    expect(warnings).toContain(
      "the Kubernetes door's serving certificate: the new pair is not usable; keeping the one in use",
    );

    await writeFile(mounted.keyPath, 'not a key');
    expect(await serving.check()).toBe(false);
    expect(seen).toHaveLength(1);

    await expect(ServingCertificate.load({ ...mounted, logger, ...DOOR })).rejects.toThrow(
      /the Kubernetes door's serving certificate .*tls\.crt and key .*tls\.key are not usable \(.*\); check the Secret/,
    );
    serving.stop();
  });

  it('serves the renewed certificate to new connections on the door, without a restart', async () => {
    await mount(first);
    const serving = await ServingCertificate.load({ ...mounted, logger, ...DOOR });
    const caPem = await readFile(ca.certPath, 'utf8');
    const door = new KubeDoor({
      ports: {
        readAuthenticationConfig: () =>
          Promise.resolve({
            'requestheader-client-ca-file': caPem,
            'requestheader-username-headers': '["X-Remote-User"]',
          }),
        review: () => Promise.resolve({ allowed: false, reason: 'not in this test' }),
        conversationUid: () => undefined,
      },
      logger: pino({ level: 'silent' }),
    });
    const api = await startApi({
      kube: {
        host: '127.0.0.1',
        port: 0,
        ...serving.pair,
        onCertificateChange: (listener) => serving.onChange(listener),
        door,
      },
    });
    try {
      const port = api.server.kubeAddress().port;
      expect(await servedFingerprint(port)).toBe(await fingerprintOf(first));
      await mount(renewed);
      expect(await serving.check()).toBe(true);
      expect(await servedFingerprint(port)).toBe(await fingerprintOf(renewed));
    } finally {
      serving.stop();
      await api.close();
    }
  });
});
