import { spawn, type ChildProcess } from 'node:child_process';
import { openSync, closeSync } from 'node:fs';
import { createServer } from 'node:net';

/** Asks the kernel for a free TCP port on 127.0.0.1 (the envtest way: small race, fine locally). */
export async function freePort(host = '127.0.0.1'): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.unref();
    server.on('error', reject);
    server.listen(0, host, () => {
      const address = server.address();
      server.close(() => {
        if (address !== null && typeof address === 'object') resolve(address.port);
        else reject(new Error('could not read the port the kernel gave'));
      });
    });
  });
}

/** Options for {@link startProcess}. */
export interface StartOptions {
  /** Output (stdout and stderr) goes to this file, appended. */
  logPath: string;
  env?: NodeJS.ProcessEnv;
  cwd?: string;
  /** Own process group, survives the parent (for `make cluster-up`). @default false */
  detached?: boolean;
}

/** Starts a binary with its output in a log file. */
export function startProcess(
  command: string,
  args: readonly string[],
  opts: StartOptions,
): ChildProcess {
  const fd = openSync(opts.logPath, 'a');
  try {
    const child = spawn(command, args, {
      stdio: ['ignore', fd, fd],
      env: opts.env ?? process.env,
      cwd: opts.cwd,
      detached: opts.detached ?? false,
    });
    if (opts.detached === true) child.unref();
    return child;
  } finally {
    closeSync(fd);
  }
}

/** True while a process with this pid exists. */
export function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/**
 * Sends SIGTERM, waits up to `graceMs` for the process to exit, then SIGKILLs it.
 * Safe to call for a process that is already gone.
 */
export async function stopPid(pid: number, graceMs = 5000): Promise<void> {
  if (!isAlive(pid)) return;
  try {
    process.kill(pid, 'SIGTERM');
  } catch {
    return;
  }
  const deadline = Date.now() + graceMs;
  while (Date.now() < deadline) {
    if (!isAlive(pid)) return;
    await sleep(50);
  }
  try {
    process.kill(pid, 'SIGKILL');
  } catch {
    // Already gone between the check and the kill.
  }
}

/** Resolves after `ms`. Only for polling loops with a deadline, never to wait for an outcome. */
export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/**
 * Polls `check` until it returns a value other than undefined, or throws after `timeoutMs`
 * with `what` and the last error seen, so a failure says what never became true.
 */
export async function pollUntil<T>(
  what: string,
  check: () => Promise<T | undefined>,
  { timeoutMs = 60_000, intervalMs = 100 }: { timeoutMs?: number; intervalMs?: number } = {},
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const value = await check();
      if (value !== undefined) return value;
    } catch (err: unknown) {
      last = err;
    }
    if (Date.now() > deadline) {
      const reason = last instanceof Error ? `: ${last.message}` : '';
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}${reason}`, {
        cause: last,
      });
    }
    await sleep(intervalMs);
  }
}
