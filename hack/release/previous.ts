/**
 * The previous release (hack/release/previous.json), which the upgrade test
 * (test/integration/upgrade.test.ts) installs before this checkout's release: until the
 * first tagged release, the last commit that landed with CI passing; after it, the previous
 * tag (docs/release.md, "Moving the previous release").
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { repoRoot } from '../lib/paths';

/** The pinned previous release: its version (make release's VERSION) and its full commit. */
export interface PreviousRelease {
  readonly version: string;
  readonly commit: string;
}

/** Where the pin is, relative to the repository root. */
export const PREVIOUS_RELEASE_FILE = 'hack/release/previous.json';

/** hack/release.sh's rule for VERSION: MAJOR.MINOR.PATCH[-PRE], no leading 'v'. */
const SEMVER = /^[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$/u;
const FULL_SHA = /^[0-9a-f]{40}$/u;

/**
 * Reads the pin from `text` (the file's content).
 *
 * @throws Error naming the file, the field that is wrong and what it must be.
 */
export function parsePreviousRelease(text: string): PreviousRelease {
  const where = PREVIOUS_RELEASE_FILE;
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err: unknown) {
    throw new Error(`${where} is not JSON: ${(err as Error).message}`, { cause: err });
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value))
    throw new Error(`${where} must be an object with "version" and "commit"`);
  const { version, commit } = value as Record<string, unknown>;
  if (typeof version !== 'string' || !SEMVER.test(version))
    throw new Error(
      `${where}: "version" ${JSON.stringify(version)} is not a semantic version (MAJOR.MINOR.PATCH[-PRE], no leading 'v'), as make release takes it`,
    );
  if (typeof commit !== 'string' || !FULL_SHA.test(commit))
    throw new Error(
      `${where}: "commit" ${JSON.stringify(commit)} is not a full commit id (40 lower-case hex digits: git rev-parse <tag or commit>)`,
    );
  return { version, commit };
}

/** The checked-in pin. */
export function readPreviousRelease(root: string = repoRoot): PreviousRelease {
  return parsePreviousRelease(readFileSync(join(root, PREVIOUS_RELEASE_FILE), 'utf8'));
}
