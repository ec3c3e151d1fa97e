import { readFileSync } from 'node:fs';
import { join } from 'node:path';

/*
 * What a CLI was built from, for the `version` of both programs: text only, from the files
 * beside the code (or what the bundle carries), loading nothing more than node:fs.
 */

/** What a build records beside the code it compiled (`make build` writes it). */
interface BuildInfo {
  readonly version?: string;
  readonly commit?: string;
}

/*
 * What the bundle was built from: hack/build-cli.ts defines POLYCHROME_BUILD_INFO as the
 * package's version and the commit, as the bundle travels without package.json (the krew
 * archive). Run from the sources or tsc's dist/, it is not defined.
 */
declare const POLYCHROME_BUILD_INFO: BuildInfo | undefined;

/** The first of `paths` that reads as JSON, else undefined. */
function readJson(paths: readonly string[]): Record<string, unknown> | undefined {
  for (const path of paths) {
    try {
      const value: unknown = JSON.parse(readFileSync(path, 'utf8'));
      if (typeof value === 'object' && value !== null) return value as Record<string, unknown>;
    } catch {
      // not there (a source checkout has no build info): the next place, or none
    }
  }
  return undefined;
}

/** package.json's version and build-info.json's commit, found from `dir`. */
function buildInfoBeside(dir: string): BuildInfo {
  const pkg = readJson([join(dir, '..', 'package.json'), join(dir, '..', '..', 'package.json')]);
  const info = readJson([join(dir, '..', 'build-info.json')]);
  return {
    ...(typeof pkg?.['version'] === 'string' ? { version: pkg['version'] } : {}),
    ...(typeof info?.['commit'] === 'string' ? { commit: info['commit'] } : {}),
  };
}

/**
 * `kubectl polychrome version` and `polychrome version` (`program` names which):
 * package.json's version, and the git commit the build recorded in build-info.json (dist/,
 * beside the compiled cli/), when it was built from a checkout; the bundle carries both
 * (hack/build-cli.ts). `dir` is where this module is: cli/ in a checkout, dist/cli/ when
 * compiled.
 */
export function versionText(program: string, dir?: string): string {
  const info =
    dir === undefined && typeof POLYCHROME_BUILD_INFO !== 'undefined'
      ? POLYCHROME_BUILD_INFO
      : buildInfoBeside(dir ?? __dirname);
  const version = info?.version ?? 'unknown';
  const commit =
    typeof info?.commit === 'string' && /^[0-9a-f]{7,64}$/u.test(info.commit)
      ? `commit ${info.commit}`
      : 'commit unknown: not built with `make build` from a git checkout';
  return `${program} ${version} (${commit})\n`;
}
