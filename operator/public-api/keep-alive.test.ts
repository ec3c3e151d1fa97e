import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { Agent as HttpAgent, request as httpRequest } from 'node:http';
import { Agent as HttpsAgent, request as httpsRequest } from 'node:https';
import type { Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { ensureDevCerts } from '../../hack/lib/dev-certs';
import { KubeDoor } from '../kube-api/kube-door';
import { startApi, type TestApi } from '../../test/support/api-fixtures';

// Proxies pool their connections to the API and close an idle one after their own idle
// timeout (kube-apiserver's proxy to the Kubernetes door: 90 s). If the server closes
// first, a request already on its way over that connection fails, and a proxy does not
// retry a POST: kube-apiserver answered a plugin's approval 503 "error trying to reach
// service: EOF". So each listener keeps an idle connection open past Node's 5 s default.

/** Longer than Node's default keepAliveTimeout (5 s), with a margin for a slow machine. */
const IDLE_MS = 6_500;

let dir: string;
let api: TestApi;
let tls: { ca: Buffer; cert: Buffer; key: Buffer };

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'polychrome-keep-alive-'));
  const certs = await ensureDevCerts(join(dir, 'pki'));
  tls = {
    ca: await readFile(certs.ca.certPath),
    cert: await readFile(certs.controlPlane.certPath),
    key: await readFile(certs.controlPlane.keyPath),
  };
  const door = new KubeDoor({
    ports: {
      readAuthenticationConfig: () =>
        Promise.resolve({
          'requestheader-client-ca-file': tls.ca.toString(),
          'requestheader-username-headers': '["X-Remote-User"]',
        }),
      review: () => Promise.resolve({ allowed: false, reason: 'not in this test' }),
      conversationUid: () => undefined,
    },
    logger: pino({ level: 'silent' }),
  });
  api = await startApi({
    peers: {
      host: '127.0.0.1',
      port: 0,
      tls,
      directory: { find: () => undefined, source: 'no replicas in this test' },
    },
    kube: { host: '127.0.0.1', port: 0, cert: tls.cert.toString(), key: tls.key.toString(), door },
  });
});

afterAll(async () => {
  await api?.close();
  await rm(dir, { recursive: true, force: true });
});

/** One GET on `agent`'s pooled connection; resolves with the status and the socket it used. */
function get(
  send: typeof httpRequest,
  agent: HttpAgent,
  port: number,
): Promise<{ status: number; socket: Socket }> {
  return new Promise((resolve, reject) => {
    const request = send({ host: '127.0.0.1', port, path: '/v1/conversations', agent }, (res) => {
      res.resume();
      res.once('end', () => resolve({ status: res.statusCode ?? 0, socket: request.socket! }));
    });
    request.once('error', reject);
    request.end();
  });
}

describe('keep-alive on every listener', () => {
  it(`keeps an idle connection open for ${String(IDLE_MS)} ms, so a pooled connection is reused; shutdown closes it`, async () => {
    const tlsAgent = (clientCert: boolean): HttpsAgent =>
      new HttpsAgent({
        keepAlive: true,
        maxSockets: 1,
        ca: tls.ca,
        checkServerIdentity: () => undefined,
        ...(clientCert ? { cert: tls.cert, key: tls.key } : {}),
      });
    const listeners = [
      {
        name: 'public',
        send: httpRequest,
        agent: new HttpAgent({ keepAlive: true, maxSockets: 1 }),
        port: api.server.address().port,
      },
      {
        name: 'peer',
        send: httpsRequest,
        agent: tlsAgent(true),
        port: api.server.peerAddress().port,
      },
      {
        name: 'kube',
        send: httpsRequest,
        agent: tlsAgent(false),
        port: api.server.kubeAddress().port,
      },
    ];
    const sockets: Socket[] = [];
    try {
      const outcomes = await Promise.all(
        listeners.map(async ({ name, send, agent, port }) => {
          const first = await get(send, agent, port);
          let closedAfterMs: number | undefined;
          const idleSince = Date.now();
          first.socket.once('close', () => (closedAfterMs = Date.now() - idleSince));
          await new Promise((resolve) => setTimeout(resolve, IDLE_MS));
          const second = await get(send, agent, port);
          sockets.push(second.socket);
          return {
            name,
            answered: first.status > 0 && second.status > 0,
            reused: second.socket === first.socket,
            closedAfterMs,
          };
        }),
      );
      expect(outcomes).toEqual(
        listeners.map(({ name }) => ({
          name,
          answered: true,
          reused: true,
          closedAfterMs: undefined,
        })),
      );
      // Shutdown does not wait for an idle connection to time out: it closes it.
      const closed = sockets.map(
        (socket) =>
          new Promise<boolean>((resolve) => {
            socket.once('close', () => resolve(true));
            setTimeout(() => resolve(false), 2_000).unref();
          }),
      );
      await api.server.close();
      expect(await Promise.all(closed)).toEqual(listeners.map(() => true));
    } finally {
      for (const { agent } of listeners) agent.destroy();
    }
  }, 30_000);
});
