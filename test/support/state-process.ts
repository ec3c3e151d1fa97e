import { spawn, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { createInterface } from 'node:readline';

import { devCliEnv, devStateEnv, type DevCerts } from '../../hack/lib/dev-certs';

/** The repository root. */
export const ROOT = join(__dirname, '..', '..');

/** A running state plane process (state/main.ts). */
export interface StateProcess {
  readonly child: ChildProcess;
  readonly port: number;
  readonly healthPort: number;
  /** `localhost:<port>`, which the dev server certificate covers. */
  readonly address: string;
  /** Resolves with the exit code, or the signal that ended the process. */
  readonly exited: Promise<number | NodeJS.Signals | null>;
  /** Every log line so far. */
  readonly logs: string[];
}

function isReadyLine(value: unknown): value is { port: number; healthPort: number } {
  return (
    typeof value === 'object' &&
    value !== null &&
    'msg' in value &&
    value.msg === 'state plane ready' &&
    'port' in value &&
    typeof value.port === 'number' &&
    'healthPort' in value &&
    typeof value.healthPort === 'number'
  );
}

/**
 * Starts `node --import tsx state/main.ts` (not the tsx CLI: it runs the script in a
 * child that would survive a SIGKILL of the CLI) on free ports, and waits for its
 * "state plane ready" line.
 *
 * @throws Error with the process's output when it exits or stays silent for 30 s.
 */
export async function startStateProcess(
  certs: DevCerts,
  dataDir: string,
  extraEnv: Record<string, string> = {},
): Promise<StateProcess> {
  const child = spawn(process.execPath, ['--import', 'tsx', join(ROOT, 'state', 'main.ts')], {
    cwd: ROOT,
    env: {
      PATH: process.env.PATH ?? '',
      ...devStateEnv(certs, dataDir),
      STATE_LISTEN_HOST: '127.0.0.1',
      STATE_PORT: '0',
      STATE_HEALTH_PORT: '0',
      ...extraEnv,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const logs: string[] = [];
  child.stderr?.on('data', (chunk: Buffer) => logs.push(chunk.toString()));
  const exited = new Promise<number | NodeJS.Signals | null>((resolve) => {
    child.on('exit', (code, signal) => resolve(signal ?? code));
  });
  const stdout = child.stdout;
  if (stdout === null) throw new Error('unreachable: stdout is piped');
  const ready = new Promise<{ port: number; healthPort: number }>((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`the state plane did not get ready in 30 s:\n${logs.join('\n')}`));
    }, 30_000);
    void exited.then((how) => {
      clearTimeout(timer);
      reject(
        new Error(
          `the state plane exited (${String(how)}) before it was ready:\n${logs.join('\n')}`,
        ),
      );
    });
    createInterface({ input: stdout }).on('line', (line) => {
      logs.push(line);
      let parsed: unknown;
      try {
        parsed = JSON.parse(line);
      } catch {
        return;
      }
      if (isReadyLine(parsed)) {
        clearTimeout(timer);
        resolve({ port: parsed.port, healthPort: parsed.healthPort });
      }
    });
  });
  const { port, healthPort } = await ready;
  return { child, port, healthPort, address: `localhost:${String(port)}`, exited, logs };
}

/**
 * SIGKILLs every process in `running` and waits for each to exit, then empties the set: a
 * test that fails half-way must not leave a process holding the database lock.
 */
export async function killAll(running: Set<StateProcess>): Promise<void> {
  for (const p of running) {
    p.child.kill('SIGKILL');
    await p.exited;
  }
  running.clear();
}

/** The outcome of one CLI run. */
export interface CliRun {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

/**
 * Runs the real CLI (`node --import tsx cli/polychrome.ts`) as the verifier identity
 * against `address`.
 */
export function runCliProcess(
  args: readonly string[],
  certs: DevCerts,
  address: string,
): Promise<CliRun> {
  const child = spawn(
    process.execPath,
    ['--import', 'tsx', join(ROOT, 'cli', 'polychrome.ts'), ...args],
    {
      cwd: ROOT,
      env: { PATH: process.env.PATH ?? '', ...devCliEnv(certs, address) },
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk: Buffer) => {
    stdout += chunk.toString();
  });
  child.stderr.on('data', (chunk: Buffer) => {
    stderr += chunk.toString();
  });
  return new Promise((resolve) => {
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}
