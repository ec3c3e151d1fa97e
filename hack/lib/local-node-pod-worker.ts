import { mkdirSync, rmSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { ApiException, type V1Container } from '@kubernetes/client-node';
import { ContainerRunner, delay, type Backoff, type LaunchPlan } from './local-node-container';
import { resolveEnv, type EnvSources, type PodFields } from './local-node-env';
import type { LoopbackAllocator } from './local-node-ips';
import { prepareImageLaunch, type RegistryImages } from './local-node-image-launch';
import { launchMounts, type ApiServerAddress } from './local-node-runtime';
import {
  resolveCommand,
  restartPolicyOf,
  WaitingReason,
  type ImageCommands,
  type PodView,
} from './local-node-pod';
import {
  buildPodStatus,
  rfc3339,
  type ContainerSnapshot,
  type PodConditionJson,
  type PodSnapshot,
  type PodStatusJson,
} from './local-node-status';
import { containerMounts, PodVolumes, type VolumeApi } from './local-node-volumes';

/** Whether `err` is an API error with one of `codes`. */
export const isApiError = (err: unknown, ...codes: number[]): boolean =>
  err instanceof ApiException && codes.includes(err.code);

/** A caught value as one line for the log: the API's Status message when there is one. */
export function errorText(err: unknown): string {
  if (err instanceof ApiException) {
    const body: unknown = err.body;
    const message =
      typeof body === 'object' && body !== null && 'message' in body ? body.message : body;
    return `HTTP ${err.code}: ${typeof message === 'string' ? message : JSON.stringify(message)}`;
  }
  if (err instanceof Error) return err.message;
  return typeof err === 'string' ? err : JSON.stringify(err);
}

/** A pod as the node names it in paths and log lines. */
export interface PodRef {
  namespace: string;
  name: string;
  uid: string;
}

/**
 * What a pod worker needs from its node: settings, the address pool and the few API
 * calls it makes. The node builds one; tests of a worker could pass their own.
 */
export interface PodContext {
  nodeName: string;
  simulate: boolean;
  hostIP: string;
  images: ImageCommands;
  /**
   * The registry mode (hack/lib/local-node-image-launch.ts): containers run their pinned
   * images, pulled, instead of `images`. @default off
   */
  registry?: RegistryImages;
  /** The node's cluster DNS records, when it keeps them. */
  dnsFile?: string;
  /** kube-apiserver, for the pods' KUBERNETES_SERVICE_HOST and _PORT. */
  apiServer?: ApiServerAddress;
  cwd: string;
  baseEnv: Readonly<Record<string, string>>;
  backoff: Backoff;
  addresses: LoopbackAllocator;
  /** Aborts when the node closes. */
  signal: AbortSignal;
  podDir(pod: PodRef): string;
  logPath(pod: PodRef, container: string): string;
  log(line: string): void;
  /** A JSON merge patch of the status subresource. */
  patchPodStatus(pod: PodView, status: PodStatusJson): Promise<void>;
  /** Deletes with grace 0 and a uid precondition; absent is fine. */
  deletePod(pod: PodView): Promise<void>;
  /** The Secrets and ConfigMaps a container names (absent ones left out). */
  fetchSources(namespace: string, container: V1Container): Promise<EnvSources>;
  /** What pod volumes read and request: Secrets, ConfigMaps, claims, TokenRequests. */
  volumeApi: VolumeApi;
  /** How often a running pod's Secret, ConfigMap and downward API volumes are rewritten. */
  volumeRefreshMs: number;
  /** The worker is done: drop it. */
  forget(worker: PodWorker): void;
}

/** A container the node pretends to run (simulate mode). */
function simulatedContainer(
  pod: PodView,
  container: V1Container,
  startedAt: string,
): ContainerSnapshot {
  return {
    name: container.name,
    image: container.image ?? '',
    imageID: `simulated://${container.image ?? ''}`,
    state: {
      kind: 'running',
      startedAt,
      containerID: `simulated://${pod.metadata.uid}/${container.name}`,
    },
    restartCount: 0,
    ready: true,
    started: true,
  };
}

/** A container that cannot be created (the pod got no address). */
function blockedContainer(container: V1Container, message: string): ContainerSnapshot {
  return {
    name: container.name,
    image: container.image ?? '',
    imageID: '',
    state: { kind: 'waiting', reason: WaitingReason.ContainerCreating, message },
    restartCount: 0,
    ready: false,
    started: false,
  };
}

/** One pod bound to the node: its address, its containers and its status writes. */
export class PodWorker {
  readonly uid: string;
  /** The pod as first seen; name, namespace and uid never change. */
  readonly pod: PodView;
  private podIP: string | undefined;
  private readonly startTime: string;
  private runners: ContainerRunner[] = [];
  private simulated: ContainerSnapshot[] = [];
  /** The pod's volumes; none in simulate mode or before the pod has an address. */
  private volumes: PodVolumes | undefined;
  private conditions: PodConditionJson[] | undefined;
  private lastWritten = '';
  private dirty = false;
  private writing = false;
  private writes: Promise<void> = Promise.resolve();
  private gone = false;
  /** Why the pod cannot start at all (no address left). */
  private blocked: string | undefined;
  private ending: Promise<void> | undefined;

  constructor(
    private readonly ctx: PodContext,
    pod: PodView,
  ) {
    this.pod = pod;
    this.uid = pod.metadata.uid;
    this.startTime = pod.status?.startTime ?? rfc3339(new Date());
    const previous = pod.status?.conditions;
    if (previous !== undefined) {
      this.conditions = previous.map((c) => ({
        type: c.type,
        status: c.status === 'True' ? 'True' : 'False',
        lastProbeTime: null,
        lastTransitionTime: c.lastTransitionTime ?? this.startTime,
      }));
    }
  }

  private get label(): string {
    return `${this.pod.metadata.name}_${this.pod.metadata.namespace}(${this.uid})`;
  }

  /** The pid of a container's running process, if it runs. */
  pidOf(container: string): number | undefined {
    const index = this.pod.spec.containers.findIndex((c) => c.name === container);
    return this.runners[index]?.pid;
  }

  /**
   * Gives the pod its address and starts its containers (or marks them running, in
   * simulate mode); status follows every change. Call once.
   */
  start(): void {
    const { pod, ctx } = this;
    const known = pod.status?.podIP;
    try {
      this.podIP =
        known !== undefined && ctx.addresses.claim(known) ? known : ctx.addresses.allocate();
    } catch (err: unknown) {
      // No address, no sandbox: the pod stays Pending with the reason, as with a CNI failure.
      this.blocked = errorText(err);
      ctx.log(`node ${ctx.nodeName}: pod ${this.label}: ${this.blocked}`);
      this.scheduleStatus();
      return;
    }
    const dir = ctx.podDir(pod.metadata);
    mkdirSync(dir, { recursive: true });
    if (ctx.simulate) {
      const now = rfc3339(new Date());
      this.simulated = pod.spec.containers.map((c) => simulatedContainer(pod, c, now));
    } else {
      this.volumes = new PodVolumes({
        pod,
        dir,
        fields: () => this.fields(),
        api: ctx.volumeApi,
        refreshMs: ctx.volumeRefreshMs,
        log: (line) => ctx.log(`node ${ctx.nodeName}: ${line}`),
        // Containers run as their own user only from images, where the group matters.
        ...(ctx.registry !== undefined && pod.spec.securityContext?.fsGroup !== undefined
          ? { fsGroup: pod.spec.securityContext.fsGroup }
          : {}),
      });
      this.runners = pod.spec.containers.map(
        (container) =>
          new ContainerRunner({
            container,
            podLabel: this.label,
            restartPolicy: restartPolicyOf(pod),
            podIP: this.podIP ?? ctx.hostIP,
            cwd: ctx.cwd,
            logPath: ctx.logPath(pod.metadata, container.name),
            prepare: () => this.prepare(container),
            onChange: () => this.scheduleStatus(),
            backoff: ctx.backoff,
            log: (line) => ctx.log(line),
            runtime: {
              namespace: pod.metadata.namespace,
              // The sources and the node's directory are this machine's, whatever is mounted.
              hostRoots: [ctx.cwd, resolve(ctx.podDir(pod.metadata), '..', '..')],
              ...(ctx.dnsFile !== undefined ? { dnsFile: ctx.dnsFile } : {}),
              ...(ctx.apiServer !== undefined ? { apiServer: ctx.apiServer } : {}),
            },
          }),
      );
      for (const runner of this.runners) runner.start();
    }
    ctx.log(
      `node ${ctx.nodeName}: running pod ${pod.metadata.namespace}/${pod.metadata.name} on ${this.podIP}`,
    );
    this.scheduleStatus();
  }

  /** The pod's values the downward API (env and volumes) can name. */
  private fields(): PodFields {
    const { pod, ctx } = this;
    return {
      name: pod.metadata.name,
      namespace: pod.metadata.namespace,
      uid: pod.metadata.uid,
      nodeName: ctx.nodeName,
      podIP: this.podIP ?? ctx.hostIP,
      hostIP: ctx.hostIP,
      ...(pod.spec.serviceAccountName !== undefined
        ? { serviceAccountName: pod.spec.serviceAccountName }
        : {}),
      ...(pod.metadata.labels !== undefined ? { labels: pod.metadata.labels } : {}),
      ...(pod.metadata.annotations !== undefined ? { annotations: pod.metadata.annotations } : {}),
    };
  }

  /**
   * What one run of `container` starts, in the kubelet's order: the pod's volumes first
   * (the pod waits in ContainerCreating until they can be set up; set up again before
   * every run, so a restart sees current content), then the command, the env and the
   * container's mounts (CreateContainerConfigError).
   */
  private async prepare(container: V1Container): Promise<LaunchPlan> {
    const { pod, ctx } = this;
    const volumes = this.volumes === undefined ? undefined : await this.volumes.setUp();
    if (volumes !== undefined && !volumes.ok) return volumes;
    // The registry mode runs the image unless the pod names a local command itself.
    const own = resolveCommand(pod, container, {});
    const fromImage =
      ctx.registry !== undefined && !own.ok && own.reason === WaitingReason.ErrImagePull;
    const command = fromImage
      ? ({ ok: true, argv: [], source: 'image' } as const)
      : resolveCommand(pod, container, ctx.images);
    if (!command.ok) return command;
    let sources: EnvSources;
    try {
      sources = await ctx.fetchSources(pod.metadata.namespace, container);
    } catch (err: unknown) {
      return {
        ok: false,
        reason: WaitingReason.CreateContainerConfigError,
        message: `could not read the pod's Secrets and ConfigMaps: ${errorText(err)}`,
      };
    }
    const podIP = this.podIP ?? ctx.hostIP;
    const env = resolveEnv(container, this.fields(), sources);
    if (!env.ok) {
      return { ok: false, reason: WaitingReason.CreateContainerConfigError, message: env.message };
    }
    const mounts = containerMounts(container, volumes?.hosts ?? new Map());
    if (!mounts.ok) {
      return {
        ok: false,
        reason: WaitingReason.CreateContainerConfigError,
        message: mounts.message,
      };
    }
    try {
      for (const dir of mounts.createDirs) mkdirSync(dir, { recursive: true });
    } catch (err: unknown) {
      return {
        ok: false,
        reason: WaitingReason.CreateContainerConfigError,
        message: `could not create a subPath directory: ${errorText(err)}`,
      };
    }
    if (fromImage && ctx.registry !== undefined) {
      return prepareImageLaunch({
        registry: ctx.registry,
        container,
        podSecurity: pod.spec.securityContext,
        dir: join(ctx.podDir(pod.metadata), 'containers', container.name),
        hostname: pod.metadata.name,
        podIP,
        env: { HOSTNAME: pod.metadata.name, POD_IP: podIP, ...env.env },
        mounts: mounts.mounts,
        ...(ctx.dnsFile !== undefined ? { dnsFile: ctx.dnsFile } : {}),
      });
    }
    const base = ctx.baseEnv;
    return {
      ok: true,
      launch: {
        argv: command.argv,
        env: { ...base, HOSTNAME: pod.metadata.name, POD_IP: podIP, ...env.env },
        mounts: launchMounts(mounts.mounts, command.source, ctx.cwd),
      },
    };
  }

  private snapshot(): PodSnapshot {
    return {
      restartPolicy: restartPolicyOf(this.pod),
      containers:
        this.blocked !== undefined
          ? this.pod.spec.containers.map((c) => blockedContainer(c, this.blocked ?? ''))
          : this.ctx.simulate
            ? this.simulated
            : this.runners.map((runner) => runner.snapshot()),
      ...(this.podIP !== undefined ? { podIP: this.podIP } : {}),
      hostIP: this.ctx.hostIP,
      startTime: this.startTime,
    };
  }

  /** Coalesces changes: one write in flight, the latest state written after it. */
  private scheduleStatus(): void {
    this.dirty = true;
    if (this.writing) return;
    this.writing = true;
    this.writes = this.flush().finally(() => {
      this.writing = false;
    });
  }

  private async flush(): Promise<void> {
    while (this.dirty && !this.gone) {
      this.dirty = false;
      const status = buildPodStatus(this.snapshot(), this.conditions, rfc3339(new Date()));
      const body = JSON.stringify(status);
      if (body === this.lastWritten) continue;
      try {
        await this.ctx.patchPodStatus(this.pod, status);
        this.lastWritten = body;
        this.conditions = status.conditions;
      } catch (err: unknown) {
        if (isApiError(err, 404)) {
          this.gone = true;
          return;
        }
        this.ctx.log(`node ${this.ctx.nodeName}: status of pod ${this.label}: ${errorText(err)}`);
        if (this.ending !== undefined) return;
        this.dirty = true;
        await delay(1000, this.ctx.signal);
        if (this.ctx.signal.aborted) return;
      }
    }
  }

  private async stopContainers(graceMs: number): Promise<void> {
    await Promise.all(this.runners.map((runner) => runner.stop(graceMs)));
    if (this.ctx.simulate) {
      const now = rfc3339(new Date());
      this.simulated = this.simulated.map((c) => ({
        ...c,
        state: {
          kind: 'terminated',
          exitCode: 143,
          signal: 15,
          reason: 'Error',
          startedAt: c.state.kind === 'running' ? c.state.startedAt : now,
          finishedAt: now,
          containerID: c.state.kind === 'waiting' ? '' : c.state.containerID,
        },
        ready: false,
        started: false,
      }));
    }
  }

  /**
   * Stops the pod's containers within `graceMs`; when `removePod`, writes the last status
   * and deletes the object (grace 0). Frees the pod's address. Safe to call again.
   */
  terminate(graceMs: number, removePod: boolean): Promise<void> {
    this.ending ??= (async () => {
      await this.stopContainers(graceMs);
      // The pod is gone for good: its volumes go too (a claim's data stays), before the
      // object, as the kubelet unmounts before it lets the pod be removed.
      await this.volumes?.tearDown().catch((err: unknown) => {
        this.ctx.log(`node ${this.ctx.nodeName}: volumes of pod ${this.label}: ${errorText(err)}`);
      });
      // The registry mode's writable layers go with the pod, as a runtime's containers do.
      rmSync(join(this.ctx.podDir(this.pod.metadata), 'containers'), {
        recursive: true,
        force: true,
      });
      if (removePod) {
        await this.writeLastStatus();
        this.gone = true;
        await this.ctx.deletePod(this.pod).catch((err: unknown) => {
          this.ctx.log(`node ${this.ctx.nodeName}: deleting pod ${this.label}: ${errorText(err)}`);
        });
        this.ctx.log(
          `node ${this.ctx.nodeName}: removed pod ${this.pod.metadata.namespace}/${this.pod.metadata.name}`,
        );
      }
      this.gone = true;
      if (this.podIP !== undefined) this.ctx.addresses.release(this.podIP);
      this.ctx.forget(this);
    })();
    return this.ending;
  }

  /** For {@link LocalNode.close}: stop at once, write the last status unless asked not to. */
  shutdown(leavePods: boolean, graceMs: number): Promise<void> {
    this.ending ??= (async () => {
      if (leavePods) this.gone = true;
      await this.stopContainers(graceMs);
      // The pod stays bound, so a node started again runs it on the same volumes.
      await this.volumes?.stop();
      if (!leavePods) await this.writeLastStatus();
      this.gone = true;
      if (this.podIP !== undefined) this.ctx.addresses.release(this.podIP);
    })();
    return this.ending;
  }

  /** Writes the stopped containers' status (once; a failure is logged, not retried). */
  private async writeLastStatus(): Promise<void> {
    await this.writes;
    if (this.gone) return;
    this.scheduleStatus();
    await this.writes;
  }
}
