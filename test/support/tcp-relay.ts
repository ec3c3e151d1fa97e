/**
 * A TCP relay on 127.0.0.1 in front of a server, as a load balancer stands in front of
 * replicas: it passes bytes both ways untouched and understands none of them. A test moves
 * it to another server ({@link TcpRelay.target}: new connections go there) or drops a
 * connection the way a network does, even in the middle of a message
 * ({@link TcpRelay.cutWithin}). It is a real fault between a real client and a real server,
 * not a double of either.
 */
import { once } from 'node:events';
import { connect, createServer, type Server, type Socket } from 'node:net';

/** An armed cut: the connection whose server bytes next hold `marker` is dropped. */
interface Cut {
  readonly marker: string;
  readonly extraBytes: number;
  readonly done: () => void;
}

export class TcpRelay {
  /** The port new connections are relayed to. */
  target: number;
  /** Connections accepted so far. */
  connections = 0;
  private readonly sockets = new Set<Socket>();
  private cut: Cut | undefined;

  private constructor(
    private readonly server: Server,
    target: number,
  ) {
    this.target = target;
    server.on('connection', (client) => this.relay(client));
  }

  /** Starts a relay to 127.0.0.1:`target` on 127.0.0.1:0. */
  static async start(target: number): Promise<TcpRelay> {
    // Half-open both ways: an end passes through once the other side's bytes are sent.
    const relay = new TcpRelay(createServer({ allowHalfOpen: true }), target);
    relay.server.listen(0, '127.0.0.1');
    await once(relay.server, 'listening');
    return relay;
  }

  /** `http://127.0.0.1:PORT` of the relay. */
  get url(): string {
    const address = this.server.address();
    if (address === null || typeof address === 'string') throw new Error('the relay is closed');
    return `http://127.0.0.1:${String(address.port)}`;
  }

  /**
   * Drops the first connection whose bytes from the server come to hold `marker` (counted
   * from the moment this is called): the client gets everything before it, `marker`, and
   * `extraBytes` more, then the connection closes both ways. Resolves once it is cut.
   */
  cutWithin(marker: string, extraBytes: number): Promise<void> {
    return new Promise((resolve) => {
      this.cut = { marker, extraBytes, done: resolve };
    });
  }

  /** Stops accepting and drops every connection. */
  async close(): Promise<void> {
    for (const socket of this.sockets) socket.destroy();
    this.server.close();
    await once(this.server, 'close');
  }

  private relay(client: Socket): void {
    this.connections += 1;
    const upstream = connect({ port: this.target, host: '127.0.0.1', allowHalfOpen: true });
    const drop = (): void => {
      client.destroy();
      upstream.destroy();
    };
    for (const socket of [client, upstream]) {
      this.sockets.add(socket);
      socket.on('error', drop);
      socket.on('close', () => this.sockets.delete(socket));
    }
    // An end passes through (pipe ends the server side when the client ends).
    client.pipe(upstream);
    upstream.on('end', () => client.end());
    // The server's bytes since a cut was armed, as latin1 (one character per byte).
    let seen = '';
    upstream.on('data', (chunk: Buffer) => {
      const cut = this.cut;
      if (cut === undefined) {
        if (!client.write(chunk)) upstream.pause();
        return;
      }
      const before = seen.length;
      seen += chunk.toString('latin1');
      const at = seen.indexOf(cut.marker);
      if (at < 0) {
        if (!client.write(chunk)) upstream.pause();
        return;
      }
      this.cut = undefined;
      const end = Math.min(at + cut.marker.length + cut.extraBytes, seen.length) - before;
      upstream.pause();
      client.write(chunk.subarray(0, Math.max(0, end)), () => {
        drop();
        cut.done();
      });
    });
    client.on('drain', () => upstream.resume());
  }
}
