import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { devControlPlaneEnv, type DevCerts } from '../../../hack/lib/dev-certs';
import { defaultBinDir, repoRoot } from '../../../hack/lib/paths';
import { type LocalCluster } from '../../../hack/lib/local-cluster';
import { freePort, sleep } from '../../../hack/lib/processes';
import { CONTROL_PLANE_NAMESPACE, PEER_HOST } from './peer-pods';
import { exitedPromise, exitOf, LineLog, tailOf, type ExitOutcome } from './process-logs';

/** The identity config/rbac binds the control plane's roles to. */
export const CONTROL_PLANE_USER =
  'system:serviceaccount:polychrome-system:polychrome-control-plane';

/**
 * Applies the Polychrome base, which leaves the Kubernetes door out (config/default:
 * namespace, CRD, RBAC; no APIService, whose missing backend would break discovery for every
 * test sharing the cluster, and no cert-manager objects) to the shared cluster and
 * returns a kubeconfig for the control plane's ServiceAccount identity, so the process runs
 * with exactly the permissions a cluster gives it.
 */
export async function controlPlaneKubeconfig(cluster: LocalCluster): Promise<string> {
  execFileSync(
    join(defaultBinDir, 'kubectl'),
    [
      `--kubeconfig=${cluster.kubeconfigPath}`,
      'apply',
      '--server-side',
      '-k',
      join(repoRoot, 'config', 'default'),
    ],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  return cluster.mintUser(CONTROL_PLANE_USER, [
    'system:serviceaccounts',
    'system:serviceaccounts:polychrome-system',
  ]);
}

/** Options of {@link ControlPlaneProcess.create}. */
export interface ControlPlaneOptions {
  /** The replica's name (`POLYCHROME_IDENTITY`), written as lease holder. */
  readonly identity: string;
  /** From {@link controlPlaneKubeconfig}. */
  readonly kubeconfig: string;
  /** The namespace it reconciles (`POLYCHROME_WATCH_NAMESPACE`). */
  readonly namespace: string;
  readonly certs: DevCerts;
  /** The state plane's `host:port`. */
  readonly stateAddress: string;
  /** The harness CA's certificate (`POLYCHROME_HARNESS_CA_FILE`). */
  readonly harnessCaFile: string;
  /** The approval signing key, PKCS#8 PEM (`POLYCHROME_APPROVAL_KEY_FILE`). */
  readonly approvalKeyFile: string;
  /**
   * The namespace where the replicas find each other's Pods (support/peer-pods.ts writes
   * them). @default polychrome-system
   */
  readonly peerNamespace?: string;
  /** @default 3000 */
  readonly leaseDurationMs?: number;
  /** @default 1000 */
  readonly leaseRenewMs?: number;
  /** More variables; they win over the ones above. */
  readonly env?: Readonly<Record<string, string>>;
}

/**
 * One real control-plane process (`node --import tsx operator/main.ts`, not the tsx CLI,
 * whose child would outlive a SIGKILL), on loopback ports fixed at creation: its side port
 * (`/healthz`, `/readyz`, `/metrics`) and its public API port. It can be killed with any
 * signal and started again with the same identity, ports and environment.
 */
export class ControlPlaneProcess {
  /** Output of every run; a line marks where each run starts. */
  readonly log = new LineLog();
  private current: ChildProcess | undefined;
  private currentExit: Promise<ExitOutcome> = Promise.resolve(null);
  private runs = 0;

  private constructor(
    readonly identity: string,
    readonly healthPort: number,
    readonly apiPort: number,
    /** The peer listener's port, on 127.0.0.1. */
    readonly peerPort: number,
    /** The environment each run starts with. */
    readonly env: Readonly<Record<string, string>>,
  ) {}

  /** Picks free ports and fixes the environment; nothing runs until {@link start}. */
  static async create(options: ControlPlaneOptions): Promise<ControlPlaneProcess> {
    const healthPort = await freePort();
    const apiPort = await freePort();
    const peerPort = await freePort(PEER_HOST);
    const leaseMs = options.leaseDurationMs ?? 3_000;
    const env = {
      PATH: process.env.PATH ?? '',
      POLYCHROME_IDENTITY: options.identity,
      POLYCHROME_KUBECONFIG: options.kubeconfig,
      POLYCHROME_WATCH_NAMESPACE: options.namespace,
      POLYCHROME_AGENT_SANDBOX: 'false',
      ...devControlPlaneEnv(options.certs, options.stateAddress),
      POLYCHROME_HEALTH_HOST: '127.0.0.1',
      POLYCHROME_HEALTH_PORT: String(healthPort),
      POLYCHROME_LEASE_DURATION_MS: String(leaseMs),
      POLYCHROME_LEASE_RENEW_MS: String(options.leaseRenewMs ?? Math.min(1_000, leaseMs / 3)),
      POLYCHROME_SHUTDOWN_GRACE_MS: '5000',
      POLYCHROME_LOG_LEVEL: 'info',
      // The public API and the turn coordinator.
      POLYCHROME_API_HOST: '127.0.0.1',
      POLYCHROME_API_PORT: String(apiPort),
      // Peers: this replica's listener (loopback only), and where it looks for the others.
      POLYCHROME_PEER_HOST: PEER_HOST,
      POLYCHROME_PEER_PORT: String(peerPort),
      POLYCHROME_NAMESPACE: options.peerNamespace ?? CONTROL_PLANE_NAMESPACE,
      POLYCHROME_HARNESS_CA_FILE: options.harnessCaFile,
      POLYCHROME_APPROVAL_KEY_FILE: options.approvalKeyFile,
      POLYCHROME_NEW_CONVERSATION_NAMESPACE: options.namespace,
      ...options.env,
    };
    return new ControlPlaneProcess(options.identity, healthPort, apiPort, peerPort, env);
  }

  /** The public API's base URL. */
  get apiUrl(): string {
    return `http://127.0.0.1:${this.apiPort}`;
  }

  /** The process of the current run, if one was started. */
  get child(): ChildProcess | undefined {
    return this.current;
  }

  /** Resolves when the current run exits (at once when none was started). */
  get exited(): Promise<ExitOutcome> {
    return this.currentExit;
  }

  /** True while the current run has not exited. */
  get running(): boolean {
    const child = this.current;
    return child !== undefined && child.exitCode === null && child.signalCode === null;
  }

  /** Starts a run; returns at once (see {@link waitReady}). */
  start(): void {
    if (this.running) throw new Error(`${this.identity} is already running`);
    this.runs++;
    this.log.add(`--- ${this.identity} run ${this.runs} ---`);
    // Opt-in CPU profile of each run, written to that directory when the run exits cleanly
    // (SIGTERM, not SIGKILL): open it in Chrome DevTools or any .cpuprofile viewer.
    const profileDir = process.env.POLYCHROME_TEST_CPU_PROF_DIR;
    const profile = profileDir === undefined ? [] : ['--cpu-prof', `--cpu-prof-dir=${profileDir}`];
    const child = spawn(
      process.execPath,
      [...profile, '--import', 'tsx', join(repoRoot, 'operator', 'main.ts')],
      {
        cwd: repoRoot,
        stdio: ['ignore', 'pipe', 'pipe'],
        env: { ...this.env },
      },
    );
    this.log.follow(child.stdout);
    this.log.follow(child.stderr);
    this.current = child;
    this.currentExit = exitedPromise(child);
  }

  /**
   * Sends `signal` and waits for the run to exit; SIGKILL after `timeoutMs`. Resolves with
   * how it ended (at once when nothing runs).
   */
  kill(signal: NodeJS.Signals = 'SIGTERM', timeoutMs = 15_000): Promise<ExitOutcome> {
    const child = this.current;
    if (child === undefined) return Promise.resolve(null);
    return exitOf(child, this.currentExit, signal, timeoutMs);
  }

  /** Ends the current run with `signal` (if one runs) and starts another. */
  async restart(signal: NodeJS.Signals = 'SIGTERM'): Promise<void> {
    await this.kill(signal);
    this.start();
  }

  /** The status `/readyz` answers, 0 when nothing listens. */
  readyz(): Promise<number> {
    return statusOf(`http://127.0.0.1:${this.healthPort}/readyz`);
  }

  /** The status `/healthz` answers, 0 when nothing listens. */
  healthz(): Promise<number> {
    return statusOf(`http://127.0.0.1:${this.healthPort}/healthz`);
  }

  /**
   * Waits for `/readyz` to answer 200.
   * @throws Error with the last log lines when the run exits or the time is up.
   */
  async waitReady(timeoutMs = 60_000): Promise<void> {
    await this.waitReadyz(200, timeoutMs);
  }

  /**
   * Waits for the side port to answer anything but 200 (e.g. after its state plane link
   * dropped).
   */
  async waitNotReady(timeoutMs = 30_000): Promise<void> {
    await this.waitReadyz('not 200', timeoutMs);
  }

  /**
   * Waits until the public API answers HTTP at all (any status).
   * @throws Error with the last log lines when the run exits or the time is up.
   */
  async waitApi(timeoutMs = 60_000): Promise<void> {
    await this.poll('its public API to answer', timeoutMs, async () =>
      (await statusOf(this.apiUrl)) !== 0 ? true : undefined,
    );
  }

  /** The last `lines` log lines. */
  tail(lines = 40): string {
    return tailOf(this.log.lines, lines);
  }

  private async waitReadyz(want: 200 | 'not 200', timeoutMs: number): Promise<void> {
    await this.poll(`/readyz to answer ${want}`, timeoutMs, async () => {
      const status = await this.readyz();
      return (want === 200 ? status === 200 : status !== 200) ? true : undefined;
    });
  }

  private async poll(
    what: string,
    timeoutMs: number,
    check: () => Promise<true | undefined>,
  ): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      // A run that exited will not get there: fail now, not at the deadline.
      if (!this.running) {
        throw new Error(
          `${this.identity} exited (${String(this.current?.signalCode ?? this.current?.exitCode)}) while waiting for ${what}\n--- last lines of ${this.identity} ---\n${this.tail()}`,
        );
      }
      if ((await check()) !== undefined) return;
      if (Date.now() > deadline) {
        throw new Error(
          `${this.identity}: timed out after ${timeoutMs} ms waiting for ${what}\n--- last lines of ${this.identity} ---\n${this.tail()}`,
        );
      }
      await sleep(200);
    }
  }
}

async function statusOf(url: string): Promise<number> {
  try {
    const res = await fetch(url, { signal: AbortSignal.timeout(3_000) });
    await res.body?.cancel();
    return res.status;
  } catch {
    return 0;
  }
}
