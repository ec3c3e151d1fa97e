import { ApiException, CoreV1Api, type KubeConfig, type V1Pod } from '@kubernetes/client-node';
import {
  CONTROL_PLANE_POD_LABELS,
  PEER_PORT_NAME,
} from '../../../operator/public-api/peer-endpoints';

/** Where config/ deploys the control plane, and where its RBAC lets it watch its pods. */
export const CONTROL_PLANE_NAMESPACE = 'polychrome-system';

/** The loopback address the test replicas' peer listeners bind, and their pods' IP. */
export const PEER_HOST = '127.0.0.1';

/**
 * The Node the test replicas' Pods are bound to. The Node object exists (else the pod
 * garbage collector deletes their pods as orphans) and no local node runs it, so nothing
 * starts them; it is unschedulable and tainted, so nothing else lands there.
 */
export const NO_NODE = 'polychrome-test-no-node';

/** Labels of every object written here, for cleanup. */
const TEST_LABEL = { 'app.kubernetes.io/part-of': 'polychrome-tests' } as const;

function isStatus(err: unknown, code: number): boolean {
  return err instanceof ApiException && err.code === code;
}

/** What {@link writeProcessPod} writes. */
export interface ProcessPod {
  readonly namespace: string;
  readonly name: string;
  readonly labels: Readonly<Record<string, string>>;
  /** The container port named `https-peer`. */
  readonly peerPort: number;
  /** The pod IP written to its status (a loopback address). */
  readonly podIP: string;
  /** Write `Ready: True` and `Running` @default true */
  readonly ready?: boolean;
  /**
   * Who creates the Pod (e.g. a namespace user); its status is written by `admin`, standing
   * in for the kubelet. @default admin
   */
  readonly creator?: KubeConfig;
}

/** Creates {@link NO_NODE} unless it exists. */
export async function ensureNoNode(admin: KubeConfig): Promise<void> {
  try {
    await admin.makeApiClient(CoreV1Api).createNode({
      body: {
        metadata: { name: NO_NODE, labels: { ...TEST_LABEL } },
        spec: {
          unschedulable: true,
          taints: [{ key: 'polychrome.dev/test-no-node', effect: 'NoSchedule' }],
        },
      },
    });
  } catch (err: unknown) {
    if (!isStatus(err, 409)) throw err;
  }
}

/**
 * A Pod object for a process this test runs, bound to {@link NO_NODE}, with the status a
 * kubelet would write for it running (through the status subresource: Running, Ready, its
 * loopback address as pod IP). The spec satisfies Pod Security `restricted`, which the
 * control plane's namespace enforces. Nothing runs it; delete it with {@link deleteProcessPod}.
 */
export async function writeProcessPod(admin: KubeConfig, pod: ProcessPod): Promise<void> {
  const core = admin.makeApiClient(CoreV1Api);
  await ensureNoNode(admin);
  const body: V1Pod = {
    metadata: { name: pod.name, labels: { ...TEST_LABEL, ...pod.labels } },
    spec: {
      nodeName: NO_NODE,
      automountServiceAccountToken: false,
      enableServiceLinks: false,
      securityContext: {
        runAsNonRoot: true,
        runAsUser: 65532,
        seccompProfile: { type: 'RuntimeDefault' },
      },
      containers: [
        {
          name: 'control-plane',
          image: 'polychrome/test-process:none',
          ports: [{ name: PEER_PORT_NAME, containerPort: pod.peerPort, protocol: 'TCP' }],
          securityContext: {
            allowPrivilegeEscalation: false,
            capabilities: { drop: ['ALL'] },
          },
        },
      ],
    },
  };
  await (pod.creator ?? admin)
    .makeApiClient(CoreV1Api)
    .createNamespacedPod({ namespace: pod.namespace, body });
  const ready = pod.ready ?? true;
  const now = new Date();
  await core.replaceNamespacedPodStatus({
    namespace: pod.namespace,
    name: pod.name,
    body: {
      ...(await core.readNamespacedPod({ namespace: pod.namespace, name: pod.name })),
      status: {
        phase: ready ? 'Running' : 'Pending',
        conditions: [
          { type: 'Ready', status: ready ? 'True' : 'False', lastTransitionTime: now },
          { type: 'ContainersReady', status: ready ? 'True' : 'False', lastTransitionTime: now },
          { type: 'PodScheduled', status: 'True', lastTransitionTime: now },
        ],
        podIP: pod.podIP,
        podIPs: [{ ip: pod.podIP }],
        hostIP: PEER_HOST,
        hostIPs: [{ ip: PEER_HOST }],
        startTime: now,
      },
    },
  });
}

/**
 * Deletes a pod of {@link writeProcessPod} at once (grace 0: no kubelet will confirm a
 * graceful deletion). Absent is fine.
 */
export async function deleteProcessPod(
  admin: KubeConfig,
  namespace: string,
  name: string,
): Promise<void> {
  try {
    await admin
      .makeApiClient(CoreV1Api)
      .deleteNamespacedPod({ namespace, name, gracePeriodSeconds: 0 });
  } catch (err: unknown) {
    if (!isStatus(err, 404)) throw err;
  }
}

/**
 * The Pods of one stack's control-plane processes in the control plane's namespace, as a
 * Deployment and a kubelet would write them: named after the replica's identity, with the
 * control-plane labels, Ready, the replica's loopback address as pod IP and its peer port
 * as the `https-peer` container port. Replicas then find each other by the real lookup
 * (operator/public-api/peer-endpoints.ts).
 */
export class PeerPods {
  private readonly names = new Set<string>();

  constructor(
    private readonly admin: KubeConfig,
    readonly namespace: string = CONTROL_PLANE_NAMESPACE,
  ) {}

  /** Writes the Pod of the replica `identity`, whose peer listener is on `port`. */
  async register(identity: string, port: number): Promise<void> {
    this.names.add(identity);
    await writeProcessPod(this.admin, {
      namespace: this.namespace,
      name: identity,
      labels: CONTROL_PLANE_POD_LABELS,
      peerPort: port,
      podIP: PEER_HOST,
    });
  }

  /** Deletes every Pod {@link register} wrote. */
  async dispose(): Promise<void> {
    await Promise.all(
      [...this.names].map((name) => deleteProcessPod(this.admin, this.namespace, name)),
    );
    this.names.clear();
  }
}
