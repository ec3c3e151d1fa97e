import { afterAll, afterEach, beforeAll, describe, expect, it } from '@jest/globals';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  ContainerRunner,
  probeOnce,
  probePort,
  shouldRestart,
  type ContainerRunnerOptions,
  type LaunchPlan,
} from './local-node-container';
import { isAlive, pollUntil } from './processes';

let dir: string;
// Every runner a test made is stopped even when the test fails, so no process outlives it.
const made: ContainerRunner[] = [];
afterEach(async () => {
  await Promise.all(made.splice(0).map((r) => r.stop(0)));
});
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'local-node-container-'));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

const launch = (script: string): LaunchPlan => ({
  ok: true,
  launch: { argv: [process.execPath, '-e', script], env: { PATH: process.env.PATH ?? '' } },
});

function runner(
  name: string,
  prepare: () => Promise<LaunchPlan>,
  extra: Partial<ContainerRunnerOptions> = {},
): { runner: ContainerRunner; logPath: string; changes: () => number } {
  let changes = 0;
  const logPath = join(dir, `${name}.log`);
  const created = new ContainerRunner({
    container: { name, image: 'test' },
    podLabel: `p_n(${name})`,
    restartPolicy: 'Never',
    podIP: '127.0.0.1',
    cwd: dir,
    logPath,
    prepare,
    onChange: () => changes++,
    backoff: { initialMs: 50, maxMs: 200, resetAfterMs: 60_000 },
    log: () => undefined,
    ...extra,
  });
  made.push(created);
  return { runner: created, logPath, changes: () => changes };
}

const waitFor = <T>(what: string, check: () => T | undefined): Promise<T> =>
  pollUntil(what, () => Promise.resolve(check()), { timeoutMs: 10_000, intervalMs: 20 });

describe('shouldRestart', () => {
  it.each([
    ['Always', 0, true],
    ['Always', 1, true],
    ['OnFailure', 0, false],
    ['OnFailure', 1, true],
    ['Never', 1, false],
  ] as const)('%s after exit %i: %s', (policy, code, expected) => {
    expect(shouldRestart(policy, code)).toBe(expected);
  });
});

describe('ContainerRunner', () => {
  it('records the exit code of a container that is not restarted', async () => {
    const { runner: r } = runner('exits', () => Promise.resolve(launch('process.exit(3)')));
    r.start();
    const state = await waitFor('the container to stop', () => {
      const s = r.snapshot().state;
      return s.kind === 'terminated' ? s : undefined;
    });
    expect(state).toMatchObject({ exitCode: 3, reason: 'Error' });
    expect(state.containerID).toMatch(/^local:\/\/\d+$/);
    expect(r.snapshot()).toMatchObject({ restartCount: 0, ready: false, started: false });
    await r.stop(0);
  });

  it('restarts under Always, counting restarts and keeping the last state', async () => {
    const { runner: r } = runner('crashes', () => Promise.resolve(launch('process.exit(4)')), {
      restartPolicy: 'Always',
    });
    r.start();
    const snap = await waitFor('two restarts', () => {
      const s = r.snapshot();
      return s.restartCount >= 2 ? s : undefined;
    });
    expect(snap.lastState).toMatchObject({ kind: 'terminated', exitCode: 4 });
    await r.stop(0);
    const after = r.snapshot().restartCount;
    expect(r.pid).toBeUndefined();
    // Stopped for good: no restart follows.
    await expect(
      pollUntil(
        'another restart',
        () => Promise.resolve(r.snapshot().restartCount > after ? true : undefined),
        {
          timeoutMs: 300,
          intervalMs: 20,
        },
      ),
    ).rejects.toThrow('timed out');
  });

  it('waits with the reason prepare gives and starts once prepare succeeds', async () => {
    let calls = 0;
    const { runner: r } = runner('config', () =>
      Promise.resolve(
        ++calls < 3
          ? { ok: false, reason: 'CreateContainerConfigError', message: 'secret "s" not found' }
          : launch('setInterval(() => {}, 1000)'),
      ),
    );
    r.start();
    const waiting = await waitFor('the config error', () => {
      const state = r.snapshot().state;
      return state.kind === 'waiting' && state.reason === 'CreateContainerConfigError'
        ? state
        : undefined;
    });
    expect(waiting.message).toBe('secret "s" not found');
    await waitFor('the container to run', () =>
      r.snapshot().state.kind === 'running' ? true : undefined,
    );
    expect(r.snapshot().ready).toBe(true);
    await r.stop(0);
  });

  it('stops the whole process group: SIGTERM first, SIGKILL after the grace period', async () => {
    const script = `
      const { spawn } = require('child_process');
      const child = spawn(process.execPath, ['-e', "process.on('SIGTERM', () => {}); setInterval(() => {}, 1000)"], { stdio: 'ignore' });
      process.on('SIGTERM', () => console.log('leader got SIGTERM'));
      console.log('grandchild ' + child.pid);
      setInterval(() => {}, 1000);`;
    const { runner: r, logPath } = runner('group', () => Promise.resolve(launch(script)));
    r.start();
    const grandchild = await pollUntil('the grandchild pid', async () => {
      const match = /grandchild (\d+)/.exec(await readFile(logPath, 'utf8').catch(() => ''));
      return match ? Number(match[1]) : undefined;
    });
    const leader = r.pid;
    expect(leader).toBeDefined();
    const started = Date.now();
    await r.stop(300);
    expect(Date.now() - started).toBeGreaterThanOrEqual(300);
    expect(isAlive(leader!)).toBe(false);
    await pollUntil(
      'the grandchild to die',
      () => Promise.resolve(isAlive(grandchild) ? undefined : true),
      {
        timeoutMs: 2000,
      },
    );
    expect(await readFile(logPath, 'utf8')).toContain('leader got SIGTERM');
    expect(r.snapshot().state).toMatchObject({ kind: 'terminated', exitCode: 137, signal: 9 });
  });

  it('reports a command that cannot start as StartError', async () => {
    const { runner: r } = runner('missing', () =>
      Promise.resolve({ ok: true, launch: { argv: [join(dir, 'no-such-binary')], env: {} } }),
    );
    r.start();
    const state = await waitFor('the start error', () => {
      const s = r.snapshot().state;
      return s.kind === 'terminated' ? s : undefined;
    });
    expect(state).toMatchObject({ exitCode: 128, reason: 'StartError' });
    expect(state.message).toContain('ENOENT');
    await r.stop(0);
  });
});

describe('readiness probes', () => {
  let server: Server;
  let port: number;
  let healthy = false;
  beforeAll(async () => {
    server = createServer((req, res) => {
      res.statusCode = req.url === '/ready' && healthy ? 204 : 503;
      res.end();
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const address = server.address();
    port = typeof address === 'object' && address !== null ? address.port : 0;
  });
  afterAll(async () => {
    await new Promise((resolve) => server.close(resolve));
  });

  it('resolves numeric, numeric-string and named ports', () => {
    const ports = [{ name: 'http', containerPort: 8080 }];
    expect(probePort(81, ports)).toBe(81);
    expect(probePort('82', ports)).toBe(82);
    expect(probePort('http', ports)).toBe(8080);
    expect(probePort('grpc', ports)).toBeUndefined();
  });

  it('passes on 2xx and fails on 5xx, refused connections and TCP to a closed port', async () => {
    const signal = new AbortController().signal;
    const get = { httpGet: { path: '/ready', port } };
    healthy = false;
    expect(await probeOnce(get, '127.0.0.1', [], signal)).toBe(false);
    healthy = true;
    expect(await probeOnce(get, '127.0.0.1', [], signal)).toBe(true);
    expect(await probeOnce({ tcpSocket: { port } }, '127.0.0.1', [], signal)).toBe(true);
    const closed = { httpGet: { path: '/', port: 1 } };
    expect(await probeOnce(closed, '127.0.0.1', [], signal)).toBe(false);
    expect(await probeOnce({ tcpSocket: { port: 1 } }, '127.0.0.1', [], signal)).toBe(false);
  });

  it('makes a running container ready only while its probe passes', async () => {
    healthy = false;
    const { runner: r } = runner(
      'probed',
      () => Promise.resolve(launch('setInterval(() => {}, 1000)')),
      {
        container: {
          name: 'probed',
          image: 'test',
          readinessProbe: {
            httpGet: { path: '/ready', port, host: '127.0.0.1' },
            periodSeconds: 1,
            failureThreshold: 1,
          },
        },
      },
    );
    r.start();
    await waitFor('the container to run', () =>
      r.snapshot().state.kind === 'running' ? true : undefined,
    );
    expect(r.snapshot().ready).toBe(false);
    healthy = true;
    await waitFor('readiness', () => (r.snapshot().ready ? true : undefined));
    healthy = false;
    await waitFor('unreadiness', () => (r.snapshot().ready ? undefined : true));
    await r.stop(0);
  });
});
