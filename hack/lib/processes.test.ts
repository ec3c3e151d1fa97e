import { describe, expect, it } from '@jest/globals';
import { spawn } from 'node:child_process';
import { isAlive, pollUntil, stopPid } from './processes';

describe('pollUntil', () => {
  it('returns the first defined value', async () => {
    let calls = 0;
    const value = await pollUntil(
      'the third call',
      () => Promise.resolve(++calls === 3 ? 'done' : undefined),
      {
        intervalMs: 1,
      },
    );
    expect(value).toBe('done');
    expect(calls).toBe(3);
  });

  it('names what never happened and the last error when it times out', async () => {
    await expect(
      pollUntil('the API server', () => Promise.reject(new Error('connection refused')), {
        timeoutMs: 20,
        intervalMs: 5,
      }),
    ).rejects.toThrow('timed out after 20 ms waiting for the API server: connection refused');
  });
});

describe('stopPid', () => {
  it('kills a process that ignores SIGTERM once the grace period ends', async () => {
    const child = spawn(process.execPath, [
      '-e',
      "process.on('SIGTERM', () => {}); console.log('ready'); setInterval(() => {}, 1000)",
    ]);
    const pid = child.pid!;
    const exited = new Promise<NodeJS.Signals | null>((resolve) =>
      child.on('exit', (_code, signal) => resolve(signal)),
    );
    // SIGTERM is ignored only once the handler is installed.
    await new Promise((resolve) => child.stdout.once('data', resolve));
    await stopPid(pid, 300);
    expect(await exited).toBe('SIGKILL');
    expect(isAlive(pid)).toBe(false);
  });
});
