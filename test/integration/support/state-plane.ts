import { execFile } from 'node:child_process';
import { join } from 'node:path';

import { devStateEnv, type DevCerts } from '../../../hack/lib/dev-certs';
import { freePort } from '../../../hack/lib/processes';
import { ROOT, startStateProcess, type StateProcess } from '../../support/state-process';
import { exitOf, tailOf, type ExitOutcome } from './process-logs';

/**
 * The real state-plane process (state/main.ts) on ports fixed at creation, so it can be
 * killed and started again on the same address and data directory while clients keep
 * dialling it.
 */
export class StatePlane {
  /** The log lines of each run, oldest run first. */
  private readonly runs: (readonly string[])[] = [];
  private current: StateProcess | undefined;

  private constructor(
    private readonly certs: DevCerts,
    /** The journal's LevelDB directory (the records go to `<dataDir>-records`). */
    readonly dataDir: string,
    readonly port: number,
    readonly healthPort: number,
  ) {}

  /** More variables for the next {@link start} (e.g. `STATE_FAULT_APPEND_DELAY`). */
  readonly env: Record<string, string> = {};

  /** Picks free ports; nothing runs until {@link start}. */
  static async create(certs: DevCerts, dataDir: string): Promise<StatePlane> {
    return new StatePlane(certs, dataDir, await freePort(), await freePort());
  }

  /** `localhost:<port>`, which the dev server certificate covers. */
  get address(): string {
    return `localhost:${this.port}`;
  }

  /** The running process, if any. */
  get process(): StateProcess | undefined {
    return this.current;
  }

  /** True while a started process has not exited. */
  get running(): boolean {
    const child = this.current?.child;
    return child !== undefined && child.exitCode === null && child.signalCode === null;
  }

  /**
   * Starts the process and waits for its "state plane ready" line.
   * @throws Error with its output when it exits first or stays silent for 30 s.
   */
  async start(): Promise<void> {
    if (this.running) throw new Error('the state plane is already running');
    this.current = await startStateProcess(this.certs, this.dataDir, {
      ...this.env,
      STATE_PORT: String(this.port),
      STATE_HEALTH_PORT: String(this.healthPort),
    });
    this.runs.push(this.current.logs);
  }

  /** Every log line of every run, oldest first; a line marks where each run starts. */
  get logs(): string[] {
    return this.runs.flatMap((lines, i) => [`--- state plane run ${i + 1} ---`, ...lines]);
  }

  /**
   * Sends `signal` and waits for the exit; SIGKILL after `timeoutMs`. Data and ports stay.
   * Resolves at once when nothing runs.
   */
  async kill(signal: NodeJS.Signals = 'SIGTERM', timeoutMs = 15_000): Promise<ExitOutcome> {
    const proc = this.current;
    if (proc === undefined) return null;
    return exitOf(proc.child, proc.exited, signal, timeoutMs);
  }

  /** Stops the running process with `signal` (if one runs) and starts it again. */
  async restart(signal: NodeJS.Signals = 'SIGTERM'): Promise<void> {
    await this.kill(signal);
    await this.start();
  }

  /**
   * Runs the state plane's own restore (`main.js restore FILE [ARGS]`, as its image would in
   * a Job) on this plane's directories, and resolves with its exit code and output. The
   * plane must be stopped.
   */
  restore(file: string, args: readonly string[] = []): Promise<{ code: number; output: string }> {
    if (this.running) throw new Error('stop the state plane before restoring');
    return new Promise((resolve) => {
      execFile(
        process.execPath,
        ['--import', 'tsx', join(ROOT, 'state', 'main.ts'), 'restore', file, ...args],
        {
          cwd: ROOT,
          env: { PATH: process.env.PATH ?? '', ...devStateEnv(this.certs, this.dataDir) },
        },
        (error, stdout, stderr) =>
          resolve({ code: Number(error?.code ?? 0), output: stdout + stderr }),
      );
    });
  }

  /** Whether `/readyz` answers 200. */
  async ready(): Promise<boolean> {
    try {
      return (await fetch(`http://127.0.0.1:${this.healthPort}/readyz`)).status === 200;
    } catch {
      return false;
    }
  }

  /** The last `lines` log lines. */
  tail(lines = 40): string {
    return tailOf(this.logs, lines);
  }
}
