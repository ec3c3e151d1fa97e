import { describe, expect, it } from '@jest/globals';
import { execFileSync } from 'node:child_process';
import { X509Certificate } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect, createServer, type TLSSocket } from 'node:tls';

import { namedBits, objectIdentifier, time } from './der';
import { mintCa, mintLeaf } from './x509-mint';

const now = new Date();
const inAYear = new Date(now.getTime() + 365 * 86_400_000);
const ca = mintCa({
  commonName: 'test CA',
  notBefore: now,
  notAfter: new Date(now.getTime() + 3650 * 86_400_000),
});
const server = mintLeaf(
  {
    commonName: 'server',
    dnsNames: ['polychrome-state.ns.svc'],
    notBefore: now,
    notAfter: inAYear,
  },
  'server',
  ca,
);
const client = mintLeaf(
  {
    commonName: 'polychrome-control-plane',
    organizations: ['polychrome:writer', 'polychrome:repair'],
    notBefore: now,
    notAfter: inAYear,
  },
  'client',
  ca,
);

describe('der', () => {
  it('encodes OIDs, named bits and times as X.690 says', () => {
    expect(objectIdentifier('1.2.840.10045.4.3.2').toString('hex')).toBe('06082a8648ce3d040302');
    // digitalSignature and keyEncipherment: 101 then 5 unused bits.
    expect(namedBits([0, 2]).toString('hex')).toBe('030205a0');
    expect(time(new Date('2049-12-31T23:59:59Z')).toString('latin1')).toBe('\x17\x0d491231235959Z');
    expect(time(new Date('2050-01-01T00:00:00Z')).toString('latin1')).toBe(
      '\x18\x0f20500101000000Z',
    );
  });
});

describe('x509-mint', () => {
  it('makes certificates node:crypto and openssl both read as asked', () => {
    const parsed = new X509Certificate(client.certificate);
    expect(parsed.subject).toBe(
      'O=polychrome:writer\nO=polychrome:repair\nCN=polychrome-control-plane',
    );
    expect(parsed.keyUsage).toEqual(['1.3.6.1.5.5.7.3.2']);
    expect(parsed.ca).toBe(false);
    expect(new X509Certificate(ca.certificate).ca).toBe(true);
    expect(parsed.checkIssued(new X509Certificate(ca.certificate))).toBe(true);
    const dir = mkdtempSync(join(tmpdir(), 'mint-'));
    try {
      writeFileSync(join(dir, 'ca.crt'), ca.certificate);
      writeFileSync(join(dir, 'server.crt'), server.certificate);
      writeFileSync(join(dir, 'client.crt'), client.certificate);
      const verify = (purpose: string, file: string): string =>
        execFileSync(
          'openssl',
          ['verify', '-CAfile', join(dir, 'ca.crt'), '-purpose', purpose, join(dir, file)],
          {
            encoding: 'utf8',
            stdio: ['ignore', 'pipe', 'pipe'],
          },
        );
      expect(verify('sslserver', 'server.crt')).toContain('OK');
      expect(verify('sslclient', 'client.crt')).toContain('OK');
      // A client certificate is not a server's: its extended key usage says so.
      expect(() => verify('sslserver', 'client.crt')).toThrow(/unsuitable certificate purpose/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("completes a mutual TLS handshake, and another CA's client is refused", async () => {
    let served = 0;
    const tlsServer = createServer(
      {
        cert: server.certificate,
        key: server.privateKey,
        ca: ca.certificate,
        requestCert: true,
        rejectUnauthorized: true,
      },
      (socket) => {
        served += 1;
        socket.end((socket.getPeerCertificate().subject as { CN?: string }).CN ?? '');
      },
    );
    await new Promise<void>((resolve) => tlsServer.listen(0, '127.0.0.1', resolve));
    const address = tlsServer.address();
    if (address === null || typeof address === 'string') throw new Error('no port');
    const dial = (pair: { certificate: string; privateKey: string }): Promise<string> =>
      new Promise((resolve) => {
        const socket: TLSSocket = connect({
          host: '127.0.0.1',
          port: address.port,
          servername: 'polychrome-state.ns.svc',
          ca: ca.certificate,
          cert: pair.certificate,
          key: pair.privateKey,
        });
        let got = '';
        socket.on('data', (d: Buffer) => (got += d.toString()));
        socket.on('end', () => resolve(got));
        socket.on('error', (error: Error) => resolve(`refused: ${error.message}`));
      });
    try {
      expect(await dial(client)).toBe('polychrome-control-plane');
      const stranger = mintCa({ commonName: 'test CA', notBefore: now, notAfter: inAYear });
      const impostor = mintLeaf(
        { commonName: 'polychrome-control-plane', notBefore: now, notAfter: inAYear },
        'client',
        stranger,
      );
      // TLS 1.3: the client learns of the refusal after its side of the handshake, as an
      // alert or a close without data; the server never hands the connection on.
      expect(await dial(impostor)).not.toBe('polychrome-control-plane');
      expect(served).toBe(1);
    } finally {
      await new Promise((resolve) => tlsServer.close(resolve));
    }
  });
});
