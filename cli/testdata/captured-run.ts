import { PassThrough } from 'node:stream';

import { runCli } from '../run-cli';
import type { ExitCode } from '../cli-support';

/** What one `polychrome` run printed and how it exited. */
export interface Captured {
  readonly code: ExitCode;
  readonly stdout: string;
  readonly stderr: string;
}

/** A run whose output can be watched while it runs. */
export interface Running {
  readonly done: Promise<Captured>;
  stdout(): string;
  stderr(): string;
  /** What Ctrl-C does (the entry point aborts the command's signal). */
  stop(): void;
}

/** Starts `polychrome ARGS` in this process (the entry point's own runCli) with `env`. */
export function startCli(args: readonly string[], env: Readonly<Record<string, string>>): Running {
  const stdout = new PassThrough();
  const stderr = new PassThrough();
  const controller = new AbortController();
  let out = '';
  let err = '';
  stdout.on('data', (chunk: Buffer) => (out += chunk.toString()));
  stderr.on('data', (chunk: Buffer) => (err += chunk.toString()));
  const done = runCli(args, { stdout, stderr, signal: controller.signal }, { ...env }).then(
    (code) => ({ code, stdout: out, stderr: err }),
  );
  return { done, stdout: () => out, stderr: () => err, stop: () => controller.abort() };
}

/** Runs `polychrome ARGS` to its end. */
export function runCaptured(
  args: readonly string[],
  env: Readonly<Record<string, string>>,
): Promise<Captured> {
  return startCli(args, env).done;
}
