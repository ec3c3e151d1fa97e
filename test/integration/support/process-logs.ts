import type { ChildProcess } from 'node:child_process';
import type { Readable } from 'node:stream';

/** How a process ended: its exit code, or the signal that ended it. */
export type ExitOutcome = number | NodeJS.Signals | null;

/** Resolves once `child` has exited (at once when it already has). */
export function exitedPromise(child: ChildProcess): Promise<ExitOutcome> {
  if (child.exitCode !== null || child.signalCode !== null) {
    return Promise.resolve(child.signalCode ?? child.exitCode);
  }
  return new Promise((resolve) => child.once('exit', (code, signal) => resolve(signal ?? code)));
}

/**
 * Sends `signal` to `child` and waits for `exited`; sends SIGKILL when it has not exited
 * after `timeoutMs`. Resolves at once for a process that has already exited.
 */
export async function exitOf(
  child: ChildProcess,
  exited: Promise<ExitOutcome>,
  signal: NodeJS.Signals,
  timeoutMs: number,
): Promise<ExitOutcome> {
  if (child.exitCode !== null || child.signalCode !== null) return exited;
  child.kill(signal);
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<'late'>((resolve) => {
    timer = setTimeout(() => resolve('late'), timeoutMs);
  });
  const first = await Promise.race([exited, late]);
  clearTimeout(timer);
  if (first !== 'late') return first;
  child.kill('SIGKILL');
  return exited;
}

/**
 * Collects the lines of a process's output, keeping the last `max` so a long test does not
 * hold every line in memory.
 */
export class LineLog {
  readonly lines: string[] = [];

  constructor(private readonly max = 5_000) {}

  /** Follows `stream` line by line (a last line without newline counts at the end). */
  follow(stream: Readable | null, prefix = ''): void {
    if (stream === null) return;
    let partial = '';
    stream.setEncoding('utf8');
    stream.on('data', (chunk: string) => {
      const parts = (partial + chunk).split('\n');
      partial = parts.pop() ?? '';
      for (const line of parts) this.add(prefix + line);
    });
    stream.on('end', () => {
      if (partial !== '') this.add(prefix + partial);
      partial = '';
    });
  }

  add(line: string): void {
    this.lines.push(line);
    if (this.lines.length > this.max) this.lines.splice(0, this.lines.length - this.max);
  }

  /** Everything kept, one line each. */
  text(): string {
    return this.lines.join('\n');
  }
}

/** The last `count` of `lines`, one per line. */
export function tailOf(lines: readonly string[], count: number): string {
  return lines.slice(-count).join('\n');
}
