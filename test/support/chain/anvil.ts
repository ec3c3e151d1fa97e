import { spawn, type ChildProcess } from 'node:child_process';
import { dirname, join } from 'node:path';
import { createInterface } from 'node:readline';

/**
 * A real local Ethereum node for tests: Foundry's `anvil`, from the `@foundry-rs/anvil`
 * npm package (its per-platform binary package), on a free port chosen by the OS, with
 * chain id 31337 (CAIP-2 `eip155:31337`). Blocks are mined on each transaction.
 *
 * Start one per test file (`startAnvil()` in `beforeAll`) and `stop()` it in `afterAll`:
 * stop sends SIGTERM, waits for the process to exit and closes its pipes, so jest exits on
 * its own.
 */
export interface Anvil {
  /** The JSON-RPC URL, `http://127.0.0.1:<port>`. */
  readonly rpcUrl: string;
  readonly chainId: number;
  /** Stops the node and waits for it to exit. Safe to call twice. */
  stop(): Promise<void>;
}

/** anvil's chain id, and its CAIP-2 network name. */
export const ANVIL_CHAIN_ID = 31337;
export const ANVIL_NETWORK = `eip155:${ANVIL_CHAIN_ID}` as const;

const PLATFORM_PACKAGES: Record<string, string | undefined> = {
  'linux-x64': '@foundry-rs/anvil-linux-amd64',
  'linux-arm64': '@foundry-rs/anvil-linux-arm64',
  'darwin-x64': '@foundry-rs/anvil-darwin-amd64',
  'darwin-arm64': '@foundry-rs/anvil-darwin-arm64',
};

/** The anvil binary of this platform, from the npm package's optional dependency. */
export function anvilBinary(): string {
  const name = PLATFORM_PACKAGES[`${process.platform}-${process.arch}`];
  if (name === undefined) {
    throw new Error(`anvil: no @foundry-rs binary package for ${process.platform}-${process.arch}`);
  }
  return join(dirname(require.resolve(`${name}/package.json`)), 'bin', 'anvil');
}

/** Starts anvil on a free port and resolves once it listens. */
export async function startAnvil(): Promise<Anvil> {
  const child = spawn(
    anvilBinary(),
    ['--host', '127.0.0.1', '--port', '0', '--chain-id', String(ANVIL_CHAIN_ID)],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  const stderr: string[] = [];
  child.stderr?.on('data', (chunk: Buffer) => stderr.push(chunk.toString()));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  let port: number;
  try {
    port = await listeningPort(child, exited, stderr);
  } catch (error) {
    child.kill('SIGKILL');
    await exited;
    throw error;
  }
  let stopped: Promise<void> | undefined;
  return {
    rpcUrl: `http://127.0.0.1:${port}`,
    chainId: ANVIL_CHAIN_ID,
    stop: () => {
      stopped ??= (async () => {
        if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
        await exited;
        child.stdout?.destroy();
        child.stderr?.destroy();
      })();
      return stopped;
    },
  };
}

/** Reads stdout until "Listening on 127.0.0.1:<port>", then keeps draining it. */
function listeningPort(
  child: ChildProcess,
  exited: Promise<void>,
  stderr: string[],
): Promise<number> {
  const stdout = child.stdout;
  if (stdout === null) throw new Error('anvil: no stdout');
  const lines = createInterface({ input: stdout });
  return new Promise<number>((resolve, reject) => {
    lines.on('line', (line) => {
      const match = /Listening on 127\.0\.0\.1:(\d+)/.exec(line);
      if (match?.[1] !== undefined) {
        lines.removeAllListeners('line');
        lines.on('line', () => undefined);
        resolve(Number(match[1]));
      }
    });
    void exited.then(() =>
      reject(new Error(`anvil exited before listening: ${stderr.join('').slice(0, 2000)}`)),
    );
  });
}
