/**
 * The previous release (hack/release/previous.json) checked out from this repository's own
 * history into a temporary git worktree, with its own node_modules (`npm ci` there, never
 * in this checkout), so its `make release` builds what that commit would have released.
 */
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { repoRoot } from '../../../hack/lib/paths';
import type { PreviousRelease } from '../../../hack/release/previous';
import { runIn } from './release-build';

const git = (args: readonly string[]): { status: number | null; out: string } => {
  const r = spawnSync('git', args, { cwd: repoRoot, encoding: 'utf8' });
  return { status: r.status, out: `${r.stdout}${r.stderr}`.trim() };
};

/**
 * Checks that this clone holds the pinned commit. @throws Error naming the commit and what
 * to do (a shallow clone, as CI makes by default, lacks it).
 */
export function requirePreviousCommit(pin: PreviousRelease): void {
  if (git(['cat-file', '-e', `${pin.commit}^{commit}`]).status === 0) return;
  const shallow = git(['rev-parse', '--is-shallow-repository']).out === 'true';
  throw new Error(
    `the previous release's commit ${pin.commit} (${pin.version}, hack/release/previous.json) is not in this clone's history` +
      (shallow
        ? ': the clone is shallow; fetch the whole history (git fetch --unshallow, or fetch-depth: 0 in CI)'
        : ': fetch it (git fetch origin, and the tags) or correct the pin'),
  );
}

/**
 * `git worktree add --detach dir <commit>`, then `npm ci` in it (its own node_modules).
 * @throws Error with git's or npm's output.
 */
export function checkoutPrevious(pin: PreviousRelease, dir: string): void {
  requirePreviousCommit(pin);
  const added = git(['worktree', 'add', '--detach', dir, pin.commit]);
  if (added.status !== 0)
    throw new Error(`git worktree add of the previous release failed: ${added.out}`);
  // npm ci empties node_modules first: only ever in the fresh worktree, never this checkout.
  if (resolve(dir) === resolve(repoRoot) || !existsSync(join(dir, 'package.json')))
    throw new Error(`refusing npm ci in ${dir}: not the previous release's fresh worktree`);
  const ci = runIn(dir, 'npm', ['ci', '--no-audit', '--no-fund']);
  if (ci.status !== 0)
    throw new Error(
      `npm ci in the previous release's worktree failed:\n${ci.stdout}\n${ci.stderr}`,
    );
}

/** Removes the temporary worktree (and git's record of it); nothing when there is none. */
export function removePrevious(dir: string): void {
  if (existsSync(dir)) git(['worktree', 'remove', '--force', dir]);
  git(['worktree', 'prune']);
}
