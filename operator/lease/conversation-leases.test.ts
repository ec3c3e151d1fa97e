import { afterEach, describe, expect, it } from '@jest/globals';
import { KubeConfig } from '@kubernetes/client-node';
import { createServer, type Server, type Socket } from 'node:net';

import { AppError } from '../../common/errors';
import { ConversationLeases } from './conversation-leases';

// A hung API server, stood in for by a TCP listener that accepts connections and never
// answers (it speaks no protocol at all): every lease request must give up on its own.

interface Silent {
  readonly server: Server;
  readonly port: number;
  /** Connections accepted so far, and whether each was closed by the client. */
  readonly sockets: { socket: Socket; closed: boolean }[];
}

let silent: Silent | undefined;
const opened: ConversationLeases[] = [];

async function silentListener(): Promise<Silent> {
  const sockets: Silent['sockets'] = [];
  const server = createServer((socket) => {
    const entry = { socket, closed: false };
    sockets.push(entry);
    socket.on('close', () => {
      entry.closed = true;
    });
    socket.on('error', () => undefined);
    // Read and drop the request, so the client's hang-up is seen.
    socket.resume();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('no port');
  return { server, port: address.port, sockets };
}

function kubeConfigFor(port: number): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [{ name: 'hung', server: `http://127.0.0.1:${String(port)}`, skipTLSVerify: true }],
    users: [{ name: 'nobody', token: 'not-a-real-token' }],
    contexts: [{ name: 'hung', cluster: 'hung', user: 'nobody' }],
    currentContext: 'hung',
  });
  return kc;
}

function leases(
  port: number,
  options: { leaseDurationMs?: number; requestTimeoutMs?: number } = {},
): ConversationLeases {
  const made = new ConversationLeases({
    kubeConfig: kubeConfigFor(port),
    namespace: 'cp-ns',
    identity: 'replica-under-test',
    leaseDurationMs: options.leaseDurationMs ?? 3_000,
    renewIntervalMs: 1_000,
    ...(options.requestTimeoutMs === undefined
      ? {}
      : { requestTimeoutMs: options.requestTimeoutMs }),
  });
  opened.push(made);
  return made;
}

afterEach(async () => {
  await Promise.allSettled(opened.splice(0).map((l) => l.close()));
  if (silent !== undefined) {
    for (const { socket } of silent.sockets) socket.destroy();
    await new Promise((resolve) => silent?.server.close(resolve));
    silent = undefined;
  }
});

describe('lease request timeouts', () => {
  it('fails a lease request to an API server that never answers within the timeout, and hangs up', async () => {
    silent = await silentListener();
    const replica = leases(silent.port, { requestTimeoutMs: 300 });
    const started = performance.now();
    let caught: unknown;
    try {
      await replica.tryAcquire({ namespace: 'ns', name: 'c1', uid: 'u-1' });
    } catch (error) {
      caught = error;
    }
    const elapsed = performance.now() - started;
    expect(caught).toBeInstanceOf(AppError);
    expect(caught).toMatchObject({ code: 'unavailable' });
    expect(String((caught as Error).message)).toMatch(
      /^the Kubernetes API server did not answer creating Lease cp-ns\/conv-u-1 within 300 ms/,
    );
    // The request reached the listener and was given up on, not left waiting.
    expect(silent.sockets.length).toBeGreaterThanOrEqual(1);
    expect(elapsed).toBeGreaterThanOrEqual(250);
    expect(elapsed).toBeLessThan(2_000);
    const listener = silent;
    const deadline = performance.now() + 1_000;
    while (!listener.sockets.every((s) => s.closed) && performance.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    expect(listener.sockets.map((s) => s.closed)).toEqual(listener.sockets.map(() => true));
  });

  it('defaults the timeout to a third of the lease duration, at most 5 s', async () => {
    silent = await silentListener();
    const replica = leases(silent.port, { leaseDurationMs: 1_200 });
    const started = performance.now();
    await expect(replica.tryAcquire({ namespace: 'ns', name: 'c2', uid: 'u-2' })).rejects.toThrow(
      /within 400 ms/,
    );
    expect(performance.now() - started).toBeLessThan(2_000);
  });

  it('refuses a timeout that is not shorter than the lease duration', () => {
    expect(() => leases(1, { leaseDurationMs: 3_000, requestTimeoutMs: 3_000 })).toThrow(
      /lease request timeout 3000 ms must be a positive integer shorter than the lease duration 3000 ms/,
    );
  });
});
