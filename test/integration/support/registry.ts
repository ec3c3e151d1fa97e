/**
 * A real OCI registry on this machine for the tests that push and pull images
 * (release.test.ts, local-node-registry.test.ts): `crane registry serve` on a free port of
 * 127.0.0.1, blobs on disk.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { closeSync, mkdirSync, openSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { defaultBinDir } from '../../../hack/lib/paths';

/** A running registry: its `host:port`, and how to stop it. */
export interface LocalRegistry {
  host: string;
  proc: ChildProcess;
  stop(): Promise<void>;
}

/**
 * Starts `crane registry serve` with its blobs and log under `dir`. Its log goes to a file,
 * not a pipe: a test blocked in spawnSync while a client talks to it would otherwise stall
 * the registry once the pipe is full.
 */
export async function startRegistry(dir: string): Promise<LocalRegistry> {
  mkdirSync(join(dir, 'blobs'), { recursive: true });
  const logFile = join(dir, 'registry.log');
  const log = openSync(logFile, 'w');
  const proc = spawn(
    join(defaultBinDir, 'crane'),
    ['registry', 'serve', '--address', '127.0.0.1:0', '--disk', join(dir, 'blobs')],
    { stdio: ['ignore', log, log] },
  );
  closeSync(log);
  const stop = async (): Promise<void> => {
    if (proc.exitCode !== null || proc.signalCode !== null) return;
    const exited = new Promise((resolve) => proc.once('exit', resolve));
    proc.kill();
    await exited;
  };
  for (let i = 0; i < 100 && proc.exitCode === null; i += 1) {
    const m = /serving on port (\d+)/u.exec(readFileSync(logFile, 'utf8'));
    if (m !== null) return { host: `127.0.0.1:${m[1] ?? ''}`, proc, stop };
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  await stop();
  throw new Error(`crane registry serve did not start: ${readFileSync(logFile, 'utf8')}`);
}
