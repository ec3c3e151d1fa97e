import {
  ApiException,
  CoreV1Api,
  DiscoveryV1Api,
  type KubeConfig,
  type V1EndpointSlice,
} from '@kubernetes/client-node';
import { networkInterfaces } from 'node:os';
import { PEER_PORT_NAME } from '../../../operator/public-api/peer-endpoints';

/** Where config/ deploys the control plane, and where its RBAC lets it watch EndpointSlices. */
export const CONTROL_PLANE_NAMESPACE = 'polychrome-system';

/** Overrides the address the test control planes' peer listeners bind and advertise. */
export const PEER_HOST_ENV = 'POLYCHROME_TEST_PEER_HOST';

/**
 * The address test control planes' peer listeners bind, as their EndpointSlices name it.
 * The API server refuses loopback (127.0.0.0/8, ::1) in EndpointSlices, so it is this
 * machine's first non-internal IPv4 address (the listener still only takes the control
 * plane's certificate).
 *
 * @throws Error when the machine has none and {@link PEER_HOST_ENV} is unset.
 */
export function peerHost(): string {
  const given = process.env[PEER_HOST_ENV];
  if (given !== undefined && given !== '') return given;
  for (const addresses of Object.values(networkInterfaces())) {
    for (const address of addresses ?? []) {
      if (address.family === 'IPv4' && !address.internal) return address.address;
    }
  }
  throw new Error(
    `no non-loopback IPv4 address on this machine for the control planes' peer listeners ` +
      `(EndpointSlices refuse loopback addresses); set ${PEER_HOST_ENV} to one`,
  );
}

function isStatus(err: unknown, code: number): boolean {
  return err instanceof ApiException && err.code === code;
}

/**
 * A Service without a selector in the control plane's namespace and one EndpointSlice per
 * test control plane, written as the EndpointSlice controller would for a pod: the
 * endpoint's `targetRef` is a Pod named after the replica's identity, with its address
 * and the `https-peer` port. Replicas then find each other by the real lookup
 * (operator/public-api/peer-endpoints.ts). Each stack gets its own Service name.
 */
export class PeerService {
  private readonly core: CoreV1Api;
  private readonly discovery: DiscoveryV1Api;
  private serviceUid = '';

  constructor(
    private readonly admin: KubeConfig,
    readonly name: string,
    readonly namespace: string = CONTROL_PLANE_NAMESPACE,
  ) {
    this.core = admin.makeApiClient(CoreV1Api);
    this.discovery = admin.makeApiClient(DiscoveryV1Api);
  }

  /** Creates the Service. */
  async create(): Promise<void> {
    const created = await this.core.createNamespacedService({
      namespace: this.namespace,
      body: {
        metadata: { name: this.name, labels: { 'app.kubernetes.io/part-of': 'polychrome-tests' } },
        spec: { ports: [{ name: PEER_PORT_NAME, port: 8443, protocol: 'TCP' }] },
      },
    });
    this.serviceUid = created.metadata?.uid ?? '';
  }

  /** Writes (or rewrites) the EndpointSlice of the replica `identity`. */
  async register(identity: string, host: string, port: number): Promise<void> {
    const name = `${this.name}-${identity}`;
    const body: V1EndpointSlice = {
      metadata: {
        name,
        labels: {
          'kubernetes.io/service-name': this.name,
          'endpointslice.kubernetes.io/managed-by': 'polychrome-tests',
        },
        // Deleted with the Service.
        ownerReferences: [
          { apiVersion: 'v1', kind: 'Service', name: this.name, uid: this.serviceUid },
        ],
      },
      addressType: host.includes(':') ? 'IPv6' : 'IPv4',
      endpoints: [
        {
          addresses: [host],
          conditions: { ready: true, serving: true, terminating: false },
          targetRef: { kind: 'Pod', name: identity, namespace: this.namespace },
        },
      ],
      ports: [{ name: PEER_PORT_NAME, port, protocol: 'TCP' }],
    };
    try {
      await this.discovery.createNamespacedEndpointSlice({ namespace: this.namespace, body });
    } catch (err: unknown) {
      if (!isStatus(err, 409)) throw err;
      const current = await this.discovery.readNamespacedEndpointSlice({
        namespace: this.namespace,
        name,
      });
      await this.discovery.replaceNamespacedEndpointSlice({
        namespace: this.namespace,
        name,
        body: {
          ...body,
          metadata: { ...body.metadata, resourceVersion: current.metadata?.resourceVersion },
        },
      });
    }
  }

  /** Deletes the Service and its EndpointSlices. */
  async dispose(): Promise<void> {
    await this.discovery
      .deleteCollectionNamespacedEndpointSlice({
        namespace: this.namespace,
        labelSelector: `kubernetes.io/service-name=${this.name}`,
      })
      .catch(() => undefined);
    try {
      await this.core.deleteNamespacedService({ namespace: this.namespace, name: this.name });
    } catch (err: unknown) {
      if (!isStatus(err, 404)) throw err;
    }
  }
}
