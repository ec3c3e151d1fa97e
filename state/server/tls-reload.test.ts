import { X509Certificate } from 'node:crypto';
import { mkdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { connect } from 'node:tls';

import { afterAll, afterEach, beforeAll, describe, expect, it, jest } from '@jest/globals';

import { StateClient } from '../../common/state-client';
import type { JournalEntry } from '../../common/state-journal';
import { STATE_SERVER_DNS_NAMES, STATE_SERVER_IP_ADDRESSES } from '../../hack/lib/dev-certs';
import { CertUsage, DevCertificateAuthority, type CertFiles } from '../../hack/lib/pki';
import { eventually, makeTestPki, message, tempDir, type TestPki } from './testdata/fixtures';
import { SecretVolume } from '../../test/support/secret-volume';
import { startStateProcess, type StateProcess, killAll } from '../../test/support/state-process';

/*
 * Certificate renewal without a restart, on the real state plane process over mutual TLS.
 * Its TLS files are mounted as the kubelet mounts a Secret: the files are symlinks through
 * `..data`, which points at a timestamped directory, and an update writes a new directory
 * and renames a new `..data` link over the old one. The test rotates to a server
 * certificate from a new CA (with a bundle of both CAs), then to a broken pair.
 */

jest.setTimeout(120_000);

let dir: { path: string; remove: () => Promise<void> };
let pki: TestPki;
let volume: SecretVolume;
const running = new Set<StateProcess>();
const clients = new Set<StateClient>();

beforeAll(async () => {
  dir = await tempDir('state-tls-reload');
  pki = await makeTestPki(dir.path);
  volume = new SecretVolume(join(dir.path, 'secret'));
  await mkdir(volume.dir);
}, 60_000);

afterEach(async () => {
  for (const c of clients) c.close();
  clients.clear();
  await killAll(running);
});

afterAll(async () => {
  await dir.remove();
});

async function pem(files: CertFiles): Promise<{ cert: string; key: string }> {
  return {
    cert: await readFile(files.certPath, 'utf8'),
    key: await readFile(files.keyPath, 'utf8'),
  };
}

/** The fingerprint of the certificate a fresh handshake gets, trusting `ca`, as `identity`. */
function presented(
  p: StateProcess,
  ca: string,
  identity: { cert: string; key: string },
): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect({
      host: '127.0.0.1',
      port: p.port,
      servername: 'localhost',
      ca,
      cert: identity.cert,
      key: identity.key,
      ALPNProtocols: ['h2'],
    });
    socket.once('secureConnect', () => {
      const fingerprint = socket.getPeerCertificate().fingerprint256;
      socket.end();
      resolve(fingerprint);
    });
    socket.once('error', reject);
  });
}

function fingerprintOf(certPem: string): string {
  return new X509Certificate(certPem).fingerprint256;
}

async function metric(p: StateProcess, series: string): Promise<number> {
  const body = await (await fetch(`http://127.0.0.1:${String(p.healthPort)}/metrics`)).text();
  const line = body.split('\n').find((l) => l.startsWith(`${series} `));
  if (line === undefined) throw new Error(`no ${series} on /metrics`);
  return Number(line.split(' ')[1]);
}

function client(p: StateProcess, ca: string, identity: { cert: string; key: string }): StateClient {
  const c = new StateClient({
    address: p.address,
    tls: { ca: Buffer.from(ca), cert: Buffer.from(identity.cert), key: Buffer.from(identity.key) },
    callTimeoutMs: 10_000,
  });
  clients.add(c);
  return c;
}

describe('state plane certificate renewal', () => {
  it('serves a certificate from a new CA to new handshakes without a restart, keeps open connections, and refuses a broken pair', async () => {
    const ca1 = await readFile(pki.ca.certPath, 'utf8');
    const server1 = await pem(pki.server);
    const writer1 = await pem(pki.controlPlane);
    await volume.update({ 'tls.crt': server1.cert, 'tls.key': server1.key, 'ca.crt': ca1 });
    const p = await startStateProcess(pki, join(dir.path, 'journal'), {
      STATE_TLS_CA_FILE: volume.path('ca.crt'),
      STATE_TLS_CERT_FILE: volume.path('tls.crt'),
      STATE_TLS_KEY_FILE: volume.path('tls.key'),
      // Only the directory watch can pick the change up within the test.
      STATE_TLS_RELOAD_INTERVAL_MS: '3600000',
    });
    running.add(p);
    expect(await presented(p, ca1, writer1)).toBe(fingerprintOf(server1.cert));

    // A follow read on a connection made before the rotation.
    const partition = 'conv-tls-reload';
    const old = client(p, ca1, writer1);
    await old.append(partition, 0, [message('before')]);
    const follow = old.read(partition, 0, 0, { follow: true })[Symbol.asyncIterator]();
    expect((await follow.next()).value).toMatchObject({ position: 0 });
    expect((await follow.next()).value).toMatchObject({ position: 1 });

    // The new CA, its server certificate, a writer it signed; the bundle trusts both CAs.
    const newCa = await DevCertificateAuthority.create(
      join(dir.path, 'ca2'),
      'ca2',
      'polychrome-ca-2',
    );
    const ca2 = await readFile(newCa.certPath, 'utf8');
    const server2 = await pem(
      await newCa.issue({
        name: 'server',
        commonName: 'polychrome-state',
        dnsNames: STATE_SERVER_DNS_NAMES,
        ipAddresses: STATE_SERVER_IP_ADDRESSES,
        usage: CertUsage.Server,
      }),
    );
    const writer2 = await pem(
      await newCa.issue({
        name: 'writer',
        commonName: 'polychrome-control-plane',
        organizations: ['polychrome:writer'],
        usage: CertUsage.Client,
      }),
    );
    // Before the rotation a client trusting only the new CA cannot connect.
    await expect(presented(p, ca2, writer2)).rejects.toThrow();
    await volume.update({
      'tls.crt': server2.cert,
      'tls.key': server2.key,
      'ca.crt': `${ca1}${ca2}`,
    });

    await eventually('the new certificate on a new handshake', async () =>
      (await presented(p, `${ca1}${ca2}`, writer1).catch(() => undefined)) ===
      fingerprintOf(server2.cert)
        ? true
        : undefined,
    );
    // A client of the new CA only, with a certificate the new CA signed, appends.
    const fresh = client(p, ca2, writer2);
    const appended = await fresh.append(partition, 2, [message('after')]);
    expect(appended.head).toBe(4);
    // The connection made before the rotation still delivers, and still appends: it trusts
    // only the old CA, so it cannot be a new connection.
    const next = await follow.next();
    expect((next.value as JournalEntry).position).toBe(2);
    expect((await old.append(partition, 4, [message('old connection')])).head).toBe(6);
    expect(await metric(p, 'polychrome_state_tls_reloads_total{outcome="reloaded"}')).toBe(1);
    expect(await metric(p, 'polychrome_state_tls_certificate_expiry_timestamp_seconds')).toBe(
      Math.floor(Date.parse(new X509Certificate(server2.cert).validTo) / 1000),
    );

    // A broken update (the new certificate with the old key) is refused; the pair stays.
    await volume.update({
      'tls.crt': server2.cert,
      'tls.key': server1.key,
      'ca.crt': `${ca1}${ca2}`,
    });
    await eventually('the broken pair refused', async () =>
      (await metric(p, 'polychrome_state_tls_reloads_total{outcome="refused"}')) >= 1
        ? true
        : undefined,
    );
    // The log line comes through the process's stdout, the metric over HTTP: seeing the one
    // does not mean the other has reached this process yet, so it is waited for too.
    await eventually('the refusal logged', () =>
      /the new pair is not usable; keeping the one in use/u.test(p.logs.join('\n'))
        ? true
        : undefined,
    );
    expect(await presented(p, ca2, writer2)).toBe(fingerprintOf(server2.cert));
    expect((await fresh.append(partition, 6, [message('still')])).head).toBe(8);
    await follow.return?.();
  });
});
