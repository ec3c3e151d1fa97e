/**
 * dockerignore-check (hack/dockerignore) applies a .dockerignore as `docker build` does:
 * cases from Docker's documentation of the file, each answered both per path and by the
 * context walk hack/docker-context.sh copies from, which must agree.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, posix } from 'node:path';

import {
  dockerContextFiles,
  dockerignoreCheck,
  dockerSends,
  ignoreFileFor,
} from './docker-context';

let work: string;
let n = 0;
beforeAll(() => {
  work = mkdtempSync(join(tmpdir(), 'polychrome-dockerignore-'));
});
afterAll(() => {
  rmSync(work, { recursive: true, force: true });
});

/** A context holding `files` (empty) and a .dockerignore of `lines`. */
function context(lines: readonly string[], files: readonly string[]): string {
  n += 1;
  const root = join(work, `ctx-${n}`);
  mkdirSync(root, { recursive: true });
  for (const file of files) {
    mkdirSync(join(root, posix.dirname(file)), { recursive: true });
    writeFileSync(join(root, file), '');
  }
  writeFileSync(join(root, '.dockerignore'), `${lines.join('\n')}\n`);
  return root;
}

describe('dockerignore-check', () => {
  it.each([
    [
      'an exception re-includes a folder, and a later exception a file under an excluded one',
      ['*', '!a', 'a/b', '!a/b/keep.txt'],
      ['a/x.ts', 'a/b/y.ts', 'a/b/keep.txt', 'c/z.ts', 'top.txt'],
      ['a/b/keep.txt', 'a/x.ts'],
    ],
    [
      'the last matching line wins; * matches in the root only (Docker docs: README*.md)',
      ['*.md', '!README*.md', 'README-secret.md'],
      ['README.md', 'README-secret.md', 'other.md', 'sub/other.md'],
      ['.dockerignore', 'README.md', 'sub/other.md'],
    ],
    [
      '** matches any depth, the root included; comments, a leading / and ./ are dropped',
      ['# *.ts', '**/*.go', '/build', './tmp/'],
      ['x.go', 'a/b/x.go', 'a/x.ts', 'build/out', 'tmp/t', 'a/build/out'],
      ['.dockerignore', 'a/build/out', 'a/x.ts'],
    ],
    [
      'a folder pattern excludes what is under it at any depth, through every parent folder',
      ['**/testdata/', 'build'],
      ['testdata/a', 'x/testdata/a', 'x/y/z/testdata/b/c', 'build/a/b/c', 'x/build', 'x/y.ts'],
      ['.dockerignore', 'x/build', 'x/y.ts'],
    ],
    [
      'a glob in an exception makes the walk enter every excluded folder',
      ['*', '!**/keep'],
      ['deep/a/keep', 'deep/a/other', 'keep', 'x'],
      ['deep/a/keep', 'keep'],
    ],
    [
      'a folder excluded at any depth stays excluded below it while the walk enters it',
      ['**/testdata/', '!**/keep'],
      ['x/y/z/testdata/b/c', 'x/y/z/testdata/keep', 'x/a'],
      ['.dockerignore', 'x/a', 'x/y/z/testdata/keep'],
    ],
    [
      'an excluded folder holds nothing sent unless an exception names a path under it',
      ['*', '!hack/build-ui.ts', 'hack/bin'],
      ['hack/build-ui.ts', 'hack/dev.ts', 'hack/bin/kubectl', 'hacks/build-ui.ts'],
      ['hack/build-ui.ts'],
    ],
  ])('%s', (_what, lines, files, sent) => {
    const root = context(lines, files);
    const ignore = join(root, '.dockerignore');
    expect(dockerContextFiles(root, ignore)).toEqual(sent);
    const answers = dockerSends(ignore, files);
    expect([...answers.keys()]).toEqual(files);
    expect(files.filter((f) => answers.get(f))).toEqual(files.filter((f) => sent.includes(f)));
  });

  it('answers for a folder given with a trailing /', () => {
    const root = context(['*', '!a/'], ['a/x', 'b/y']);
    const answers = dockerSends(join(root, '.dockerignore'), ['a/', 'b/']);
    expect(Object.fromEntries(answers)).toEqual({ 'a/': true, 'b/': false });
  });

  it.each([
    [['-f', '/nonexistent/.dockerignore', 'a'], 'the .dockerignore to apply (-f)'],
    [['a'], '-f FILE is required'],
    [['-f', 'FILE', '../a'], '"../a" is not a clean path relative to the context root'],
    [['-f', 'FILE', '/etc/passwd'], '"/etc/passwd" is not a clean path'],
    [['-f', 'FILE', 'a//b'], '"a//b" is not a clean path'],
    [['-f', 'BAD', 'a'], 'holds a pattern Docker rejects'],
  ])('refuses bad input with exit 2: %j', (args, message) => {
    const root = context(['*'], []);
    writeFileSync(join(root, 'BAD'), '[\n');
    const argv = args.map((a) =>
      a === 'FILE' ? join(root, '.dockerignore') : a === 'BAD' ? join(root, 'BAD') : a,
    );
    const run = spawnSync(dockerignoreCheck, argv, { encoding: 'utf8' });
    expect(run.stderr).toContain(message);
    expect(run.status).toBe(2);
  });
});

describe('ignoreFileFor', () => {
  it("takes a Dockerfile's own <Dockerfile>.dockerignore over the root's, as BuildKit does", () => {
    const root = context(['*'], ['operator/Dockerfile', 'state/Dockerfile']);
    writeFileSync(join(root, 'operator', 'Dockerfile.dockerignore'), '*\n');
    expect(ignoreFileFor(root, 'operator/Dockerfile')).toBe(
      join(root, 'operator', 'Dockerfile.dockerignore'),
    );
    expect(ignoreFileFor(root, 'state/Dockerfile')).toBe(join(root, '.dockerignore'));
  });
});
