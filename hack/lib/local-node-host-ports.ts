import { createServer, connect, type Server, type Socket } from 'node:net';
import { CoreV1Api, type KubeConfig, type V1ContainerPort } from '@kubernetes/client-node';

/** Where a forwarded connection goes. */
export interface ForwardTarget {
  host: string;
  port: number;
}

/**
 * A TCP listener that forwards each connection to where `target` says at that moment (none:
 * the connection is closed). A port some other program holds is logged, not fatal.
 */
export class TcpForwarder {
  private server: Server | undefined;
  private readonly sockets = new Set<Socket>();

  constructor(
    private readonly listen: { host: string; port: number },
    private readonly target: () => Promise<ForwardTarget | undefined>,
    private readonly log: (line: string) => void,
  ) {}

  open(): void {
    if (this.server !== undefined) return;
    const { host, port } = this.listen;
    const server = createServer((client) => void this.forward(client));
    server.on('error', (err: Error) => {
      this.log(`${host}:${port} is not served: ${err.message}`);
      // The next open() (a container's next start) tries again.
      if (this.server === server) this.server = undefined;
    });
    server.listen(port, host);
    this.server = server;
  }

  /** Stops listening (also a listen still resolving its host) and drops the connections in flight. */
  async close(): Promise<void> {
    for (const socket of this.sockets) socket.destroy();
    const server = this.server;
    this.server = undefined;
    if (server === undefined) return;
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }

  private track(socket: Socket): void {
    this.sockets.add(socket);
    socket.once('close', () => this.sockets.delete(socket));
    // A reset on one side closes the other; the error itself is the caller's to see.
    socket.on('error', () => undefined);
  }

  private async forward(client: Socket): Promise<void> {
    this.track(client);
    client.pause();
    const target = await this.target().catch((err: unknown) => {
      this.log(
        `${this.listen.host}:${this.listen.port}: ${err instanceof Error ? err.message : String(err)}`,
      );
      return undefined;
    });
    if (target === undefined || client.destroyed) {
      client.destroy();
      return;
    }
    const upstream = connect({ host: target.host, port: target.port });
    this.track(upstream);
    client.pipe(upstream);
    upstream.pipe(client);
    client.resume();
    client.once('close', () => upstream.destroy());
    upstream.once('close', () => client.destroy());
  }
}

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
 * A container's host ports, as the CNI portmap plugin gives them: hostIP:hostPort forwards
 * to the pod's address and the container port, for as long as the container is on the
 * node (across its restarts).
 */
export class HostPorts {
  private readonly forwarders: TcpForwarder[];

  constructor(ports: readonly V1ContainerPort[], podIP: string, log: (line: string) => void) {
    this.forwarders = hostPortRules(ports).map(
      (rule) =>
        new TcpForwarder(
          { host: rule.hostIP, port: rule.hostPort },
          () => Promise.resolve({ host: podIP, port: rule.containerPort }),
          (line) => log(`hostPort ${line}`),
        ),
    );
  }

  open(): void {
    for (const forwarder of this.forwarders) forwarder.open();
  }

  async close(): Promise<void> {
    await Promise.all(this.forwarders.map((forwarder) => forwarder.close()));
  }
}

/** `kubectl port-forward service/NAME` that outlives its command: see {@link parsePortForward}. */
export interface ServicePortForward {
  listen: { host: string; port: number };
  namespace: string;
  service: string;
  /** A container port of the Service's pods, by number or name. */
  targetPort: number | string;
}

/**
 * Reads `[HOST:]PORT=NAMESPACE/SERVICE:TARGET` (HOST defaults to 127.0.0.1; TARGET is a
 * container port number or name of the Service's pods).
 * @throws naming what is wrong
 */
export function parsePortForward(spec: string): ServicePortForward {
  const match = /^(?:([^=:]+):)?(\d{1,5})=([a-z0-9-]+)\/([a-z0-9-]+):([A-Za-z0-9-]+)$/.exec(spec);
  if (match === null) {
    throw new Error(
      `--port-forward ${spec}: expected [HOST:]PORT=NAMESPACE/SERVICE:TARGET, e.g. 127.0.0.1:8080=polychrome-system/polychrome-control-plane:api`,
    );
  }
  const [, host, port, namespace, service, target] = match;
  return {
    listen: { host: host ?? '127.0.0.1', port: Number(port) },
    namespace: namespace ?? '',
    service: service ?? '',
    targetPort: /^\d+$/.test(target ?? '') ? Number(target) : (target ?? ''),
  };
}

/**
 * A Service's port forward, as `kubectl port-forward service/NAME` does it: each connection
 * goes to a ready pod the Service selects (looked up when the connection comes, so a pod
 * that restarts elsewhere is followed) on the target container port.
 */
export function servicePortForwarder(
  kubeConfig: KubeConfig,
  forward: ServicePortForward,
  log: (line: string) => void,
): TcpForwarder {
  const core = kubeConfig.makeApiClient(CoreV1Api);
  const { namespace, service, targetPort } = forward;
  const name = `${namespace}/${service}:${targetPort}`;
  return new TcpForwarder(
    forward.listen,
    async () => {
      const svc = await core.readNamespacedService({ name: service, namespace });
      const selector = svc.spec?.selector ?? {};
      const labelSelector = Object.entries(selector)
        .map(([k, v]) => `${k}=${v}`)
        .join(',');
      if (labelSelector === '') throw new Error(`Service ${namespace}/${service} selects no pods`);
      const pods = (await core.listNamespacedPod({ namespace, labelSelector })).items;
      for (const pod of pods) {
        const ready = pod.status?.conditions?.some(
          (c) => c.type === 'Ready' && c.status === 'True',
        );
        const ip = pod.status?.podIP;
        if (ready !== true || ip === undefined || pod.metadata?.deletionTimestamp !== undefined)
          continue;
        const port =
          typeof targetPort === 'number'
            ? targetPort
            : pod.spec?.containers.flatMap((c) => c.ports ?? []).find((p) => p.name === targetPort)
                ?.containerPort;
        if (port !== undefined) return { host: ip, port };
      }
      throw new Error(
        `no ready pod of Service ${namespace}/${service} has port ${String(targetPort)}`,
      );
    },
    (line) => log(`port-forward ${name}: ${line}`),
  );
}
