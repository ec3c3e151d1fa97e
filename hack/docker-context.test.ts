/**
 * The images build with Docker too: every file each Dockerfile copies from the build context
 * is one `docker build` sends under the repository's .dockerignore, and no test, fixture or
 * key under those paths is. Docker's own matcher decides (hack/bin/dockerignore-check, from
 * github.com/moby/patternmatcher; `make test-binaries`), not a copy of its rules. The image
 * build (hack/build-images.sh) compiles from the context hack/docker-context.sh copies with
 * the same matcher, checked here on planted files. docs/images.md.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { execFileSync, spawnSync } from 'node:child_process';
import {
  copyFileSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join, posix, relative } from 'node:path';

import { dockerSends, ignoreFileFor } from './lib/docker-context';
import { contextCopies } from './lib/dockerfile-sources';
import { repoRoot } from './lib/paths';

/** Files under `pathspecs` in the working tree, tracked or new (as `make lint-images` finds). */
function gitFiles(...pathspecs: string[]): string[] {
  const out = execFileSync(
    'git',
    ['ls-files', '-z', '--cached', '--others', '--exclude-standard', '--', ...pathspecs],
    { cwd: repoRoot, encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 },
  );
  return out.split('\0').filter((f) => f !== '');
}

/** What no image is built from: tests, their fixtures, key material (docs/images.md). */
function neverSent(path: string): boolean {
  const name = posix.basename(path);
  return (
    name.endsWith('.test.ts') ||
    path.split('/').includes('testdata') ||
    /\.(pem|key|crt|p12)$/u.test(name) ||
    ['records-key', 'signing-key', 'harness-token', 'token'].includes(name) ||
    name.startsWith('.env')
  );
}

const dockerfiles = gitFiles('*Dockerfile*').filter((f) => !f.endsWith('.dockerignore'));

describe("every Dockerfile's context sources reach `docker build`", () => {
  it('finds the three planes’ Dockerfiles', () => {
    expect(dockerfiles).toEqual(
      expect.arrayContaining(['operator/Dockerfile', 'state/Dockerfile', 'harness/Dockerfile']),
    );
  });

  it.each(dockerfiles)(
    '%s: Docker sends every file its COPY/ADD sources hold, and no test, fixture or key',
    (dockerfile) => {
      const copies = contextCopies(readFileSync(join(repoRoot, dockerfile), 'utf8'), dockerfile);
      expect(copies.length).toBeGreaterThan(0);
      const wrong: string[] = [];
      const where = new Map<string, string>();
      for (const { line, instruction, sources } of copies) {
        for (const source of sources) {
          const files = gitFiles(source);
          if (files.length === 0) {
            wrong.push(`${dockerfile}:${line}: ${instruction} ${source}: no such file in the tree`);
          }
          for (const file of files)
            where.set(file, `${dockerfile}:${line} ${instruction} ${source}`);
        }
      }
      const sent = dockerSends(ignoreFileFor(repoRoot, dockerfile), [...where.keys()]);
      for (const [file, from] of where) {
        const want = neverSent(file) ? 'excluded' : 'sent';
        const got =
          sent.get(file) === undefined ? 'unanswered' : sent.get(file) ? 'sent' : 'excluded';
        if (got !== want) wrong.push(`${from}: ${file} is ${got}, must be ${want}`);
      }
      expect(wrong).toEqual([]);
    },
  );
});

/** Writes each file (empty) under `root`. */
function plant(root: string, files: readonly string[]): void {
  for (const file of files) {
    mkdirSync(join(root, posix.dirname(file)), { recursive: true });
    writeFileSync(join(root, file), `${file}\n`);
  }
}

/** Every file under `dir`, relative, sorted. */
function filesUnder(dir: string): string[] {
  return readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((e) => !e.isDirectory())
    .map((e) => relative(dir, join(e.parentPath, e.name)).split('\\').join('/'))
    .sort();
}

let work: string;
beforeAll(() => {
  work = mkdtempSync(join(tmpdir(), 'polychrome-docker-context-'));
});
afterAll(() => {
  rmSync(work, { recursive: true, force: true });
});

describe("the image build's context (hack/docker-context.sh) under the repository's .dockerignore", () => {
  const sent = [
    'common/errors.ts',
    'docs/api/openapi.json',
    'hack/build-bundles.ts',
    'hack/build-ui.ts',
    'harness/main.ts',
    'harness/model/demo-script.yaml',
    'operator/Dockerfile',
    'operator/main.ts',
    'package-lock.json',
    'package.json',
    'proto/gen/journal.ts',
    'state/journal/entry.ts',
    'tsconfig.json',
    'ui/index.html',
    'ui/main.ts',
  ];
  // What a working tree gathers and an attacker would hope a build picks up.
  const excluded = [
    '.dockerignore',
    '.env',
    '.git/config',
    '.local/dev/harness-token',
    '.local/dev/state/key.pem',
    'common/testdata/probe.ts',
    'dist/operator/main.js',
    'docs/design.md',
    'hack/bin/kubectl',
    'hack/build-images.sh',
    'hack/dev.ts',
    'hack/lib/paths.ts',
    'harness/harness-token',
    'node_modules/esbuild/index.js',
    'operator/.env.local',
    'operator/certs/tls.crt',
    'operator/certs/tls.key',
    'operator/main.test.ts',
    'operator/token',
    'proto/client.p12',
    'state/records-key',
    'state/journal/testdata/vectors.json',
    'state/signing-key',
    'test/integration/x.test.ts',
    'tsconfig.build.json',
    'ui/secret.pem',
    'ui/testdata/journal.json',
    'ui/timeline.test.ts',
  ];

  it('copies exactly the allowed files, and the check answers the same per path', () => {
    const root = join(work, 'repo');
    plant(root, [...sent, ...excluded]);
    copyFileSync(join(repoRoot, '.dockerignore'), join(root, '.dockerignore'));
    const dest = join(work, 'context');
    const run = spawnSync('bash', [join(repoRoot, 'hack', 'docker-context.sh'), root, dest], {
      encoding: 'utf8',
    });
    expect(run.stderr).toBe('');
    expect(run.status).toBe(0);
    expect(filesUnder(dest)).toEqual([...sent].sort());
    expect(readFileSync(join(dest, 'ui/main.ts'), 'utf8')).toBe('ui/main.ts\n');
    const answers = dockerSends(join(root, '.dockerignore'), [...sent, ...excluded]);
    expect([...answers].filter(([, s]) => s).map(([p]) => p)).toEqual(sent);
  });

  it('refuses a context with no .dockerignore, which Docker would send whole', () => {
    const root = join(work, 'bare');
    plant(root, ['operator/main.ts', '.local/key.pem']);
    const run = spawnSync(
      'bash',
      [join(repoRoot, 'hack', 'docker-context.sh'), root, join(work, 'bare-out')],
      {
        encoding: 'utf8',
      },
    );
    expect(run.status).toBe(1);
    expect(run.stderr).toContain('.dockerignore is missing');
  });
});
