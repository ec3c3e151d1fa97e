/**
 * hack/build-info.ts as `make build` runs it, read back by `kubectl polychrome version`
 * (cli/build-info.ts) from the layout a build has: the commit is this checkout's HEAD, and
 * outside a git checkout none is recorded.
 */
import { afterAll, describe, expect, it } from '@jest/globals';
import { execFileSync } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { versionText } from '../cli/build-info';
import { headCommit } from './build-info';
import { repoRoot } from './lib/paths';

const root = mkdtempSync(join(tmpdir(), 'polychrome-build-info-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

describe('hack/build-info.ts', () => {
  it("records this checkout's HEAD in dist/build-info.json, which `version` prints", () => {
    const head = execFileSync('git', ['rev-parse', 'HEAD'], { cwd: repoRoot, encoding: 'utf8' });
    execFileSync(
      process.execPath,
      ['--import', 'tsx', join(repoRoot, 'hack', 'build-info.ts'), join(root, 'dist')],
      { cwd: repoRoot },
    );
    expect(JSON.parse(readFileSync(join(root, 'dist', 'build-info.json'), 'utf8'))).toEqual({
      commit: head.trim(),
    });
    copyFileSync(join(repoRoot, 'package.json'), join(root, 'package.json'));
    mkdirSync(join(root, 'dist', 'cli'));
    const { version } = JSON.parse(readFileSync(join(repoRoot, 'package.json'), 'utf8')) as {
      version: string;
    };
    expect(versionText('kubectl-polychrome', join(root, 'dist', 'cli'))).toBe(
      `kubectl-polychrome ${version} (commit ${head.trim()})\n`,
    );
  }, 30_000);

  it('finds no commit outside a git checkout', () => {
    expect(headCommit(root)).toBeUndefined();
  });
});
