/**
 * hack/krew/pack.ts: the archive installs as krew installs it (the manifest's `files:` and
 * `bin:`, on this platform) and the plugin runs from there with a clean environment; the
 * manifest holds the archive's sha256.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { execFileSync, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  symlinkSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';

import { parse } from 'yaml';

import { KUBE_USAGE } from '../../cli/kube-verbs';
import { headCommit } from '../build-info';
import { repoRoot } from '../lib/paths';
import { checkKrewManifest } from './fill-manifest';
import { ARCHIVE_FOLDER, packKrewArchive, type KrewRelease } from './pack';

const dir = mkdtempSync(join(tmpdir(), 'polychrome-krew-test-'));
const url = 'https://example.com/releases/v0.1.0/polychrome-v0.1.0.tar.gz';
let release: KrewRelease;

beforeAll(async () => {
  release = await packKrewArchive({ version: 'v0.1.0', url, outDir: join(dir, 'out') });
}, 120_000);
afterAll(() => rmSync(dir, { recursive: true, force: true }));

interface Platform {
  readonly uri: string;
  readonly sha256: string;
  readonly bin: string;
  readonly files: readonly { from: string; to: string }[];
  readonly selector: {
    readonly matchExpressions: readonly { key: string; operator: string; values: string[] }[];
  };
}

function platforms(): Platform[] {
  const manifest = parse(readFileSync(release.manifest, 'utf8')) as {
    spec: { platforms: Platform[] };
  };
  return manifest.spec.platforms;
}

/** krew's selector on os (this test's platform); the arch is any, as the plugin is Node. */
function selects(platform: Platform, os: string): boolean {
  return platform.selector.matchExpressions.every(
    (e) => e.key === 'os' && e.operator === 'In' && e.values.includes(os),
  );
}

/** A `files:` pattern as krew globs it (filepath.Glob): `*` within the last path element. */
function glob(root: string, pattern: string): string[] {
  const parent = dirname(pattern);
  const last = pattern.slice(parent === '.' ? 0 : parent.length + 1);
  const re = new RegExp(
    `^${last.replace(/[.+?^${}()|[\]\\]/gu, '\\$&').replace(/\*/gu, '[^/]*')}$`,
    'u',
  );
  const base = join(root, parent);
  return existsSync(base)
    ? readdirSync(base)
        .filter((name) => re.test(name))
        .map((name) => join(parent, name))
    : [];
}

/** Unpacks the archive and moves its files as krew does; returns the install folder. */
function installAsKrew(platform: Platform): string {
  const extract = join(dir, 'extract');
  const install = join(dir, 'store', 'polychrome', 'v0.1.0');
  mkdirSync(extract, { recursive: true });
  mkdirSync(install, { recursive: true });
  execFileSync('tar', ['-xzf', release.archive, '-C', extract]);
  for (const { from, to } of platform.files) {
    const matches = glob(extract, from);
    // krew refuses a `from` that matches nothing.
    expect({ from, matches: matches.length > 0 }).toEqual({ from, matches: true });
    for (const match of matches) {
      const target = join(install, to, match.split('/').at(-1) ?? '');
      mkdirSync(dirname(target), { recursive: true });
      renameSync(join(extract, match), target);
    }
  }
  return install;
}

describe('the krew archive', () => {
  it('is what the manifest names: a valid manifest, the sha256 of the archive, this platform', () => {
    expect(checkKrewManifest(readFileSync(release.manifest, 'utf8'))).toEqual([]);
    const sha256 = createHash('sha256').update(readFileSync(release.archive)).digest('hex');
    expect(release.sha256).toBe(sha256);
    const all = platforms();
    expect(all.map((p) => ({ uri: p.uri, sha256: p.sha256 }))).toEqual(
      all.map(() => ({ uri: url, sha256 })),
    );
    expect(all.filter((p) => selects(p, 'linux'))).toHaveLength(1);
    expect(all.filter((p) => selects(p, 'darwin'))).toHaveLength(1);
    expect(all.filter((p) => selects(p, 'windows'))).toHaveLength(0);
    const listing = execFileSync('tar', ['-tzf', release.archive], { encoding: 'utf8' });
    // The repository's LICENSE travels with the plugin, when there is one.
    expect(listing.split('\n').includes(`${ARCHIVE_FOLDER}/LICENSE`)).toBe(
      existsSync(join(repoRoot, 'LICENSE')),
    );
    expect(
      listing.split('\n').every((line) => line === '' || line.startsWith(`${ARCHIVE_FOLDER}/`)),
    ).toBe(true);
  });

  it('installs as krew installs it and runs version, help and completion with no node_modules', () => {
    const platform = platforms().find((p) => selects(p, 'linux'));
    if (platform === undefined) throw new Error('no linux platform in the manifest');
    const install = installAsKrew(platform);
    const bin = join(install, platform.bin);
    expect(statSync(bin).mode & 0o111).toBe(0o111);
    // krew links the bin as kubectl-<name> in its bin folder, which is on PATH.
    const binDir = join(dir, 'bin');
    mkdirSync(binDir);
    symlinkSync(bin, join(binDir, 'kubectl-polychrome'));
    symlinkSync(
      join(install, 'kubectl_complete-polychrome'),
      join(binDir, 'kubectl_complete-polychrome'),
    );
    for (let up = install; up !== dirname(up); up = dirname(up)) {
      expect(existsSync(join(up, 'node_modules'))).toBe(false);
    }
    const env = { PATH: `${binDir}:${dirname(process.execPath)}`, HOME: dir };
    const run = (command: string, args: string[]) => {
      const result = spawnSync(command, args, { cwd: dir, env, encoding: 'utf8', timeout: 30_000 });
      return { status: result.status, out: result.stdout, err: result.stderr };
    };
    const { version } = JSON.parse(readFileSync(join(repoRoot, 'package.json'), 'utf8')) as {
      version: string;
    };
    expect(run('kubectl-polychrome', ['version'])).toEqual({
      status: 0,
      out: `kubectl-polychrome ${version} (commit ${headCommit(repoRoot) ?? ''})\n`,
      err: '',
    });
    expect(run('kubectl-polychrome', ['help'])).toEqual({ status: 0, out: KUBE_USAGE, err: '' });
    expect(run('kubectl_complete-polychrome', ['tr'])).toEqual({
      status: 0,
      out: 'transcript\n:4\n',
      err: '',
    });
    const missing = run('kubectl-polychrome', ['get', 'hello', '--kubeconfig', join(dir, 'none')]);
    expect(missing.status).toBe(3);
    expect(missing.err).toContain(`no kubeconfig: ${join(dir, 'none')} (from --kubeconfig)`);
  });
});
