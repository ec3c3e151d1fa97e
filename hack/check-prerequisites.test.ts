/**
 * hack/check-prerequisites.sh, run as `make test` runs it, with this machine's real tools
 * taken away one by one: a PATH whose directories are mirrored without the tool (symlinks
 * to everything else), or a Chromium path that does not exist. Whatever this machine
 * lacks already is the baseline; each removal must add exactly its own line, naming how to
 * install it, and a non-zero exit. `make -n test` shows the check runs before anything else.
 */
import { afterAll, describe, expect, it } from '@jest/globals';
import { execFileSync, spawnSync } from 'node:child_process';
import {
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  rmSync,
  symlinkSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import { repoRoot } from './lib/paths';

const script = join(repoRoot, 'hack', 'check-prerequisites.sh');
const scratch = mkdtempSync(join(tmpdir(), 'polychrome-prereq-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

interface Check {
  readonly status: number | null;
  readonly lines: readonly string[];
  readonly stdout: string;
}

function check(env: NodeJS.ProcessEnv): Check {
  const run = spawnSync('bash', [script], { env, encoding: 'utf8' });
  return {
    status: run.status,
    lines: run.stderr.split('\n').filter((line) => line !== ''),
    stdout: run.stdout,
  };
}

let mirrors = 0;
/** PATH with every directory holding one of `tools` replaced by a mirror lacking them. */
function pathWithout(tools: readonly string[]): string {
  return (process.env.PATH ?? '')
    .split(delimiter)
    .map((dir) => {
      if (!tools.some((tool) => existsSync(join(dir, tool)))) return dir;
      const mirror = join(scratch, `bin-${String((mirrors += 1))}`);
      mkdirSync(mirror);
      for (const name of readdirSync(dir)) {
        if (!tools.includes(name)) symlinkSync(join(dir, name), join(mirror, name));
      }
      return mirror;
    })
    .join(delimiter);
}

const baseline = check(process.env);
/** The lines a removal adds to what this machine already lacks. */
const added = (run: Check): string[] => run.lines.filter((line) => !baseline.lines.includes(line));

describe('hack/check-prerequisites.sh', () => {
  it('passes where nothing is missing, and fails with one line per missing tool otherwise', () => {
    expect(baseline.status).toBe(baseline.lines.length === 0 ? 0 : 1);
    for (const line of baseline.lines) expect(line).toMatch(/^missing: .+: .+/);
    expect(baseline.stdout).toBe('');
  });

  it('names Chromium where the browser test looks for it, and how to install it', () => {
    const absent = join(scratch, 'no-chromium');
    const run = check({ ...process.env, POLYCHROME_CHROMIUM: absent });
    expect(run.status).toBe(1);
    expect(added(run)).toEqual([
      `missing: chromium at ${absent} (the forensics UI's browser test): ` +
        'apt-get install chromium, or set POLYCHROME_CHROMIUM to a Chromium binary',
    ]);
  });

  it('asks for qemu-user only while the arm64 images are built', () => {
    const without = pathWithout(['qemu-aarch64-static']);
    expect(added(check({ ...process.env, PATH: without }))).toEqual([
      "missing: qemu-aarch64-static (the arm64 images' smoke test, hack/build-images.sh): " +
        'apt-get install qemu-user-static, or set IMAGE_ARCHES=amd64',
    ]);
    expect(added(check({ ...process.env, PATH: without, IMAGE_ARCHES: 'amd64' }))).toEqual([]);
  });

  it('gives each tool taken off PATH its own line, in the order checked, and nothing else', () => {
    const run = check({ ...process.env, PATH: pathWithout(['openssl', 'go', 'git']) });
    expect(run.status).toBe(1);
    const lines = added(run);
    expect(lines).toHaveLength(3);
    expect(lines[0]).toMatch(
      /^missing: go \d+\.\d+\.?\d* or later .*: install Go .*https:\/\/go\.dev\/dl\//u,
    );
    expect(lines[1]).toMatch(/^missing: openssl .*: apt-get install openssl$/u);
    expect(lines[2]).toMatch(/^missing: git .*: apt-get install git$/u);
  });

  it('names a shallow clone, whose history lacks the previous release the upgrade test builds', () => {
    const clone = join(scratch, 'shallow');
    execFileSync('git', ['clone', '-q', '--depth', '1', `file://${repoRoot}`, clone]);
    // This checkout's script, run from inside the shallow clone.
    copyFileSync(script, join(clone, 'hack', 'check-prerequisites.sh'));
    const run = spawnSync('bash', [join(clone, 'hack', 'check-prerequisites.sh')], {
      env: process.env,
      encoding: 'utf8',
    });
    const lines = run.stderr.split('\n').filter((line) => line !== '');
    expect(run.status).toBe(1);
    expect(lines.filter((line) => !baseline.lines.includes(line))).toEqual([
      expect.stringMatching(/^missing: the clone's history .*: git fetch --unshallow$/u),
    ]);
  });

  it('runs first in `make test`, before the binaries, the dependencies and any test', () => {
    // Without an outer make's flags (`make test` runs jest): this make is its own.
    const env = Object.fromEntries(
      Object.entries(process.env).filter(
        ([k]) => !['MAKEFLAGS', 'MFLAGS', 'MAKELEVEL'].includes(k),
      ),
    );
    const plan = execFileSync('make', ['-n', 'test'], { cwd: repoRoot, encoding: 'utf8', env });
    expect(plan.split('\n')[0]).toBe('bash hack/check-prerequisites.sh');
  });
});
