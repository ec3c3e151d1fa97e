/**
 * The Kubernetes door's listener (docs/kube-api.md): HTTPS for kube-apiserver's front
 * proxy, serving api.polychrome.dev, and the lifetime of its TLS settings (the front-proxy
 * CA, the serving certificate). What each request asks and who asks it is the door's
 * (kube-api-door.ts); the operations are the public API's.
 */
import type { Server } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import type { ApiListenerContext } from '../public-api/door';
import { boundAddress, closed, listen } from '../public-api/http-io';
import { tracedRequest } from '../public-api/request-span';
import { KubeApiDoor, kubeRouteTemplate, type KubeApiDoorOptions } from './kube-api-door';

/** The Kubernetes door's port (the APIService's Service targets it). */
export const DEFAULT_KUBE_API_PORT = 8444;

/** The Kubernetes door's listener. */
export interface KubeListenerOptions extends KubeApiDoorOptions {
  /** @default '0.0.0.0' */
  readonly host?: string;
  /** 0 lets the system pick (tests). @default {@link DEFAULT_KUBE_API_PORT} */
  readonly port?: number;
  /** The serving certificate (PEM) the APIService's caBundle vouches for, and its key. */
  readonly cert: string;
  readonly key: string;
  /**
   * Registers a listener for a renewed certificate and key (common/serving-certificate.ts);
   * the listener serves them to new connections. None: served as given until restart.
   */
  readonly onCertificateChange?: (listener: (pair: { cert: string; key: string }) => void) => void;
}

export class KubeListener {
  private server: Server | undefined;

  constructor(readonly options: KubeListenerOptions) {}

  /**
   * Reads the front proxy's configuration and listens. The handshake asks for a client
   * certificate but admits every client: a request without one from the requestheader CA
   * is answered 401 by the door, with a message (rejecting in the handshake would leave
   * the caller with a bare TLS alert).
   */
  async start(context: ApiListenerContext): Promise<{ host: string; port: number }> {
    const { options } = this;
    const door = new KubeApiDoor(options, context.limits, context.maxBodyBytes);
    const requestHeader = await options.door.start(AbortSignal.timeout(30_000));
    // What new connections get: the front-proxy CA and the serving pair, each replaced
    // when it changes (a rotated CA, a renewed certificate).
    let clientCa = requestHeader.clientCa;
    let serving = { cert: options.cert, key: options.key };
    const secureContext = (): { cert: string; key: string; ca: string } => ({
      ...serving,
      ca: clientCa,
    });
    const server = createHttpsServer(
      { ...secureContext(), requestCert: true, rejectUnauthorized: false, minVersion: 'TLSv1.2' },
      (request, response) =>
        void tracedRequest(
          request,
          response,
          () => context.serve(door, request, response),
          kubeRouteTemplate,
        ),
    );
    options.door.onConfigChange((next) => {
      clientCa = next.clientCa;
      server.setSecureContext(secureContext());
    });
    options.onCertificateChange?.((next) => {
      serving = next;
      server.setSecureContext(secureContext());
    });
    this.server = server;
    await listen(server, options.port ?? DEFAULT_KUBE_API_PORT, options.host);
    return this.address();
  }

  /**
   * The bound address.
   * @throws Error when it is not listening.
   */
  address(): { host: string; port: number } {
    return boundAddress(this.server, 'the Kubernetes door');
  }

  /** Stops taking connections and the door's watches; resolves once the listener closed. */
  stopListening(): Promise<void> {
    this.options.door.stop();
    return closed(this.server);
  }

  closeAllConnections(): void {
    this.server?.closeAllConnections();
  }
}
