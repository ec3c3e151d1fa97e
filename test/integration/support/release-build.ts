/**
 * `make release` run by the tests (release.test.ts, upgrade.test.ts): into a registry on
 * this machine (support/registry.ts), signed with a throwaway cosign key, from this checkout
 * or from another one (the previous release's worktree, support/previous-release.ts).
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { defaultBinDir, repoRoot } from '../../../hack/lib/paths';

/** The throwaway signing key's password. */
export const RELEASE_KEY_PASSWORD = 'throwaway-release-test';

/**
 * The variables this repository's Makefile exports: its pins (KUBE_VERSION, ...), which an
 * outer `make test` puts into the environment of everything it runs.
 */
export function makefileExports(makefile = join(repoRoot, 'Makefile')): Set<string> {
  const lines = readFileSync(makefile, 'utf8').replace(/\\\n/gu, ' ').split('\n');
  return new Set(
    lines
      .filter((line) => line.startsWith('export '))
      .flatMap((line) => line.slice('export '.length).trim().split(/\s+/u))
      .filter((name) => /^[A-Z][A-Z0-9_]*$/u.test(name)),
  );
}

/**
 * The environment without an outer make's flags and pins, which must stay out of the make run
 * here: another checkout (the previous release's) builds with the pins of its own Makefile,
 * whose `?=` an exported pin of this one would override.
 */
export const releaseEnv: NodeJS.ProcessEnv = (() => {
  const outer = new Set(['MAKEFLAGS', 'MFLAGS', 'MAKELEVEL', ...makefileExports()]);
  return Object.fromEntries(Object.entries(process.env).filter(([k]) => !outer.has(k)));
})();

/** What a command printed, and how it ended. */
export interface Run {
  status: number | null;
  stdout: string;
  stderr: string;
}

/** `cmd args` in `cwd` (this checkout by default), with `extraEnv` over releaseEnv. */
export function runIn(
  cwd: string,
  cmd: string,
  args: readonly string[],
  extraEnv: NodeJS.ProcessEnv = {},
): Run {
  const r = spawnSync(cmd, args, {
    cwd,
    encoding: 'utf8',
    env: { ...releaseEnv, ...extraEnv },
    maxBuffer: 64 << 20,
  });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr ?? String(r.error ?? '') };
}

/** A cosign key pair: the private key's path and the public key's. */
export interface KeyPair {
  key: string;
  pub: string;
}

/** `cosign generate-key-pair` into `dir/name`, with RELEASE_KEY_PASSWORD. */
export function cosignKeyPair(dir: string, name: string): KeyPair {
  const into = join(dir, name);
  mkdirSync(into);
  const r = runIn(into, join(defaultBinDir, 'cosign'), ['generate-key-pair'], {
    COSIGN_PASSWORD: RELEASE_KEY_PASSWORD,
  });
  if (r.status !== 0) throw new Error(`cosign generate-key-pair failed: ${r.stderr}`);
  return { key: join(into, 'cosign.key'), pub: join(into, 'cosign.pub') };
}

/**
 * What a release test needs of this machine: root (the images' chroot checks) and the
 * tools from hack/bin. @throws Error naming what is missing and how to get it.
 */
export function requireReleaseTools(tools: readonly string[]): void {
  if (process.getuid?.() !== 0)
    throw new Error('make release checks its images under chroot: run as root');
  for (const tool of tools) {
    if (!existsSync(join(defaultBinDir, tool)))
      throw new Error(`hack/bin/${tool} is missing: run 'make test-binaries'`);
  }
}

/**
 * The images `make test` built just before (RELEASE_TEST_IMAGES, an IMAGE_LAYOUT of
 * hack/build-images.sh), when set, and the version to release this checkout as: theirs, or
 * package.json's.
 */
export function thisRelease(): { version: string; images: string | undefined } {
  const images = process.env['RELEASE_TEST_IMAGES'];
  const version =
    images !== undefined && existsSync(join(images, 'inputs', 'version'))
      ? readFileSync(join(images, 'inputs', 'version'), 'utf8').trim()
      : (JSON.parse(readFileSync(join(repoRoot, 'package.json'), 'utf8')) as { version: string })
          .version;
  return { version, images };
}

/** One `make release` and what it pushed. */
export interface BuiltRelease {
  run: Run;
  /** Each pushed reference by its name under the prefix (`state`, `charts/polychrome`). */
  pinned: Record<string, string>;
}

/**
 * `make release` in `checkout` to `prefix` (a registry host and path), written to `out`.
 *
 * @throws Error with make's output when the release fails.
 */
export function makeRelease(opts: {
  checkout: string;
  prefix: string;
  version: string;
  key: string;
  out: string;
  images?: string | undefined;
}): BuiltRelease {
  // `-o node_modules`: make never runs `npm ci` here. Each checkout's node_modules is ready
  // (make test's own target, or the previous release's npm ci), and a helper's worktree
  // links another checkout's, which `npm ci` through the link would empty.
  const run = runIn(
    opts.checkout,
    'make',
    [
      '-o',
      'node_modules',
      'release',
      `REGISTRY=${opts.prefix}`,
      `VERSION=${opts.version}`,
      `COSIGN_KEY=${opts.key}`,
      `RELEASE_OUT=${opts.out}`,
    ],
    {
      COSIGN_PASSWORD: RELEASE_KEY_PASSWORD,
      ...(opts.images === undefined ? {} : { RELEASE_IMAGES: opts.images }),
    },
  );
  if (run.status !== 0)
    throw new Error(`make release in ${opts.checkout} failed:\n${run.stdout}\n${run.stderr}`);
  const pinned = Object.fromEntries(
    readFileSync(join(opts.out, 'images.txt'), 'utf8')
      .split('\n')
      .filter(Boolean)
      .map((ref) => [ref.slice(opts.prefix.length + 1).split('@')[0] ?? '', ref]),
  );
  return { run, pinned };
}
