import { spawn, type ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import { closeSync, openSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { connect } from 'node:net';
import { constants } from 'node:os';
import type { V1Container, V1ContainerPort, V1Probe } from '@kubernetes/client-node';
import { HostPorts } from './local-node-host-ports';
import { RestartPolicy, WaitingReason } from './local-node-pod';
import { podProcessEnv, type Mount, type PodRuntime } from './local-node-runtime';
import {
  rfc3339,
  terminatedReason,
  type ContainerSnapshot,
  type ContainerState,
  type TerminatedState,
} from './local-node-status';

/** What to start for one run of a container. */
export interface ContainerLaunch {
  argv: readonly string[];
  env: Readonly<Record<string, string>>;
  /** The container's volumes, where they are on this machine. @default none */
  mounts?: readonly Mount[];
  /** The image's digest reference, for the status's `imageID`. @default one of the argv */
  imageID?: string;
  /**
   * A container run from its image (hack/lib/local-node-image.ts): its volumes are bound
   * into its root, so no path is rewritten, and the pod runtime's preload and DNS records
   * are at these paths inside it.
   */
  chroot?: { preload: string; dnsFile?: string };
}

/** A launch, or the waiting reason and message that keep the container from starting. */
export type LaunchPlan =
  { ok: true; launch: ContainerLaunch } | { ok: false; reason: WaitingReason; message: string };

/** Restart back-off, as the kubelet's (10 s doubling to 5 min, reset after 10 min of running). */
export interface Backoff {
  /** @default 10_000 */
  initialMs: number;
  /** @default 300_000 */
  maxMs: number;
  /** A run at least this long resets the back-off. @default 600_000 */
  resetAfterMs: number;
}

/** The kubelet's restart back-off. */
export const kubeletBackoff: Backoff = { initialMs: 10_000, maxMs: 300_000, resetAfterMs: 600_000 };

/** Options for {@link ContainerRunner}. */
export interface ContainerRunnerOptions {
  container: V1Container;
  /** `name_namespace(uid)`, as the kubelet names a pod in messages. */
  podLabel: string;
  restartPolicy: RestartPolicy;
  /** The pod's loopback address: readiness probes go there unless they name a host. */
  podIP: string;
  cwd: string;
  /** Output of every run is appended here. */
  logPath: string;
  /** Called before every run, so a restart sees current Secrets and ConfigMaps. */
  prepare: () => Promise<LaunchPlan>;
  /** Called after every change of the container's state, readiness or restart count. */
  onChange: () => void;
  backoff: Backoff;
  log: (line: string) => void;
  /**
   * The pod's view for its processes (hack/lib/local-node-runtime.ts): without it a
   * process gets the launch's environment as it is, and no preload.
   */
  runtime?: Omit<PodRuntime, 'mounts' | 'podIP'>;
}

/** Resolves after `ms`, or at once when `signal` aborts (never rejects). */
export function delay(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve();
    const timer = setTimeout(done, ms);
    function done(): void {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    }
    signal.addEventListener('abort', done, { once: true });
  });
}

/** Whether a container that exited with `exitCode` starts again under `policy`. */
export function shouldRestart(policy: RestartPolicy, exitCode: number): boolean {
  switch (policy) {
    case RestartPolicy.Always:
      return true;
    case RestartPolicy.OnFailure:
      return exitCode !== 0;
    case RestartPolicy.Never:
      return false;
    default:
      return false;
  }
}

/** Signals the container's whole process group (it runs as its own group leader). */
function signalGroup(pid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(-pid, signal);
  } catch {
    // The group is already gone.
  }
}

/**
 * The waiting state for a plan that cannot start: a pull that failed again is the
 * kubelet's ImagePullBackOff (`Back-off pulling image "…"`, the failure after it), the
 * first one ErrImagePull, anything else its own reason.
 */
export function waitingAfter(
  current: ContainerState,
  plan: { reason: WaitingReason; message: string },
  image: string,
): ContainerState & { kind: 'waiting' } {
  const again =
    current.kind === 'waiting' &&
    (current.reason === WaitingReason.ErrImagePull ||
      current.reason === WaitingReason.ImagePullBackOff);
  if (plan.reason === WaitingReason.ErrImagePull && again) {
    return {
      kind: 'waiting',
      reason: WaitingReason.ImagePullBackOff,
      message: `Back-off pulling image "${image}": ${plan.message}`,
    };
  }
  return { kind: 'waiting', reason: plan.reason, message: plan.message };
}

interface ExitInfo {
  exitCode: number;
  signal?: number;
  reason?: string;
  message?: string;
}

/**
 * One container of a pod on the local node, run as a local process group: started,
 * watched, restarted with back-off under the pod's restart policy, probed for readiness
 * and stopped (SIGTERM to the group, SIGKILL after the grace period). A container ends
 * when its main process ends, as in a real runtime: strays left in its group are killed.
 */
export class ContainerRunner {
  private state: ContainerState = { kind: 'waiting', reason: WaitingReason.ContainerCreating };
  private lastState: TerminatedState | undefined;
  private restartCount = 0;
  private ready = false;
  private started = false;
  private imageID = '';
  private child: ChildProcess | undefined;
  private exited: Promise<ExitInfo> | undefined;
  private loop: Promise<void> | undefined;
  private readonly abort = new AbortController();
  private readonly hostPorts: HostPorts;

  constructor(private readonly opts: ContainerRunnerOptions) {
    this.hostPorts = new HostPorts(opts.container.ports ?? [], opts.podIP, (line) =>
      opts.log(`container ${this.describe()}: ${line}`),
    );
  }

  /** The pid of the running process, if one runs. */
  get pid(): number | undefined {
    return this.exited !== undefined ? this.child?.pid : undefined;
  }

  /** Starts the container's run loop; call once. */
  start(): void {
    this.hostPorts.open();
    this.loop ??= this.run().catch((err: unknown) => {
      this.opts.log(
        `container ${this.describe()}: run loop failed: ${err instanceof Error ? err.message : JSON.stringify(err)}`,
      );
    });
  }

  /** The container's current state, for the pod status. */
  snapshot(): ContainerSnapshot {
    return {
      name: this.opts.container.name,
      image: this.opts.container.image ?? '',
      imageID: this.imageID,
      state: this.state,
      ...(this.lastState !== undefined ? { lastState: this.lastState } : {}),
      restartCount: this.restartCount,
      ready: this.ready,
      started: this.started,
    };
  }

  /**
   * Stops the container for good: no restart; SIGTERM to its process group, SIGKILL
   * after `graceMs`. Resolves once the process is gone. Safe to call twice.
   */
  async stop(graceMs: number): Promise<void> {
    this.abort.abort();
    const pid = this.pid;
    const exited = this.exited;
    if (pid !== undefined && exited !== undefined) {
      if (graceMs > 0) {
        signalGroup(pid, 'SIGTERM');
        const timer = new AbortController();
        const inTime = await Promise.race([
          exited.then(() => true),
          delay(graceMs, timer.signal).then(() => false),
        ]);
        timer.abort();
        if (!inTime) signalGroup(pid, 'SIGKILL');
      } else {
        signalGroup(pid, 'SIGKILL');
      }
      await exited;
    }
    await this.loop;
    await this.hostPorts.close();
  }

  private describe(): string {
    return `${this.opts.container.name} of ${this.opts.podLabel}`;
  }

  private setState(state: ContainerState): void {
    this.state = state;
    this.opts.onChange();
  }

  private async run(): Promise<void> {
    const { signal } = this.abort;
    const { backoff } = this.opts;
    let backoffMs = backoff.initialMs;
    while (!signal.aborted) {
      const plan = await this.opts.prepare();
      if (signal.aborted) return;
      if (!plan.ok) {
        // The kubelet retries on its sync loop; a Secret created later lets the pod start.
        const state = waitingAfter(this.state, plan, this.opts.container.image ?? '');
        if (this.state.kind !== 'waiting' || this.state.message !== state.message) {
          this.setState(state);
        }
        await delay(backoffMs, signal);
        backoffMs = Math.min(backoffMs * 2, backoff.maxMs);
        continue;
      }
      const startedMs = Date.now();
      const exit = await this.runOnce(plan.launch, signal);
      if (signal.aborted || !shouldRestart(this.opts.restartPolicy, exit.exitCode)) return;
      if (Date.now() - startedMs >= backoff.resetAfterMs) backoffMs = backoff.initialMs;
      if (this.state.kind === 'terminated') this.lastState = this.state;
      this.setState({
        kind: 'waiting',
        reason: WaitingReason.CrashLoopBackOff,
        message: `back-off ${Math.round(backoffMs / 1000)}s restarting failed container=${this.opts.container.name} pod=${this.opts.podLabel}`,
      });
      await delay(backoffMs, signal);
      backoffMs = Math.min(backoffMs * 2, backoff.maxMs);
      if (signal.aborted) return;
      this.restartCount++;
    }
  }

  /** The launch's environment with the pod's view (local-node-runtime.ts) added. */
  private processEnv(launch: ContainerLaunch): Record<string, string> {
    const runtime = this.opts.runtime;
    if (runtime === undefined) return { ...launch.env };
    if (launch.chroot === undefined) {
      return podProcessEnv(launch.env, {
        ...runtime,
        podIP: this.opts.podIP,
        mounts: launch.mounts ?? [],
      });
    }
    const { dnsFile: _hostDns, hostRoots: _hostRoots, ...rest } = runtime;
    return podProcessEnv(launch.env, {
      ...rest,
      podIP: this.opts.podIP,
      mounts: [],
      preload: launch.chroot.preload,
      ...(launch.chroot.dnsFile !== undefined ? { dnsFile: launch.chroot.dnsFile } : {}),
    });
  }

  private async runOnce(launch: ContainerLaunch, signal: AbortSignal): Promise<ExitInfo> {
    const [command, ...args] = launch.argv;
    this.imageID =
      launch.imageID ??
      `local://sha256:${createHash('sha256').update(JSON.stringify(launch.argv)).digest('hex')}`;
    const startedAt = rfc3339(new Date());
    const fd = openSync(this.opts.logPath, 'a');
    let child: ChildProcess;
    try {
      // Its own process group, so stopping the container reaches what it spawned (npx, tsx).
      child = spawn(command ?? '', args, {
        stdio: ['ignore', fd, fd],
        env: this.processEnv(launch),
        cwd: this.opts.cwd,
        detached: true,
      });
    } finally {
      closeSync(fd);
    }
    const exited = new Promise<ExitInfo>((resolve) => {
      child.once('exit', (code, signalName) => {
        const number = signalName !== null ? constants.signals[signalName] : undefined;
        resolve(
          number !== undefined
            ? { exitCode: 128 + number, signal: number }
            : { exitCode: code ?? 0 },
        );
      });
      // A command that cannot be spawned: the runtime's StartError, exit code 128.
      child.once('error', (err) =>
        resolve({ exitCode: 128, reason: 'StartError', message: err.message }),
      );
    });
    const pid = child.pid;
    const containerID = `local://${pid ?? 0}`;
    let exit: ExitInfo;
    if (pid !== undefined) {
      this.child = child;
      this.exited = exited;
      this.started = true;
      this.setState({ kind: 'running', startedAt, containerID });
      const probing = new AbortController();
      const stopProbing = (): void => probing.abort();
      signal.addEventListener('abort', stopProbing, { once: true });
      const prober = this.watchReadiness(probing.signal);
      exit = await exited;
      probing.abort();
      signal.removeEventListener('abort', stopProbing);
      await prober;
      signalGroup(pid, 'SIGKILL');
      this.exited = undefined;
      this.child = undefined;
    } else {
      exit = await exited;
    }
    this.ready = false;
    this.started = false;
    this.setState({
      kind: 'terminated',
      exitCode: exit.exitCode,
      ...(exit.signal !== undefined ? { signal: exit.signal } : {}),
      reason: exit.reason ?? terminatedReason(exit.exitCode),
      ...(exit.message !== undefined ? { message: exit.message } : {}),
      startedAt,
      finishedAt: rfc3339(new Date()),
      containerID,
    });
    return exit;
  }

  private setReady(ready: boolean): void {
    if (this.ready === ready) return;
    this.ready = ready;
    this.opts.onChange();
  }

  private async watchReadiness(signal: AbortSignal): Promise<void> {
    const probe = this.opts.container.readinessProbe;
    if (probe === undefined || (probe.httpGet === undefined && probe.tcpSocket === undefined)) {
      if (probe !== undefined) {
        this.opts.log(
          `container ${this.describe()}: exec and grpc readiness probes are not run locally; ready once running`,
        );
      }
      this.setReady(true);
      return;
    }
    const periodMs = (probe.periodSeconds ?? 10) * 1000;
    const successThreshold = probe.successThreshold ?? 1;
    const failureThreshold = probe.failureThreshold ?? 3;
    await delay((probe.initialDelaySeconds ?? 0) * 1000, signal);
    let successes = 0;
    let failures = 0;
    while (!signal.aborted) {
      const ok = await probeOnce(probe, this.opts.podIP, this.opts.container.ports ?? [], signal);
      if (signal.aborted) return;
      if (ok) {
        failures = 0;
        if (++successes >= successThreshold) this.setReady(true);
      } else {
        successes = 0;
        if (++failures >= failureThreshold) this.setReady(false);
      }
      await delay(periodMs, signal);
    }
  }
}

/** A probe's port: a number, a numeric string, or the name of a container port. */
export function probePort(
  port: number | string,
  ports: readonly V1ContainerPort[],
): number | undefined {
  if (typeof port === 'number') return port;
  if (/^\d+$/.test(port)) return Number(port);
  return ports.find((p) => p.name === port)?.containerPort;
}

/** One readiness check, as the kubelet runs it: HTTP 200..399, or a TCP connect. */
export async function probeOnce(
  probe: V1Probe,
  podIP: string,
  ports: readonly V1ContainerPort[],
  signal: AbortSignal,
): Promise<boolean> {
  const timeoutMs = (probe.timeoutSeconds ?? 1) * 1000;
  const action = probe.httpGet ?? probe.tcpSocket;
  if (action === undefined) return false;
  const port = probePort(action.port, ports);
  if (port === undefined) return false;
  const host = action.host ?? podIP;
  return new Promise<boolean>((resolve) => {
    const timeout = AbortSignal.timeout(timeoutMs);
    const both = AbortSignal.any([signal, timeout]);
    if (probe.httpGet !== undefined) {
      const get = probe.httpGet;
      const request = get.scheme === 'HTTPS' ? httpsRequest : httpRequest;
      const headers: Record<string, string> = { 'User-Agent': 'kube-probe/polychrome-local' };
      for (const h of get.httpHeaders ?? []) headers[h.name] = h.value;
      const req = request(
        {
          host,
          port,
          path: get.path ?? '/',
          method: 'GET',
          headers,
          signal: both,
          // The kubelet does not verify certificates on probes either.
          rejectUnauthorized: false,
        },
        (res) => {
          res.resume();
          const status = res.statusCode ?? 0;
          resolve(status >= 200 && status < 400);
        },
      );
      req.on('error', () => resolve(false));
      req.end();
    } else {
      const socket = connect({ host, port });
      const fail = (): void => {
        socket.destroy();
        resolve(false);
      };
      both.addEventListener('abort', fail, { once: true });
      socket.once('connect', () => {
        both.removeEventListener('abort', fail);
        socket.end();
        resolve(true);
      });
      socket.once('error', fail);
    }
  });
}
