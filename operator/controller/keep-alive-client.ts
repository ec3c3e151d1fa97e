/**
 * @kubernetes/client-node API clients whose requests share one keep-alive connection pool,
 * for every part of the control plane that talks to kube-apiserver.
 */
import { ServerConfiguration, createConfiguration } from '@kubernetes/client-node';
import type {
  Configuration,
  KubeConfig,
  RequestContext,
  SecurityAuthentication,
} from '@kubernetes/client-node';
import { Agent as HttpAgent } from 'node:http';
import { Agent as HttpsAgent } from 'node:https';
import { AppError } from '../../common/errors';

/**
 * How long a pooled connection to kube-apiserver may sit idle before this side closes it.
 * kube-apiserver closes a connection idle for 90 s (its http.Server IdleTimeout) and sends
 * no `Keep-Alive: timeout` hint that Node's agent would follow. A request written to a
 * connection at the moment the server closes it fails ("socket hang up", ECONNRESET), and
 * nothing resends it: node-fetch does not retry, and a POST must not be resent blindly.
 * Closing an idle connection first, well inside the server's timeout, leaves no such window.
 */
export const KUBE_IDLE_SOCKET_MS = 60_000;

/**
 * An API client whose requests share one keep-alive connection pool. client-node 1.x
 * builds a new https.Agent for every request, so each call would open (and TLS-handshake)
 * a connection of its own. Headers (a bearer token, re-read as the kubeconfig says) are
 * still applied to every request; the TLS settings (CA, client certificate) are those of
 * the first request, for the life of the client. A pooled connection idle for
 * `idleSocketMs` ({@link KUBE_IDLE_SOCKET_MS} unless given) is closed by this side.
 */
export function makeKeepAliveApiClient<T>(
  kc: KubeConfig,
  apiClientType: new (config: Configuration) => T,
  options: { idleSocketMs?: number } = {},
): T {
  // Node's agent sets this as the socket timeout and destroys a pooled socket that times
  // out while free; on a socket in use it only emits 'timeout', which nothing here acts on.
  const timeout = options.idleSocketMs ?? KUBE_IDLE_SOCKET_MS;
  const cluster = kc.getCurrentCluster();
  if (cluster === null) throw new AppError('failed_precondition', 'the kubeconfig has no cluster');
  let shared: HttpsAgent | HttpAgent | undefined;
  const auth: SecurityAuthentication = {
    getName: () => 'keep-alive kubeconfig',
    async applySecurityAuthentication(context: RequestContext): Promise<void> {
      await kc.applySecurityAuthentication(context);
      if (shared === undefined) {
        const fresh = context.getAgent();
        // A proxy agent is kept as client-node made it.
        if (!(fresh instanceof HttpsAgent) && !(fresh instanceof HttpAgent)) return;
        shared =
          fresh instanceof HttpsAgent
            ? new HttpsAgent({ ...fresh.options, keepAlive: true, timeout })
            : new HttpAgent({ keepAlive: true, timeout });
      }
      context.setAgent(shared);
    },
  };
  return new apiClientType(
    createConfiguration({
      baseServer: new ServerConfiguration(cluster.server, {}),
      authMethods: { default: auth },
    }),
  );
}
