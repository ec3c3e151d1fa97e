import { createServer, connect, type Server, type Socket } from 'node:net';
import type { V1ContainerPort } from '@kubernetes/client-node';

/** One `hostPort` of a container: where it listens here, where it forwards. */
export interface HostPortRule {
  hostIP: string;
  hostPort: number;
  containerPort: number;
}

/**
 * The container ports that ask for a host port (TCP only). `hostIP` defaults to 127.0.0.1,
 * not to every address as the kubelet's does: a dev machine's ports stay on loopback
 * unless the pod names another address.
 */
export function hostPortRules(ports: readonly V1ContainerPort[]): HostPortRule[] {
  return ports
    .filter((p) => p.hostPort !== undefined && p.hostPort > 0 && (p.protocol ?? 'TCP') === 'TCP')
    .map((p) => ({
      hostIP: p.hostIP ?? '127.0.0.1',
      hostPort: p.hostPort ?? 0,
      containerPort: p.containerPort,
    }));
}

/**
 * A container's host ports, as the CNI portmap plugin gives them: a TCP listener on
 * hostIP:hostPort that forwards each connection to the pod's address and the container
 * port, for as long as the container is on the node (across its restarts). A port some
 * other program holds is logged and left out, the way a second pod asking for it would be
 * unschedulable.
 */
export class HostPorts {
  private readonly servers: Server[] = [];
  private readonly sockets = new Set<Socket>();

  constructor(
    private readonly ports: readonly V1ContainerPort[],
    private readonly podIP: string,
    private readonly log: (line: string) => void,
  ) {}

  open(): void {
    for (const rule of hostPortRules(this.ports)) {
      const server = createServer((client) => this.forward(client, rule));
      server.on('error', (err: Error) =>
        this.log(`hostPort ${rule.hostIP}:${rule.hostPort} is not served: ${err.message}`),
      );
      server.listen(rule.hostPort, rule.hostIP);
      this.servers.push(server);
    }
  }

  /** Stops listening and drops the connections in flight. */
  async close(): Promise<void> {
    for (const socket of this.sockets) socket.destroy();
    await Promise.all(
      this.servers.splice(0).map(
        (server) =>
          new Promise<void>((resolve) => {
            if (!server.listening) return resolve();
            server.close(() => resolve());
          }),
      ),
    );
  }

  private forward(client: Socket, rule: HostPortRule): void {
    const upstream = connect({ host: this.podIP, port: rule.containerPort });
    for (const socket of [client, upstream]) {
      this.sockets.add(socket);
      socket.once('close', () => this.sockets.delete(socket));
      // A reset on one side closes the other; the error itself is the caller's to see.
      socket.on('error', () => undefined);
    }
    client.pipe(upstream);
    upstream.pipe(client);
    client.once('close', () => upstream.destroy());
    upstream.once('close', () => client.destroy());
  }
}
