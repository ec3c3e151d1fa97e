import {
  CoreV1Api,
  makeInformer,
  type Informer,
  type KubeConfig,
  type ObjectCache,
  type V1Pod,
} from '@kubernetes/client-node';
import { isIP } from 'node:net';
import type { Logger } from 'pino';
import { apiErrorMessage } from '../controller/kube-api-errors';
import { makeKeepAliveApiClient } from '../controller/keep-alive-client';

/** The peer listener's port (the control-plane Service's `https-peer`). */
export const DEFAULT_PEER_PORT = 8443;

/** The control-plane container's port for replica-to-replica hops (config/control-plane). */
export const PEER_PORT_NAME = 'https-peer';
/**
 * Labels every control-plane pod carries: the Deployment's selector
 * (config/control-plane/deployment.yaml; hack/config-manifests.test.ts keeps them in step).
 */
export const CONTROL_PLANE_POD_LABELS: Readonly<Record<string, string>> = Object.freeze({
  'app.kubernetes.io/name': 'polychrome-control-plane',
});
const RESTART_MS = { first: 500, max: 30_000 } as const;

/** Where one replica's peer listener is. */
export interface PeerAddress {
  readonly host: string;
  readonly port: number;
}

/** Finds the peer listener of a replica by its lease holder identity (its pod name). */
export interface PeerDirectory {
  /** The replica's address, or undefined when no ready control-plane pod has that name. */
  find(holder: string): PeerAddress | undefined;
  /** Where it looks, for messages: `the control-plane pods (...) of namespace y`. */
  readonly source: string;
}

/** The label selector of {@link CONTROL_PLANE_POD_LABELS}. */
export function controlPlaneSelector(): string {
  return Object.entries(CONTROL_PLANE_POD_LABELS)
    .map(([k, v]) => `${k}=${v}`)
    .join(',');
}

function isReady(pod: V1Pod): boolean {
  return (
    pod.status?.phase === 'Running' &&
    (pod.status.conditions ?? []).some((c) => c.type === 'Ready' && c.status === 'True')
  );
}

/** The TCP container port named {@link PEER_PORT_NAME}, else the listener's default. */
function peerPortOf(pod: V1Pod): number | undefined {
  for (const container of pod.spec?.containers ?? []) {
    for (const p of container.ports ?? []) {
      if (p.name !== PEER_PORT_NAME) continue;
      if (p.protocol !== undefined && p.protocol !== 'TCP') return undefined;
      const port = p.containerPort;
      return Number.isInteger(port) && port >= 1 && port <= 65_535 ? port : undefined;
    }
  }
  return DEFAULT_PEER_PORT;
}

/**
 * The address of `holder`'s peer listener among `pods`: the Pod named `holder` in
 * `namespace` (the control plane's own) that carries {@link CONTROL_PLANE_POD_LABELS}, is
 * Running and Ready and is not being deleted, at its `status.podIP` (an IP address, never a
 * name), on its container port named `https-peer` (else 8443). Pure.
 *
 * The holder name is only a key: it is matched against pod names, never parsed as an
 * address. Pods (and their status) in the control plane's namespace are written by cluster
 * admins and the kubelet only, never by the users of a conversation's namespace, so nothing
 * those users write can point a replica at an address.
 */
export function findPeerAddress(
  pods: readonly V1Pod[],
  holder: string,
  namespace: string,
): PeerAddress | undefined {
  if (holder === '') return undefined;
  for (const pod of pods) {
    const meta = pod.metadata;
    if (meta?.name !== holder || meta.namespace !== namespace) continue;
    if (meta.deletionTimestamp !== undefined && meta.deletionTimestamp !== null) continue;
    const labels = meta.labels ?? {};
    if (!Object.entries(CONTROL_PLANE_POD_LABELS).every(([k, v]) => labels[k] === v)) continue;
    if (!isReady(pod)) continue;
    const host = pod.status?.podIP ?? pod.status?.podIPs?.[0]?.ip;
    if (host === undefined || isIP(host) === 0) continue;
    const port = peerPortOf(pod);
    if (port === undefined) continue;
    return { host, port };
  }
  return undefined;
}

/** Options of {@link PeerEndpoints}. */
export interface PeerEndpointsOptions {
  readonly kubeConfig: KubeConfig;
  /** The control plane's own namespace. */
  readonly namespace: string;
  readonly log: Logger;
}

/**
 * The {@link PeerDirectory} over an informer (list + watch) of the control-plane pods
 * ({@link CONTROL_PLANE_POD_LABELS}) in the control plane's own namespace: a lookup reads
 * the cache, never the API server. Until the first list arrives (or while the watch
 * restarts after an error) it finds what it last saw, or nothing.
 *
 * Pods, not the Service's EndpointSlices: the API server refuses loopback addresses in
 * EndpointSlices, which local runs need, and a Pod in this namespace is as trusted (only
 * cluster admins and the kubelet write it).
 */
export class PeerEndpoints implements PeerDirectory {
  readonly source: string;
  private readonly namespace: string;
  private readonly informer: Informer<V1Pod> & ObjectCache<V1Pod>;
  private readonly log: Logger;
  private delayMs: number = RESTART_MS.first;
  private closed = false;
  private timer: NodeJS.Timeout | undefined;

  constructor(options: PeerEndpointsOptions) {
    const namespace = options.namespace;
    const labelSelector = controlPlaneSelector();
    this.namespace = namespace;
    this.source = `the control-plane pods (${labelSelector}) of namespace ${namespace}`;
    this.log = options.log;
    const api = makeKeepAliveApiClient(options.kubeConfig, CoreV1Api);
    this.informer = makeInformer(
      options.kubeConfig,
      `/api/v1/namespaces/${namespace}/pods`,
      () => api.listNamespacedPod({ namespace, labelSelector }),
      labelSelector,
    );
    this.informer.on('connect', () => {
      this.delayMs = RESTART_MS.first;
    });
    // The informer stops on an error: list and watch again after a backoff.
    this.informer.on('error', (err: unknown) => {
      if (this.closed) return;
      this.log.warn(
        { watch: 'peer pods', err: apiErrorMessage(err), retryMs: this.delayMs },
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
      this.log.warn({ watch: 'peer pods', err: apiErrorMessage(err) }, 'watch did not start');
    }
  }

  find(holder: string): PeerAddress | undefined {
    return findPeerAddress(this.informer.list(), holder, this.namespace);
  }

  /** Stops watching. Idempotent. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    clearTimeout(this.timer);
    await this.informer.stop();
  }
}
