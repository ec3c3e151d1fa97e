import { once } from 'node:events';
import { connect, createServer, type Server, type Socket } from 'node:net';

import { afterEach, describe, expect, it } from '@jest/globals';

import { TcpRelay } from './tcp-relay';

/** A server that greets each connection with `greeting` and echoes what it gets. */
async function greeter(greeting: string): Promise<{ server: Server; port: number }> {
  const server = createServer((socket) => {
    socket.on('error', () => undefined);
    socket.write(greeting);
    socket.pipe(socket);
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('no port');
  return { server, port: address.port };
}

/** Connects to `url` and collects what arrives until the connection closes. */
function client(url: string): {
  socket: Socket;
  /** Resolves once the first bytes arrived (the relay has reached a server). */
  greeted: Promise<void>;
  received: Promise<string>;
} {
  const { port } = new URL(url);
  const socket = connect(Number(port), '127.0.0.1');
  let text = '';
  socket.on('data', (chunk: Buffer) => (text += chunk.toString('latin1')));
  const greeted = new Promise<void>((resolve) => socket.once('data', () => resolve()));
  const received = new Promise<string>((resolve) => socket.on('close', () => resolve(text)));
  socket.on('error', () => undefined);
  return { socket, greeted, received };
}

const cleanup: (() => Promise<void>)[] = [];

afterEach(async () => {
  for (const step of cleanup.splice(0).reverse()) await step();
});

async function started(greeting: string): Promise<number> {
  const { server, port } = await greeter(greeting);
  cleanup.push(async () => {
    server.close();
    await once(server, 'close');
  });
  return port;
}

describe('TcpRelay', () => {
  it('passes bytes both ways, and cuts a connection a given number of bytes into a marker', async () => {
    const port = await started('hello;');
    const relay = await TcpRelay.start(port);
    cleanup.push(() => relay.close());
    const cut = relay.cutWithin('MARK', 3);
    const { socket, received } = client(relay.url);
    socket.write('one;');
    socket.write('two;MARK-and-the-rest');
    await cut;
    // Everything before the marker, the marker, 3 bytes more; then the connection closed.
    expect(await received).toBe('hello;one;two;MARK-an');
  });

  it('sends new connections to the new target, and leaves connections without a cut alone', async () => {
    const first = await started('first;');
    const second = await started('second;');
    const relay = await TcpRelay.start(first);
    cleanup.push(() => relay.close());
    const before = client(relay.url);
    await before.greeted;
    relay.target = second;
    const after = client(relay.url);
    before.socket.end('bye;');
    after.socket.end('bye;');
    expect(await before.received).toBe('first;bye;');
    expect(await after.received).toBe('second;bye;');
    expect(relay.connections).toBe(2);
  });
});
