/**
 * Writes `<out>/build-info.json`, what a build records about itself for `kubectl polychrome
 * version` (cli/build-info.ts): the git commit it was built from, when built in a git
 * checkout; `{}` otherwise. `make build` and `npm run build` run it after compiling.
 *
 *   tsx hack/build-info.ts <out>
 */
import { execFileSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { repoRoot } from './lib/paths';

/** The commit HEAD names in `dir`'s git checkout, or undefined outside one (or without git). */
export function headCommit(dir: string): string | undefined {
  try {
    const out = execFileSync('git', ['rev-parse', 'HEAD'], {
      cwd: dir,
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'ignore'],
    }).trim();
    return /^[0-9a-f]{40,64}$/u.test(out) ? out : undefined;
  } catch {
    return undefined;
  }
}

if (require.main === module) {
  const out = process.argv[2];
  if (out === undefined) {
    console.error('usage: tsx hack/build-info.ts <out-dir> (e.g. dist)');
    process.exit(2);
  }
  const commit = headCommit(repoRoot);
  mkdirSync(out, { recursive: true });
  writeFileSync(
    join(out, 'build-info.json'),
    `${JSON.stringify(commit === undefined ? {} : { commit })}\n`,
  );
}
