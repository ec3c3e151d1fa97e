import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { repoRoot } from '../../../hack/lib/paths';

/** What one run of the CLI printed, and how it exited. */
export interface CliRun {
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
}

/**
 * `bin/polychrome.js ARGS` as its own process, as a person runs it, with only PATH and the
 * session token in its environment (no model key, no API URL: pass `--api`).
 */
export function polychrome(args: readonly string[], token: string): Promise<CliRun> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [join(repoRoot, 'bin', 'polychrome.js'), ...args],
      {
        cwd: repoRoot,
        env: { PATH: process.env.PATH ?? '', POLYCHROME_TOKEN: token },
        timeout: 120_000,
        maxBuffer: 16 * 1024 * 1024,
      },
      (error, stdout, stderr) => {
        const code = error === null ? 0 : typeof error.code === 'number' ? error.code : Number.NaN;
        resolve({ code, stdout, stderr });
      },
    );
  });
}
