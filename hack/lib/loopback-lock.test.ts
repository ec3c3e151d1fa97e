import { afterEach, describe, expect, it } from '@jest/globals';
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { claimLoopbackBlock } from './loopback-lock';

describe('machine-wide loopback block claims', () => {
  const dirs: string[] = [];
  const freshDir = (): string => {
    const dir = mkdtempSync(join(tmpdir(), 'loopback-lock-'));
    dirs.push(dir);
    return dir;
  };
  afterEach(() => {
    for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
  });

  it('gives a block to one claimant at a time and frees it on release', () => {
    const dir = freshDir();
    const release = claimLoopbackBlock(3, dir);
    expect(release).toBeDefined();
    expect(readFileSync(join(dir, '3.pid'), 'utf8')).toBe(String(process.pid));
    // A second node of this process does not get it either.
    expect(claimLoopbackBlock(3, dir)).toBeUndefined();
    expect(claimLoopbackBlock(4, dir)).toBeDefined();
    release?.();
    expect(claimLoopbackBlock(3, dir)).toBeDefined();
  });

  it('refuses a block a live process holds and takes over a dead one’s', async () => {
    const dir = freshDir();
    const child = spawn(process.execPath, ['-e', 'setTimeout(() => {}, 30000)'], {
      stdio: 'ignore',
    });
    try {
      writeFileSync(join(dir, '7.pid'), String(child.pid));
      expect(claimLoopbackBlock(7, dir)).toBeUndefined();
    } finally {
      child.kill('SIGKILL');
      await new Promise((resolve) => child.once('exit', resolve));
    }
    const taken = claimLoopbackBlock(7, dir);
    expect(taken).toBeDefined();
    expect(readFileSync(join(dir, '7.pid'), 'utf8')).toBe(String(process.pid));
  });
});
