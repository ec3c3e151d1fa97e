import { spawn, type ChildProcess } from 'node:child_process';
import { createServer } from 'node:net';
import { join } from 'node:path';

/**
 * Starts the MCP reference server (`@modelcontextprotocol/server-everything`) in its
 * streamable HTTP mode, for tests. Its CLI takes the transport as the first argument
 * (`stdio`, `sse`, `streamableHttp`) and the port from `PORT`; it serves MCP at `/mcp`.
 * It binds every interface (its code, not ours); tests reach it on loopback only.
 */

/** The repository root (this file sits in test/support/mcp-servers). */
export const REPO_ROOT = join(__dirname, '..', '..', '..');

/** The reference server's entry point. */
export const EVERYTHING_SERVER = join(
  REPO_ROOT,
  'node_modules',
  '@modelcontextprotocol',
  'server-everything',
  'dist',
  'index.js',
);

/** A running reference server; `stop` it after the test. */
export interface EverythingHttpServer {
  readonly url: string;
  readonly pid: number;
  stop(): Promise<void>;
}

/** A port free on loopback right now (another process could take it before we bind; rare). */
export async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const address = server.address();
  await new Promise<void>((resolve) => server.close(() => resolve()));
  if (address === null || typeof address === 'string') throw new Error('no port');
  return address.port;
}

/**
 * Spawns the server and resolves once it says it listens.
 *
 * @throws Error when it exits or stays silent for `startTimeoutMs`.
 */
export async function startEverythingHttp(startTimeoutMs = 20_000): Promise<EverythingHttpServer> {
  const port = await freePort();
  const child = spawn(process.execPath, [EVERYTHING_SERVER, 'streamableHttp'], {
    env: { PATH: process.env.PATH ?? '', PORT: String(port) },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const pid = child.pid;
  if (pid === undefined) throw new Error('server-everything did not start');
  let output = '';
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`server-everything did not listen within ${startTimeoutMs} ms:\n${output}`));
    }, startTimeoutMs);
    const onData = (chunk: Buffer): void => {
      output += chunk.toString('utf8');
      if (/listening on port/iu.test(output)) {
        clearTimeout(timer);
        resolve();
      }
    };
    child.stdout?.on('data', onData);
    child.stderr?.on('data', onData);
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`server-everything exited with ${code}:\n${output}`));
    });
  });
  // Keep draining so a chatty server never blocks on a full pipe.
  child.stdout?.resume();
  child.stderr?.resume();
  return { url: `http://127.0.0.1:${port}/mcp`, pid, stop: () => stop(child) };
}

async function stop(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), 3000);
  await exited;
  clearTimeout(timer);
}
