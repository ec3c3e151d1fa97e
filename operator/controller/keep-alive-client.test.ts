import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { CoreV1Api, KubeConfig } from '@kubernetes/client-node';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { createServer, type Server } from 'node:https';
import type { Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ensureDevCerts } from '../../hack/lib/dev-certs';
import { pollUntil, sleep } from '../../hack/lib/processes';
import { KUBE_IDLE_SOCKET_MS, makeKeepAliveApiClient } from './keep-alive-client';

// The control plane's clients pool their connections to kube-apiserver, which closes a
// connection idle for 90 s. If the server closes first, a request already on its way over
// that connection fails and is not resent. So the client closes an idle connection first.
// The server here is a real TLS server verified against the dev CA, as kube-apiserver is,
// and it keeps idle connections far longer than the client's idle limit: any close the
// test sees before a minute is the client's.

const IDLE_MS = 400;

let dir: string;
let server: Server;
let kc: KubeConfig;
/** Every connection the server accepted, with when it closed (ms since it went idle). */
const connections: { socket: Socket; closedAt?: number }[] = [];
let delayMs = 0;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'polychrome-kube-pool-'));
  const certs = await ensureDevCerts(join(dir, 'pki'));
  server = createServer(
    {
      cert: await readFile(certs.server.certPath),
      key: await readFile(certs.server.keyPath),
      keepAliveTimeout: 60_000,
    },
    (req, res) => {
      req.resume();
      setTimeout(() => {
        res.setHeader('content-type', 'application/json');
        res.end(JSON.stringify({ kind: 'NamespaceList', apiVersion: 'v1', items: [] }));
      }, delayMs);
    },
  );
  server.on('secureConnection', (socket: Socket) => {
    const entry: { socket: Socket; closedAt?: number } = { socket };
    connections.push(entry);
    socket.once('close', () => (entry.closedAt = Date.now()));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('no port');
  kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [
      {
        name: 'local',
        server: `https://127.0.0.1:${String(address.port)}`,
        caData: (await readFile(certs.ca.certPath)).toString('base64'),
      },
    ],
    users: [{ name: 'u', token: 'not-checked-here' }],
    contexts: [{ name: 'c', cluster: 'local', user: 'u' }],
    currentContext: 'c',
  });
});

afterAll(async () => {
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
  await rm(dir, { recursive: true, force: true });
});

describe('the kube-apiserver connection pool', () => {
  it('closes an idle connection itself, inside kube-apiserver’s 90 s', () => {
    expect(KUBE_IDLE_SOCKET_MS).toBeGreaterThanOrEqual(10_000);
    expect(KUBE_IDLE_SOCKET_MS).toBeLessThanOrEqual(75_000);
  });

  it(`reuses a connection while it is busy or briefly idle, and closes it after ${String(IDLE_MS)} ms idle`, async () => {
    connections.length = 0;
    delayMs = 0;
    const api = makeKeepAliveApiClient(kc, CoreV1Api, { idleSocketMs: IDLE_MS });

    // Back to back, and again after a pause shorter than the limit: one connection.
    await api.listNamespace();
    await sleep(IDLE_MS / 4);
    await api.listNamespace();
    expect(connections).toHaveLength(1);

    // A response slower than the idle limit still arrives: the limit is for free sockets.
    delayMs = IDLE_MS * 2;
    await expect(api.listNamespace()).resolves.toMatchObject({ items: [] });
    expect(connections).toHaveLength(1);
    delayMs = 0;

    // Left idle, the client closes it, long before the server would.
    const idleSince = Date.now();
    const closedAt = await pollUntil(
      'the client to close its idle connection',
      () => Promise.resolve(connections[0]!.closedAt),
      { timeoutMs: 10_000, intervalMs: 50 },
    );
    const closedAfter = closedAt - idleSince;
    expect(closedAfter).toBeGreaterThanOrEqual(IDLE_MS - 50);
    expect(closedAfter).toBeLessThan(10_000);

    // The next request opens a new connection and is answered.
    await expect(api.listNamespace()).resolves.toMatchObject({ items: [] });
    expect(connections).toHaveLength(2);
  }, 30_000);
});
