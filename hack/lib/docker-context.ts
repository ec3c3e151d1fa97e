/**
 * What `docker build` sends of a build context, answered by dockerignore-check
 * (hack/dockerignore: Docker's own .dockerignore reader and matcher, applied as BuildKit's
 * context walk applies them; `make test-binaries` builds it). docs/images.md.
 */
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';

import { defaultBinDir } from './paths';

/** Where `make test-binaries` links dockerignore-check. */
export const dockerignoreCheck = join(defaultBinDir, 'dockerignore-check');

function binary(): string {
  if (!existsSync(dockerignoreCheck)) {
    throw new Error(
      `${dockerignoreCheck} is missing: run 'make test-binaries' to build it from hack/dockerignore`,
    );
  }
  return dockerignoreCheck;
}

/**
 * The ignore file BuildKit applies for `dockerfile` (a path in `contextRoot`):
 * `<Dockerfile>.dockerignore` beside it when there is one, else the root's `.dockerignore`.
 */
export function ignoreFileFor(contextRoot: string, dockerfile: string): string {
  const own = join(contextRoot, `${dockerfile}.dockerignore`);
  return existsSync(own) ? own : join(contextRoot, '.dockerignore');
}

/**
 * For each path (relative to the context root, as `git ls-files` prints it; a trailing `/`
 * marks a directory), whether Docker sends it under `ignoreFile`.
 */
export function dockerSends(ignoreFile: string, paths: readonly string[]): Map<string, boolean> {
  const out = execFileSync(binary(), ['-f', ignoreFile], {
    input: paths.map((p) => `${p}\n`).join(''),
    encoding: 'utf8',
    maxBuffer: 64 * 1024 * 1024,
  });
  const answers = new Map<string, boolean>();
  for (const line of out.split('\n')) {
    if (line === '') continue;
    const [word, path] = line.split('\t', 2) as [string, string];
    answers.set(path, word === 'sent');
  }
  return answers;
}

/** Every file under `contextRoot` that Docker sends under `ignoreFile`, sorted. */
export function dockerContextFiles(contextRoot: string, ignoreFile: string): string[] {
  const out = execFileSync(binary(), ['-f', ignoreFile, '-list', contextRoot], {
    encoding: 'utf8',
    maxBuffer: 64 * 1024 * 1024,
  });
  return out
    .split('\n')
    .filter((l) => l !== '')
    .sort();
}
