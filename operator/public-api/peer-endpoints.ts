import {
  DiscoveryV1Api,
  makeInformer,
  type Informer,
  type KubeConfig,
  type ObjectCache,
  type V1EndpointSlice,
} from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { apiErrorMessage, makeKeepAliveApiClient } from '../controller/kube-client';

/** The control-plane Service's port for replica-to-replica hops (config/control-plane). */
export const PEER_PORT_NAME = 'https-peer';
/** The Service in front of the control-plane pods (config/control-plane/service.yaml). */
export const DEFAULT_PEER_SERVICE = 'polychrome-control-plane';
/** Label every EndpointSlice of a Service carries (discovery.k8s.io/v1). */
const SERVICE_NAME_LABEL = 'kubernetes.io/service-name';
const RESTART_MS = { first: 500, max: 30_000 } as const;

/** Where one replica's peer listener is. */
export interface PeerAddress {
  readonly host: string;
  readonly port: number;
}

/** Finds the peer listener of a replica by its lease holder identity (its pod name). */
export interface PeerDirectory {
  /** The replica's address, or undefined when no ready endpoint names it. */
  find(holder: string): PeerAddress | undefined;
  /** Where it looks, for messages: `EndpointSlices of Service x in namespace y`. */
  readonly source: string;
}

/**
 * The address of `holder`'s peer listener in the EndpointSlices of one Service: the first
 * endpoint whose `targetRef` is the Pod named `holder`, that is serving (or, when a slice
 * does not say, ready), with an IP address (IPv4 or IPv6 slices only; an FQDN is never
 * dialled), on the slice's port named `portName`. Pure.
 *
 * Only the EndpointSlice controller (and whoever may write EndpointSlices in the control
 * plane's own namespace) writes these objects: nothing a conversation's namespace holds
 * can point a replica at an address.
 */
export function findPeerAddress(
  slices: readonly V1EndpointSlice[],
  holder: string,
  portName: string = PEER_PORT_NAME,
): PeerAddress | undefined {
  if (holder === '') return undefined;
  for (const slice of slices) {
    if (slice.addressType !== 'IPv4' && slice.addressType !== 'IPv6') continue;
    const port = slice.ports?.find(
      (p) => p.name === portName && (p.protocol === undefined || p.protocol === 'TCP'),
    )?.port;
    if (port === undefined || !Number.isInteger(port) || port < 1 || port > 65_535) continue;
    for (const endpoint of slice.endpoints ?? []) {
      const ref = endpoint.targetRef;
      if (ref?.kind !== 'Pod' || ref.name !== holder) continue;
      const conditions = endpoint.conditions;
      if ((conditions?.serving ?? conditions?.ready) === false) continue;
      const host = endpoint.addresses[0];
      if (host !== undefined && host !== '') return { host, port };
    }
  }
  return undefined;
}

/** Options of {@link PeerEndpoints}. */
export interface PeerEndpointsOptions {
  readonly kubeConfig: KubeConfig;
  /** The control plane's own namespace. */
  readonly namespace: string;
  /** @default {@link DEFAULT_PEER_SERVICE} */
  readonly service?: string;
  readonly log: Logger;
}

/**
 * The {@link PeerDirectory} over an informer (list + watch) of the EndpointSlices of the
 * control-plane Service in the control plane's namespace: a lookup reads the cache, never
 * the API server. Until the first list arrives (or while the watch restarts after an
 * error) it finds what it last saw, or nothing.
 */
export class PeerEndpoints implements PeerDirectory {
  readonly source: string;
  private readonly informer: Informer<V1EndpointSlice> & ObjectCache<V1EndpointSlice>;
  private readonly log: Logger;
  private delayMs: number = RESTART_MS.first;
  private closed = false;
  private timer: NodeJS.Timeout | undefined;

  constructor(options: PeerEndpointsOptions) {
    const service = options.service ?? DEFAULT_PEER_SERVICE;
    const namespace = options.namespace;
    this.source = `the EndpointSlices of Service ${service} in namespace ${namespace}`;
    this.log = options.log;
    const api = makeKeepAliveApiClient(options.kubeConfig, DiscoveryV1Api);
    const labelSelector = `${SERVICE_NAME_LABEL}=${service}`;
    this.informer = makeInformer(
      options.kubeConfig,
      `/apis/discovery.k8s.io/v1/namespaces/${namespace}/endpointslices`,
      () => api.listNamespacedEndpointSlice({ namespace, labelSelector }),
      labelSelector,
    );
    this.informer.on('connect', () => {
      this.delayMs = RESTART_MS.first;
    });
    // The informer stops on an error: list and watch again after a backoff.
    this.informer.on('error', (err: unknown) => {
      if (this.closed) return;
      this.log.warn(
        { watch: 'endpointslices', err: apiErrorMessage(err), retryMs: this.delayMs },
        'watch failed',
      );
      this.timer = setTimeout(() => void this.start(), this.delayMs);
      this.timer.unref();
      this.delayMs = Math.min(this.delayMs * 2, RESTART_MS.max);
    });
  }

  /** Lists and starts watching; resolves after the first list (or its failure, logged). */
  async start(): Promise<void> {
    if (this.closed) return;
    try {
      await this.informer.start();
    } catch (err: unknown) {
      this.log.warn({ watch: 'endpointslices', err: apiErrorMessage(err) }, 'watch did not start');
    }
  }

  find(holder: string): PeerAddress | undefined {
    return findPeerAddress(this.informer.list(), holder);
  }

  /** Stops watching. Idempotent. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    clearTimeout(this.timer);
    await this.informer.stop();
  }
}
