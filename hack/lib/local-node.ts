import { randomUUID } from 'node:crypto';
import {
  chmodSync,
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
} from 'node:fs';
import { arch, cpus, release, totalmem, type as osType } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import {
  CoordinationV1Api,
  CoreV1Api,
  PatchStrategy,
  setHeaderOptions,
  V1MicroTime,
  VersionApi,
  Watch,
  type KubeConfig,
  type V1Container,
  type V1Lease,
  type V1Node,
} from '@kubernetes/client-node';
import { delay, kubeletBackoff, type Backoff } from './local-node-container';
import { referencedObjects, type EnvSources } from './local-node-env';
import {
  listeningIPv4,
  LoopbackAllocator,
  loopbackBlockOf,
  loopbackBlocks,
  loopbackCidr,
} from './local-node-ips';
import { claimLoopbackBlock } from './loopback-lock';
import { ClusterDns } from './local-node-dns';
import {
  servicePortForwarder,
  type ServicePortForward,
  type TcpForwarder,
} from './local-node-host-ports';
import type { RegistryImages } from './local-node-image-launch';
import type { ApiServerAddress } from './local-node-runtime';
import { isPodView, type ImageCommands, type PodView } from './local-node-pod';
import {
  errorText,
  isApiError,
  PodWorker,
  type PodContext,
  type PodRef,
} from './local-node-pod-worker';
import { PodPhase, rfc3339 } from './local-node-status';
import type { ClaimState, ObjectData, VolumeApi } from './local-node-volumes';
import { repoRoot } from './paths';

/** The IPv4 addresses some process listens on now; none where /proc/net/tcp is missing. */
function listeningNow(): ReadonlySet<string> {
  try {
    return listeningIPv4(readFileSync('/proc/net/tcp', 'utf8'));
  } catch {
    return new Set();
  }
}

/** The label every local node carries; `nodeSelector` can name it. */
export const localNodeLabel = 'polychrome.dev/local-node';

/** A read that answers undefined when the object does not exist. */
async function absentOk<T>(read: () => Promise<T>): Promise<T | undefined> {
  try {
    return await read();
  } catch (err: unknown) {
    if (isApiError(err, 404)) return undefined;
    throw err;
  }
}

/** `call`, with an API error turned into one line (the Status message) for a pod's status. */
async function plainErrors<T>(call: () => Promise<T>): Promise<T> {
  try {
    return await call();
  } catch (err: unknown) {
    throw new Error(errorText(err));
  }
}

const decoded = (data: Readonly<Record<string, string>> | undefined): Record<string, Buffer> =>
  Object.fromEntries(
    Object.entries(data ?? {}).map(([key, value]) => [key, Buffer.from(value, 'base64')]),
  );

/** The node's own address; its pods get addresses of its block 127.k.0.0/16 (k ≥ 0). */
const hostIP = '127.0.0.1';

/**
 * Image patterns the node runs without a per-pod annotation: the harness from its build
 * output (`npm run build` writes `dist/`), as its image would run it.
 */
export const defaultImageCommands: ImageCommands = {
  '*polychrome/harness:*': [process.execPath, join(repoRoot, 'dist', 'harness', 'main.js')],
};

/** Options for {@link LocalNode}. */
export interface LocalNodeOptions {
  /**
   * Credentials of a client that may write nodes, leases, pod bindings and pod status,
   * read Secrets, ConfigMaps, PersistentVolumeClaims and PersistentVolumes and create
   * `serviceaccounts/token` (for pod volumes).
   */
  kubeConfig: KubeConfig;
  /** The Node's name (and `kubernetes.io/hostname` label). @default 'polychrome-local' */
  name?: string;
  /** Per-pod logs go to `<stateDir>/pods/<namespace>_<name>_<uid>/<container>.log`. */
  stateDir: string;
  /**
   * Namespaces whose pods this node binds and runs. Scheduling rule: every pod in scope
   * whose `spec.nodeName` is empty and whose `nodeSelector` matches this node's labels
   * (so `kubernetes.io/hostname: <another node>` keeps a pod off it) is bound here.
   * @default every namespace
   */
  namespaces?: readonly string[];
  /** Only pods matching this label selector are in scope. @default all pods */
  labelSelector?: string;
  /** Mark pods Running and Ready without starting processes (for load tests). @default false */
  simulate?: boolean;
  /** Image patterns to local argv. @default {@link defaultImageCommands} */
  images?: ImageCommands;
  /**
   * The registry mode: a container without a local command annotation runs its image,
   * which must be pinned by digest, pulled with this puller and started under `chroot`
   * (hack/lib/local-node-image-launch.ts; needs root). `images` is then not used.
   * @default off
   */
  registry?: RegistryImages;
  /** Working directory of every process. @default the repository root */
  cwd?: string;
  /**
   * Variables every process starts with, before the pod's own (`HOSTNAME` and `POD_IP`
   * are added per pod). A pod does not inherit the node's environment.
   * @default PATH and HOME of this process
   */
  baseEnv?: Readonly<Record<string, string>>;
  /** Upper bound on a pod's termination grace period. @default 30 */
  maxGracePeriodSeconds?: number;
  /**
   * What {@link LocalNode.close} gives each pod, as the kubelet's `shutdownGracePeriod`:
   * the pod's own termination grace period, capped by this. @default 5
   */
  shutdownGracePeriodSeconds?: number;
  /** Container restart back-off. @default the kubelet's: 10 s doubling to 5 min */
  backoff?: Partial<Backoff>;
  /** How often the node's Lease is renewed. @default 10_000 */
  leaseRenewIntervalMs?: number;
  /** How often the Node's status (heartbeat) is rewritten. @default 60_000 */
  nodeStatusIntervalMs?: number;
  /**
   * How often a running pod's Secret, ConfigMap and downward API volumes are rewritten
   * from the API (they are also rewritten before every container start). Projected
   * ServiceAccount tokens are renewed when 80% of their lifetime has passed either way.
   * @default 60_000
   */
  volumeRefreshMs?: number;
  /**
   * `pods` capacity reported on the Node; informational, since nothing schedules against
   * it. The default leaves room for the 1,000-conversation benchmark.
   * @default 1100
   */
  maxPods?: number;
  /**
   * Cluster DNS for the pods (hack/lib/local-node-dns.ts): Service names of the node's
   * namespaces resolve to their ready pods' addresses in every process it runs. It lists
   * Services and pods once a second, so it is off unless a stack needs it.
   * @default false
   */
  clusterDns?: boolean;
  /**
   * Ports on this machine forwarded to a Service's ready pods, as `kubectl port-forward
   * service/NAME` does (hack/lib/local-node-host-ports.ts), while the node runs.
   * @default none
   */
  portForwards?: readonly ServicePortForward[];
  /** Progress and trouble lines go here. @default no output */
  log?: (line: string) => void;
}

/** Options for {@link LocalNode.close}. */
export interface LocalNodeCloseOptions {
  /**
   * Leave every pod's status as it is (no API writes), e.g. when the API server is
   * already gone. Otherwise each pod gets a last status with its containers terminated.
   * @default false
   */
  leavePods?: boolean;
}

/** Where kubelets keep their heartbeat Leases; the node's block claims live there too. */
const leaseNamespace = 'kube-node-lease';

const mergePatch = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);

const nodeArch = (): string => {
  switch (arch()) {
    case 'x64':
      return 'amd64';
    case 'ia32':
      return '386';
    default:
      return arch();
  }
};

/**
 * A kubelet stand-in for the local control plane (hack/lib/local-cluster.ts): it
 * registers a Node and keeps its Lease fresh, binds pending pods in its scope to itself
 * (there is no scheduler), and runs each bound pod's containers as local processes on a
 * loopback address of the pod's own, writing real pod status. Each node owns a block
 * 127.k.0.0/16 (its `spec.podCIDR`; the first node gets 127.0.0.0/16, so its first pod
 * is 127.0.1.1), so several nodes, in one process or many, never share an address. Deleting a pod stops its
 * processes and then removes the object, as the kubelet does, so controllers and the
 * operator see exactly what they would see in a cluster.
 *
 * What runs for a container: the pod annotation `polychrome.dev/local-command` (a JSON
 * argv, or an object from container name to argv), else the first entry of `images` that
 * matches the container's image; in the registry mode (`registry`) the container's own
 * image instead, pulled by digest and started under chroot (local-node-image-launch.ts). Each process gets the pod's resolved env (value,
 * secretKeyRef, configMapKeyRef, fieldRef, envFrom) plus `POD_IP`. The pod's volumes
 * (secret, configMap, emptyDir, projected, downwardAPI, persistentVolumeClaim of a
 * hostPath or local PV) are directories under its pod directory, see
 * local-node-volumes.ts; each container's launch names its mounts' host paths.
 *
 * Not modelled: init containers, other volume types, liveness and startup probes, exec and grpc
 * readiness probes (the container counts as ready once it runs), readiness gates,
 * resource limits and `$(VAR)` expansion.
 */
export class LocalNode {
  /** The Node's name. */
  readonly name: string;
  private readonly opts: LocalNodeOptions;
  private readonly core: CoreV1Api;
  private readonly coordination: CoordinationV1Api;
  private readonly workers = new Map<string, PodWorker>();
  private readonly binding = new Set<string>();
  private readonly abort = new AbortController();
  private readonly watches = new Set<AbortController>();
  private readonly loops: Promise<void>[] = [];
  private readonly readySince = rfc3339(new Date());
  private readonly bootID = randomUUID();
  private kubeletVersion = 'v0.0.0';
  private context: PodContext | undefined;
  private nodeUid = '';
  private lease: V1Lease | undefined;
  private started = false;
  private closing: Promise<void> | undefined;

  /** Releases this node's machine-wide claim of its loopback block. */
  private releaseBlock: (() => void) | undefined;
  private dns: ClusterDns | undefined;
  private forwarders: TcpForwarder[] = [];

  constructor(opts: LocalNodeOptions) {
    this.opts = opts;
    this.name = opts.name ?? 'polychrome-local';
    this.core = opts.kubeConfig.makeApiClient(CoreV1Api);
    this.coordination = opts.kubeConfig.makeApiClient(CoordinationV1Api);
  }

  /** Whether pods are marked running without processes. */
  get simulate(): boolean {
    return this.opts.simulate ?? false;
  }

  /** Pods this node currently runs (or simulates). */
  get podCount(): number {
    return this.workers.size;
  }

  /**
   * Registers the Node, takes its Lease and starts watching pods. Resolves once the Node
   * is Ready; pods are then picked up as their watch events arrive.
   * @throws when the API server refuses the Node or the Lease.
   */
  async start(): Promise<void> {
    if (this.started) throw new Error(`local node ${this.name} was already started`);
    this.started = true;
    // Pods' Secret and token volumes live below: this machine's user only, as the
    // kubelet's root-owned pods directory.
    const pods = join(this.opts.stateDir, 'pods');
    mkdirSync(pods, { recursive: true, mode: 0o700 });
    chmodSync(pods, 0o700);
    try {
      this.kubeletVersion =
        (await this.opts.kubeConfig.makeApiClient(VersionApi).getCode()).gitVersion ??
        this.kubeletVersion;
    } catch {
      // The version is cosmetic on a Node; registering matters.
    }
    const block = await this.registerNode();
    await this.removeOrphanedVolumes();
    if (this.opts.clusterDns === true && !this.simulate) {
      mkdirSync(dirname(this.dnsFile), { recursive: true, mode: 0o755 });
      this.dns = new ClusterDns({
        kubeConfig: this.opts.kubeConfig,
        ...(this.opts.namespaces !== undefined ? { namespaces: this.opts.namespaces } : {}),
        file: this.dnsFile,
        log: (line) => this.log(`node ${this.name}: ${line}`),
      });
      await this.dns.start();
    }
    this.context = this.podContext(new LoopbackAllocator(block, listeningNow));
    this.forwarders = (this.opts.portForwards ?? []).map((forward) =>
      servicePortForwarder(this.opts.kubeConfig, forward, (line) =>
        this.log(`node ${this.name}: ${line}`),
      ),
    );
    for (const forwarder of this.forwarders) forwarder.open();
    await this.renewLease();
    this.loops.push(this.heartbeat());
    const namespaces = this.scope;
    const paths =
      namespaces === undefined
        ? ['/api/v1/pods']
        : namespaces.map((ns) => `/api/v1/namespaces/${encodeURIComponent(ns)}/pods`);
    for (const path of paths) this.loops.push(this.watchPods(path));
    this.log(
      `node ${this.name}: ready, watching ${this.opts.namespaces?.join(', ') ?? 'all namespaces'}`,
    );
  }

  /** The namespaces whose pods this node runs; undefined: all (no list, or an empty one). */
  private get scope(): readonly string[] | undefined {
    const namespaces = this.opts.namespaces;
    return namespaces === undefined || namespaces.length === 0 ? undefined : namespaces;
  }

  /**
   * Stops watching, stops every process (SIGTERM, then SIGKILL after the pod's grace
   * period, at most `shutdownGracePeriodSeconds`) and, unless `leavePods`, writes each
   * pod's last status and marks the Node NotReady. Pods stay bound to the Node, so a node
   * started again with the same name runs them again. Idempotent.
   */
  close(options: LocalNodeCloseOptions = {}): Promise<void> {
    this.closing ??= (async () => {
      this.abort.abort();
      await Promise.all(this.forwarders.map((forwarder) => forwarder.close()));
      for (const watch of this.watches) watch.abort();
      await Promise.all(this.loops);
      const leavePods = options.leavePods ?? false;
      const capMs = (this.opts.shutdownGracePeriodSeconds ?? 5) * 1000;
      await Promise.all(
        [...this.workers.values()].map((w) =>
          w.shutdown(leavePods, Math.min(this.gracePeriodMs(w.pod), capMs)),
        ),
      );
      this.workers.clear();
      await this.dns?.stop();
      if (this.nodeUid !== '' && !leavePods) {
        await this.writeNodeStatus(false).catch((err: unknown) =>
          this.log(`node ${this.name}: could not mark the node NotReady: ${errorText(err)}`),
        );
      }
      this.releaseBlock?.();
      this.releaseBlock = undefined;
      this.log(`node ${this.name}: closed`);
    })();
    return this.closing;
  }

  /** The log file of one container of a pod. */
  logPath(pod: PodRef, container: string): string {
    return join(this.podDir(pod), `${container}.log`);
  }

  /** The pid of a container's running process, if it runs on this node. */
  pidOf(podUid: string, container: string): number | undefined {
    return this.workers.get(podUid)?.pidOf(container);
  }

  /** The cluster DNS records the pods' processes read. */
  private get dnsFile(): string {
    // A directory of its own: the registry mode binds it into containers' roots.
    return resolve(this.opts.stateDir, 'cluster-dns', 'records.json');
  }

  /** kube-apiserver's address, as the kubelet gives pods KUBERNETES_SERVICE_HOST and _PORT. */
  private apiServer(): ApiServerAddress | undefined {
    const server = this.opts.kubeConfig.getCurrentCluster()?.server;
    if (server === undefined) return undefined;
    const url = new URL(server);
    const port = url.port !== '' ? url.port : url.protocol === 'https:' ? '443' : '80';
    return { host: url.hostname.replace(/^\[|\]$/g, ''), port };
  }

  private podDir(pod: PodRef): string {
    return resolve(this.opts.stateDir, 'pods', `${pod.namespace}_${pod.name}_${pod.uid}`);
  }

  private log(line: string): void {
    this.opts.log?.(line);
  }

  /** The narrow view of this node a pod worker gets. */
  private podContext(addresses: LoopbackAllocator): PodContext {
    const opts = this.opts;
    return {
      nodeName: this.name,
      simulate: this.simulate,
      hostIP,
      images: opts.images ?? defaultImageCommands,
      ...(opts.registry !== undefined ? { registry: opts.registry } : {}),
      ...(this.dns !== undefined ? { dnsFile: this.dnsFile } : {}),
      ...(this.apiServer() !== undefined ? { apiServer: this.apiServer() } : {}),
      cwd: opts.cwd ?? repoRoot,
      baseEnv: opts.baseEnv ?? {
        ...(process.env.PATH !== undefined ? { PATH: process.env.PATH } : {}),
        ...(process.env.HOME !== undefined ? { HOME: process.env.HOME } : {}),
      },
      backoff: { ...kubeletBackoff, ...opts.backoff },
      addresses,
      signal: this.abort.signal,
      podDir: (pod) => this.podDir(pod),
      logPath: (pod, container) => this.logPath(pod, container),
      log: (line) => this.log(line),
      patchPodStatus: async (pod, status) => {
        await this.core.patchNamespacedPodStatus(
          { name: pod.metadata.name, namespace: pod.metadata.namespace, body: { status } },
          mergePatch,
        );
      },
      deletePod: (pod) => this.deletePod(pod),
      fetchSources: (namespace, container) => this.fetchSources(namespace, container),
      volumeApi: this.volumeApi(),
      volumeRefreshMs: opts.volumeRefreshMs ?? 60_000,
      forget: (worker) => {
        if (this.workers.get(worker.uid) === worker) this.workers.delete(worker.uid);
      },
    };
  }

  /**
   * Removes a pod whose containers have stopped, as the kubelet does: grace 0, guarded
   * by the uid so a new pod of the same name is never hit.
   */
  private async deletePod(pod: PodView): Promise<void> {
    try {
      await this.core.deleteNamespacedPod({
        name: pod.metadata.name,
        namespace: pod.metadata.namespace,
        gracePeriodSeconds: 0,
        body: { gracePeriodSeconds: 0, preconditions: { uid: pod.metadata.uid } },
      });
    } catch (err: unknown) {
      if (!isApiError(err, 404, 409)) throw err;
    }
  }

  /** The reads and TokenRequests of pod volumes, with CoreV1Api. */
  private volumeApi(): VolumeApi {
    const core = this.core;
    return {
      readSecret: (namespace, name) =>
        plainErrors(async (): Promise<ObjectData | undefined> => {
          const secret = await absentOk(() => core.readNamespacedSecret({ name, namespace }));
          return secret === undefined ? undefined : decoded(secret.data);
        }),
      readConfigMap: (namespace, name) =>
        plainErrors(async (): Promise<ObjectData | undefined> => {
          const map = await absentOk(() => core.readNamespacedConfigMap({ name, namespace }));
          if (map === undefined) return undefined;
          const data: Record<string, Buffer> = {};
          for (const [key, value] of Object.entries(map.data ?? {})) {
            data[key] = Buffer.from(value, 'utf8');
          }
          return { ...data, ...decoded(map.binaryData) };
        }),
      readClaim: (namespace, name) =>
        plainErrors(async (): Promise<ClaimState> => {
          const claim = await absentOk(() =>
            core.readNamespacedPersistentVolumeClaim({ name, namespace }),
          );
          if (claim === undefined) return { kind: 'absent' };
          const phase = claim.status?.phase ?? 'Pending';
          const volumeName = claim.spec?.volumeName ?? '';
          if (phase !== 'Bound' || volumeName === '') return { kind: 'unbound', phase };
          const volume = await absentOk(() => core.readPersistentVolume({ name: volumeName }));
          if (volume === undefined) return { kind: 'volume-absent', volumeName };
          return {
            kind: 'bound',
            volumeName,
            path: volume.spec?.hostPath?.path ?? volume.spec?.local?.path,
          };
        }),
      requestToken: (namespace, request) =>
        plainErrors(async () => {
          const answer = await core.createNamespacedServiceAccountToken({
            name: request.serviceAccountName,
            namespace,
            body: {
              spec: {
                // None: the API server's own audiences, as the kubelet asks.
                audiences: request.audience !== undefined ? [request.audience] : [],
                expirationSeconds: request.expirationSeconds,
                boundObjectRef: {
                  apiVersion: 'v1',
                  kind: 'Pod',
                  name: request.pod.name,
                  uid: request.pod.uid,
                },
              },
            },
          });
          const token = answer.status?.token;
          const expiresAt = answer.status?.expirationTimestamp;
          if (token === undefined || token === '' || expiresAt === undefined) {
            throw new Error(
              `the TokenRequest for serviceaccount "${request.serviceAccountName}" returned no token`,
            );
          }
          return { token, expiresAt: new Date(expiresAt) };
        }),
    };
  }

  private async fetchSources(namespace: string, container: V1Container): Promise<EnvSources> {
    const refs = referencedObjects(container);
    const secrets = new Map<string, Record<string, string>>();
    const configMaps = new Map<string, Record<string, string>>();
    await Promise.all([
      ...[...refs.secrets].map(async (name) => {
        const secret = await absentOk(() => this.core.readNamespacedSecret({ name, namespace }));
        if (secret === undefined) return;
        const data: Record<string, string> = {};
        for (const [key, value] of Object.entries(secret.data ?? {})) {
          data[key] = Buffer.from(value, 'base64').toString('utf8');
        }
        secrets.set(name, data);
      }),
      ...[...refs.configMaps].map(async (name) => {
        const map = await absentOk(() => this.core.readNamespacedConfigMap({ name, namespace }));
        if (map !== undefined) configMaps.set(name, { ...(map.data ?? {}) });
      }),
    ]);
    return { secrets, configMaps };
  }

  // ---- node registration ----

  private nodeLabels(): Record<string, string> {
    return {
      'kubernetes.io/hostname': this.name,
      'kubernetes.io/os': process.platform,
      'kubernetes.io/arch': nodeArch(),
      'node.kubernetes.io/instance-type': this.simulate
        ? 'polychrome-simulated'
        : 'polychrome-local',
      [localNodeLabel]: 'true',
    };
  }

  /**
   * Creates the Node, or takes over one an earlier run registered, gives it a loopback
   * block of its own as `spec.podCIDR` (kept across restarts: the field is immutable)
   * and writes its status. Returns the block.
   */
  private async registerNode(): Promise<number> {
    const labels = this.nodeLabels();
    let node: V1Node;
    try {
      node = await this.core.createNode({ body: { metadata: { name: this.name, labels } } });
    } catch (err: unknown) {
      if (!isApiError(err, 409)) throw err;
      // Registered by an earlier run: take it over, as a restarted kubelet does.
      node = await this.core.patchNode(
        { name: this.name, body: { metadata: { labels } } },
        mergePatch,
      );
    }
    const uid = node.metadata?.uid;
    if (uid === undefined) throw new Error(`node ${this.name}: the API server returned no uid`);
    this.nodeUid = uid;
    const existing = node.spec?.podCIDR;
    let block = existing !== undefined ? loopbackBlockOf(existing) : undefined;
    if (existing !== undefined && block === undefined) {
      throw new Error(
        `node ${this.name} has podCIDR ${existing}, not a loopback block: delete the Node or choose another name`,
      );
    }
    if (block !== undefined) {
      // podCIDR is immutable: keep the block, and say so if another cluster here uses it.
      this.releaseBlock = claimLoopbackBlock(block);
      if (this.releaseBlock === undefined) {
        this.log(
          `node ${this.name}: another local cluster on this machine also uses ${existing ?? ''}; pods of the two may reach each other: delete this Node to get a free block`,
        );
      }
    } else {
      block = await this.claimBlock();
      const cidr = loopbackCidr(block);
      await this.core.patchNode(
        { name: this.name, body: { spec: { podCIDR: cidr, podCIDRs: [cidr] } } },
        mergePatch,
      );
    }
    await this.writeNodeStatus();
    return block;
  }

  /**
   * Claims the lowest loopback block no other local node holds. The claim is a Lease
   * named after the block (creating it is atomic, so two nodes starting at once cannot
   * both win), owned by this Node so the garbage collector frees it with the Node.
   */
  private async claimBlock(): Promise<number> {
    for (let block = 0; block < loopbackBlocks; block++) {
      // Another local cluster on this machine may use the block: skip it.
      const releaseClaim = claimLoopbackBlock(block);
      if (releaseClaim === undefined) continue;
      const name = `polychrome-local-pods-127-${block}`;
      try {
        await this.coordination.createNamespacedLease({
          namespace: leaseNamespace,
          body: {
            metadata: {
              name,
              namespace: leaseNamespace,
              ownerReferences: [
                { apiVersion: 'v1', kind: 'Node', name: this.name, uid: this.nodeUid },
              ],
            },
            spec: { holderIdentity: this.name },
          },
        });
        this.releaseBlock = releaseClaim;
        return block;
      } catch (err: unknown) {
        if (!isApiError(err, 409)) {
          releaseClaim();
          throw err;
        }
        const held = await this.coordination.readNamespacedLease({
          name,
          namespace: leaseNamespace,
        });
        if (held.spec?.holderIdentity === this.name) {
          this.releaseBlock = releaseClaim;
          return block;
        }
        releaseClaim();
      }
    }
    throw new Error(
      `every loopback block (127.0.0.0/16 to 127.255.0.0/16) is held by another local node: delete Nodes that are not used`,
    );
  }

  /** After the Node was deleted: register it again; its block must stay the same. */
  private async reregister(): Promise<void> {
    const block = await this.registerNode();
    if (block !== this.context?.addresses.block) {
      this.log(
        `node ${this.name}: registered again with block ${loopbackCidr(block)}; running pods keep their old addresses`,
      );
    }
  }

  private async writeNodeStatus(ready = true): Promise<void> {
    const now = rfc3339(new Date());
    const condition = (type: string, status: boolean, reason: string, message: string): object => ({
      type,
      status: status ? 'True' : 'False',
      reason,
      message,
      lastHeartbeatTime: now,
      lastTransitionTime: this.readySince,
    });
    const resources = {
      cpu: String(cpus().length),
      memory: `${Math.floor(totalmem() / 1024)}Ki`,
      pods: String(this.opts.maxPods ?? 1100),
    };
    const status = {
      capacity: resources,
      allocatable: resources,
      conditions: [
        condition(
          'MemoryPressure',
          false,
          'KubeletHasSufficientMemory',
          'kubelet has sufficient memory available',
        ),
        condition(
          'DiskPressure',
          false,
          'KubeletHasNoDiskPressure',
          'kubelet has no disk pressure',
        ),
        condition(
          'PIDPressure',
          false,
          'KubeletHasSufficientPID',
          'kubelet has sufficient PID available',
        ),
        ready
          ? condition('Ready', true, 'KubeletReady', 'kubelet is posting ready status')
          : {
              ...condition('Ready', false, 'KubeletNotReady', 'the local node stopped'),
              lastTransitionTime: now,
            },
      ],
      addresses: [
        { type: 'InternalIP', address: hostIP },
        { type: 'Hostname', address: this.name },
      ],
      nodeInfo: {
        machineID: this.name,
        systemUUID: this.name,
        bootID: this.bootID,
        kernelVersion: release(),
        osImage: `${osType()} ${release()}`,
        containerRuntimeVersion: `polychrome-local://${this.simulate ? 'simulated' : 'process'}`,
        kubeletVersion: this.kubeletVersion,
        kubeProxyVersion: '',
        operatingSystem: process.platform,
        architecture: nodeArch(),
      },
    };
    await this.core.patchNodeStatus({ name: this.name, body: { status } }, mergePatch);
  }

  private async renewLease(): Promise<void> {
    const namespace = leaseNamespace;
    const renewTime = new V1MicroTime();
    if (this.lease === undefined) {
      try {
        this.lease = await this.coordination.readNamespacedLease({ name: this.name, namespace });
      } catch (err: unknown) {
        if (!isApiError(err, 404)) throw err;
        this.lease = await this.coordination.createNamespacedLease({
          namespace,
          body: {
            metadata: {
              name: this.name,
              namespace,
              // The garbage collector removes the Lease with its Node.
              ownerReferences: [
                { apiVersion: 'v1', kind: 'Node', name: this.name, uid: this.nodeUid },
              ],
            },
            spec: {
              holderIdentity: this.name,
              leaseDurationSeconds: 40,
              renewTime,
            },
          },
        });
        return;
      }
    }
    const lease = this.lease;
    try {
      this.lease = await this.coordination.replaceNamespacedLease({
        name: this.name,
        namespace,
        body: {
          ...lease,
          spec: { ...lease.spec, holderIdentity: this.name, leaseDurationSeconds: 40, renewTime },
        },
      });
    } catch (err: unknown) {
      // A stale copy: read it again on the next tick.
      this.lease = undefined;
      throw err;
    }
  }

  private async heartbeat(): Promise<void> {
    const { signal } = this.abort;
    let lastStatusMs = Date.now();
    const statusEveryMs = this.opts.nodeStatusIntervalMs ?? 60_000;
    while (!signal.aborted) {
      await delay(this.opts.leaseRenewIntervalMs ?? 10_000, signal);
      if (signal.aborted) return;
      try {
        await this.renewLease();
        if (Date.now() - lastStatusMs >= statusEveryMs) {
          await this.writeNodeStatus();
          lastStatusMs = Date.now();
        }
      } catch (err: unknown) {
        this.log(`node ${this.name}: heartbeat failed, retrying: ${errorText(err)}`);
        // Someone deleted the Node (and with it, through its owner reference, the Lease):
        // register again, as a kubelet does.
        if (isApiError(err, 404)) {
          await this.reregister().catch((again: unknown) =>
            this.log(`node ${this.name}: registering again failed: ${errorText(again)}`),
          );
        }
      }
    }
  }

  // ---- pods ----

  private async watchPods(path: string): Promise<void> {
    const { signal } = this.abort;
    const watch = new Watch(this.opts.kubeConfig);
    const query: Record<string, string> = {};
    if (this.opts.labelSelector !== undefined) query.labelSelector = this.opts.labelSelector;
    let first = true;
    while (!signal.aborted) {
      if (!first) void this.resync();
      first = false;
      // No resourceVersion: the API server first sends every existing pod as ADDED, so a
      // restarted watch (or node) catches up without a separate list.
      let current: AbortController | undefined;
      await new Promise<void>((resolveWatch) => {
        let ended = false;
        const end = (err: unknown): void => {
          if (ended) return;
          ended = true;
          if (current !== undefined) this.watches.delete(current);
          if (err !== null && err !== undefined && !signal.aborted) {
            this.log(`node ${this.name}: pod watch on ${path} ended: ${errorText(err)}`);
          }
          resolveWatch();
        };
        watch
          .watch(path, query, (type: string, obj: unknown) => this.onPodEvent(type, obj), end)
          .then((controller) => {
            current = controller;
            if (ended) return;
            this.watches.add(controller);
            if (signal.aborted) controller.abort();
          })
          .catch(end);
      });
      await delay(1000, signal);
    }
  }

  /** After a watch gap: stop workers whose pod was deleted while nobody watched. */
  private async resync(): Promise<void> {
    for (const worker of [...this.workers.values()]) {
      try {
        const pod = await this.core.readNamespacedPod({
          name: worker.pod.metadata.name,
          namespace: worker.pod.metadata.namespace,
        });
        if (pod.metadata?.uid === worker.uid) continue;
      } catch (err: unknown) {
        if (!isApiError(err, 404)) continue;
      }
      void worker.terminate(this.gracePeriodMs(worker.pod), false);
    }
  }

  private onPodEvent(type: string, obj: unknown): void {
    if (this.abort.signal.aborted || !isPodView(obj)) return;
    const uid = obj.metadata.uid;
    if (type === 'DELETED') {
      this.binding.delete(uid);
      const worker = this.workers.get(uid);
      if (worker !== undefined) void worker.terminate(this.gracePeriodMs(obj), false);
      return;
    }
    if (type !== 'ADDED' && type !== 'MODIFIED') return;
    this.handlePod(obj);
  }

  private handlePod(pod: PodView): void {
    const nodeName = pod.spec.nodeName ?? '';
    const deleting = pod.metadata.deletionTimestamp !== undefined;
    if (nodeName === '') {
      if (!deleting && this.selects(pod)) void this.bind(pod);
      return;
    }
    if (nodeName !== this.name) return;
    const worker = this.workers.get(pod.metadata.uid);
    if (deleting) {
      if (worker !== undefined) void worker.terminate(this.gracePeriodMs(pod), true);
      else {
        // Finished before this node started: its volumes (if any are left) go with it.
        this.removeVolumes(this.podDir(pod.metadata));
        void this.deletePod(pod).catch((err: unknown) => this.logPodError(pod, err));
      }
      return;
    }
    if (worker !== undefined) return;
    // Finished before this node (re)started: nothing to run again.
    if (pod.status?.phase === PodPhase.Succeeded || pod.status?.phase === PodPhase.Failed) return;
    if (this.context === undefined) return;
    const created = new PodWorker(this.context, pod);
    this.workers.set(pod.metadata.uid, created);
    created.start();
  }

  /** Removes a pod directory's `volumes/` (Secrets, tokens); a failure is logged. */
  private removeVolumes(podDir: string): void {
    try {
      rmSync(join(podDir, 'volumes'), { recursive: true, force: true });
    } catch (err: unknown) {
      this.log(`node ${this.name}: could not remove ${join(podDir, 'volumes')}: ${errorText(err)}`);
    }
  }

  /**
   * As the kubelet's orphaned pod cleanup: the volumes of a pod directory whose pod no
   * longer exists (deleted while the node was down, or force-deleted) are removed. Its
   * logs stay. Any pod that exists keeps its directory, whatever node it is on (nodes
   * may share a state directory). Only namespaces in scope are looked at; a failed list
   * leaves everything as it is.
   */
  private async removeOrphanedVolumes(): Promise<void> {
    const root = join(this.opts.stateDir, 'pods');
    const scope = this.scope;
    let live: Set<string>;
    // A directory changed since the list began may be a pod the list did not see yet.
    const listedAtMs = Date.now();
    try {
      const lists =
        scope === undefined
          ? [await this.core.listPodForAllNamespaces()]
          : await Promise.all(scope.map((namespace) => this.core.listNamespacedPod({ namespace })));
      live = new Set(lists.flatMap((list) => list.items.map((pod) => pod.metadata?.uid ?? '')));
    } catch (err: unknown) {
      this.log(
        `node ${this.name}: could not list its pods, orphaned volumes stay: ${errorText(err)}`,
      );
      return;
    }
    for (const entry of readdirSync(root)) {
      const [namespace, , uid] = entry.split('_');
      if (namespace === undefined || uid === undefined) continue;
      if (scope !== undefined && !scope.includes(namespace)) continue;
      const dir = join(root, entry);
      if (live.has(uid) || !existsSync(join(dir, 'volumes'))) continue;
      // (A second of slack for coarse file-system clocks.)
      if (statSync(dir).mtimeMs >= listedAtMs - 1000) continue;
      this.log(`node ${this.name}: removing the volumes of orphaned pod directory ${entry}`);
      this.removeVolumes(dir);
    }
  }

  /** The scheduling rule: the pod's nodeSelector must match this node's labels. */
  private selects(pod: PodView): boolean {
    const labels = this.nodeLabels();
    return Object.entries(pod.spec.nodeSelector ?? {}).every(([k, v]) => labels[k] === v);
  }

  private gracePeriodMs(pod: PodView): number {
    const asked =
      pod.metadata.deletionGracePeriodSeconds ?? pod.spec.terminationGracePeriodSeconds ?? 30;
    return Math.min(asked, this.opts.maxGracePeriodSeconds ?? 30) * 1000;
  }

  private async bind(pod: PodView): Promise<void> {
    const { uid, name, namespace } = pod.metadata;
    if (this.binding.has(uid)) return;
    this.binding.add(uid);
    try {
      for (let attempt = 0; !this.abort.signal.aborted; attempt++) {
        try {
          await this.core.createNamespacedPodBinding({
            name,
            namespace,
            body: {
              metadata: { name, namespace, uid },
              target: { apiVersion: 'v1', kind: 'Node', name: this.name },
            },
          });
          this.log(`node ${this.name}: bound pod ${namespace}/${name}`);
          return;
        } catch (err: unknown) {
          // 409: bound already (by us or another node); 404: gone.
          if (isApiError(err, 404, 409)) return;
          this.logPodError(pod, err);
          await delay(Math.min(500 * 2 ** attempt, 10_000), this.abort.signal);
        }
      }
    } finally {
      this.binding.delete(uid);
    }
  }

  private logPodError(pod: PodView, err: unknown): void {
    this.log(
      `node ${this.name}: pod ${pod.metadata.namespace}/${pod.metadata.name}: ${errorText(err)}`,
    );
  }
}
