import { X509Certificate } from 'node:crypto';
import { mkdir, mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import {
  createServer as createHttpsServer,
  request as httpsRequest,
  type Server,
} from 'node:https';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { connect, type TLSSocket } from 'node:tls';

import { afterAll, afterEach, beforeAll, describe, expect, it, jest } from '@jest/globals';
import pino from 'pino';
import { Registry } from 'prom-client';

import type { ServingCertificate } from '../../common/serving-certificate';
import { CertUsage, DevCertificateAuthority, type CertFiles } from '../../hack/lib/pki';
import { ALICE, call, startApi, TOKENS, type TestApi } from '../../test/support/api-fixtures';
import { pollUntil } from '../../hack/lib/processes';
import { SecretVolume } from '../../test/support/secret-volume';
import { AppError } from '../../common/errors';
import { loadStateLinkCertificate, peerTlsFrom } from '../state-link-tls';
import type { PeerAddress, PeerDirectory } from './peer-endpoints';

/*
 * The replicas present the control plane's certificate to each other (docs/api.md,
 * "Between replicas"); a renewal reaches the peer listener's next handshakes and the next
 * hop without a restart, wired as operator/main.ts wires it (state-link-tls.ts).
 */

jest.setTimeout(60_000);

let dir: string;
let ca: DevCertificateAuthority;
let first: CertFiles;
let renewed: CertFiles;
const open: { close(): Promise<void> }[] = [];
const certificates: ServingCertificate[] = [];

const replicaCertificate = (name: string, by = ca): Promise<CertFiles> =>
  by.issue({
    name,
    commonName: 'polychrome-control-plane',
    organizations: ['polychrome:writer', 'polychrome:control-plane-replica'],
    dnsNames: ['localhost'],
    ipAddresses: ['127.0.0.1'],
    usage: CertUsage.Both,
  });

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'polychrome-peer-tls-renewal-'));
  ca = await DevCertificateAuthority.create(join(dir, 'ca'), 'ca', 'peer-renewal-ca');
  first = await replicaCertificate('first');
  renewed = await replicaCertificate('renewed');
}, 60_000);

afterEach(async () => {
  for (const c of certificates.splice(0)) c.stop();
  await Promise.all(open.splice(0).map((o) => o.close()));
});

afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

const fingerprintOf = async (files: CertFiles): Promise<string> =>
  new X509Certificate(await readFile(files.certPath)).fingerprint256;

/** The certificate the TLS listener at 127.0.0.1:`port` presents to a new handshake. */
function served(port: number, client: { cert: Buffer; key: Buffer }): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect(
      { host: '127.0.0.1', port, rejectUnauthorized: false, ...client },
      () => {
        const fingerprint = socket.getPeerX509Certificate()?.fingerprint256 ?? '';
        socket.end();
        resolve(fingerprint);
      },
    );
    socket.once('error', reject);
  });
}

/** The HTTP status the peer listener answers a client presenting `client`; rejects when refused. */
function answered(port: number, client: { cert: Buffer; key: Buffer }): Promise<number> {
  return new Promise((resolve, reject) => {
    const outgoing = httpsRequest(
      { host: '127.0.0.1', port, path: '/', rejectUnauthorized: false, agent: false, ...client },
      (incoming) => {
        incoming.resume();
        resolve(incoming.statusCode ?? 0);
      },
    );
    outgoing.once('error', reject);
    outgoing.end();
  });
}

/** A listener standing where the holder replica would: it keeps each hop's client certificate. */
async function holder(files: CertFiles): Promise<{ address: PeerAddress; clients: string[] }> {
  const clients: string[] = [];
  const server: Server = createHttpsServer(
    {
      ca: await readFile(ca.certPath),
      cert: await readFile(files.certPath),
      key: await readFile(files.keyPath),
      requestCert: true,
      rejectUnauthorized: true,
    },
    (request, response) => {
      clients.push((request.socket as TLSSocket).getPeerX509Certificate()?.fingerprint256 ?? '');
      request.resume();
      response.writeHead(200, { 'content-type': 'application/json' });
      response.end('{"held":true}');
    },
  );
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  open.push({
    close: () => {
      server.closeAllConnections();
      return new Promise((resolve) => server.close(() => resolve()));
    },
  });
  return { address: { host: '127.0.0.1', port: (server.address() as AddressInfo).port }, clients };
}

describe("the peer side takes the control plane's renewed certificate", () => {
  it('presents the renewed pair at the next handshake of the listener and the next hop, and checks clients against the renewed bundle', async () => {
    const volume = new SecretVolume(join(dir, 'control-plane-tls'));
    await mkdir(volume.dir);
    const files = async (pair: CertFiles, bundle = ca): Promise<Record<string, string>> => ({
      'ca.crt': await readFile(bundle.certPath, 'utf8'),
      'tls.crt': await readFile(pair.certPath, 'utf8'),
      'tls.key': await readFile(pair.keyPath, 'utf8'),
    });
    await volume.update(await files(first));
    const certificate = await loadStateLinkCertificate(
      {
        address: 'unused',
        ...volume.tlsPaths(),
        serverName: undefined,
        reloadIntervalMs: 3_600_000,
      },
      pino({ level: 'silent' }),
      new Registry(),
    );
    certificates.push(certificate);
    certificate.start();
    const held = await holder(first);
    const directory: PeerDirectory = { source: 'the test', find: () => held.address };
    const front: TestApi = await startApi({
      peers: { host: '127.0.0.1', port: 0, directory, ...peerTlsFrom(certificate) },
    });
    open.push(front);
    const client = { cert: await readFile(first.certPath), key: await readFile(first.keyPath) };
    const port = front.server.peerAddress().port;
    /** Sends one request the front replica forwards to the holder. */
    const forward = async (): Promise<void> => {
      const id = front.seed(ALICE.identity);
      front.service.failNext(
        new AppError('unavailable', 'held elsewhere', {
          details: { holder: 'cp-b', retryAfterMs: 1000, forwardTo: 'cp-b' },
        }),
      );
      const answer = await call(front, 'POST', `/v1/conversations/${id}/messages`, {
        token: TOKENS.alice,
        body: { text: 'hello', idempotencyKey: `k-${String(held.clients.length)}` },
      });
      expect(answer.json).toEqual({ held: true });
    };

    expect(await served(port, client)).toBe(await fingerprintOf(first));
    await forward();
    expect(held.clients).toEqual([await fingerprintOf(first)]);

    await volume.update(await files(renewed));
    const fingerprint = await fingerprintOf(renewed);
    await pollUntil(
      'the listener presents the renewed pair',
      async () => ((await served(port, client)) === fingerprint ? true : undefined),
      { timeoutMs: 20_000, intervalMs: 50 },
    );
    await forward();
    expect(held.clients).toEqual([await fingerprintOf(first), fingerprint]);

    // A bundle of a new CA only: the listener's next handshakes check clients against it,
    // so a replica certificate of the dropped CA is refused there.
    const ca2 = await DevCertificateAuthority.create(join(dir, 'ca2'), 'ca', 'peer-renewal-ca-2');
    const next = await replicaCertificate('next', ca2);
    const nextClient = { cert: await readFile(next.certPath), key: await readFile(next.keyPath) };
    await expect(answered(port, nextClient)).rejects.toThrow();
    await volume.update(await files(next, ca2));
    await pollUntil(
      'the listener takes clients of the new CA',
      () => answered(port, nextClient).catch(() => undefined),
      { timeoutMs: 20_000, intervalMs: 50 },
    );
    await expect(answered(port, client)).rejects.toThrow();
  });
});
