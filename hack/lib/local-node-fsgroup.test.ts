import { afterEach, describe, expect, it } from '@jest/globals';
import { lstatSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { applyFsGroup } from './local-node-fsgroup';
import { writeVolumeFiles } from './local-node-volumes';

// Any group as root; this process's own otherwise (a user may chown to its own groups).
const gid = process.getuid?.() === 0 ? 65532 : (process.getgid?.() ?? 0);
const dirs: string[] = [];
const fresh = (): string => {
  const dir = mkdtempSync(join(tmpdir(), 'fsgroup-'));
  dirs.push(dir);
  return dir;
};
const of = (path: string): { gid: number; mode: string } => {
  const info = lstatSync(path);
  return { gid: info.gid, mode: (info.mode & 0o7777).toString(8) };
};

afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

describe('applyFsGroup', () => {
  it("gives a Secret's atomic-writer files the group and group read, keeping their mode otherwise", () => {
    const dir = join(fresh(), 'tls');
    writeVolumeFiles(dir, [{ path: 'tls.key', data: Buffer.from('k'), mode: 0o400 }]);
    applyFsGroup(dir, gid, true, false);
    expect(of(join(dir, '..data', 'tls.key'))).toEqual({ gid, mode: '440' });
    expect(of(dir)).toEqual({ gid, mode: '2755' });
    // The top-level symlink gets the group only (a symlink has no mode of its own).
    expect(lstatSync(join(dir, 'tls.key')).gid).toBe(gid);
  });

  it('makes a writable volume group-writable, setgid on directories', () => {
    const dir = fresh();
    mkdirSync(join(dir, 'journal'), { mode: 0o700 });
    writeFileSync(join(dir, 'journal', 'CURRENT'), 'x', { mode: 0o600 });
    symlinkSync('journal/CURRENT', join(dir, 'link'));
    applyFsGroup(dir, gid, false, false);
    expect(of(join(dir, 'journal'))).toEqual({ gid, mode: '2770' });
    expect(of(join(dir, 'journal', 'CURRENT'))).toEqual({ gid, mode: '660' });
  });

  it('leaves a volume alone under OnRootMismatch when its root already has the group and bits', () => {
    const dir = fresh();
    writeFileSync(join(dir, 'data'), 'x', { mode: 0o600 });
    applyFsGroup(dir, gid, false, true);
    expect(of(join(dir, 'data')).mode).toBe('660');
    writeFileSync(join(dir, 'later'), 'x', { mode: 0o600 });
    applyFsGroup(dir, gid, false, true);
    expect(of(join(dir, 'later')).mode).toBe('600');
  });
});
