/**
 * hack/krew/pack.ts: krew itself, built from its Go module, installs the archive with the
 * filled manifest (its validation, the archive's sha256, the platform's `files:` and `bin:`),
 * refuses it for a platform the manifest does not offer or with changed bytes, and the plugin
 * runs from where krew put it with a clean environment.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { execFileSync, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import {
  existsSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';

import { parse } from 'yaml';

import { KUBE_USAGE } from '../../cli/kube-verbs';
import { headCommit } from '../build-info';
import { defaultBinDir, repoRoot } from '../lib/paths';
import { checkKrewManifest } from './fill-manifest';
import { ARCHIVE_FOLDER, packKrewArchive, type KrewRelease } from './pack';

const dir = mkdtempSync(join(tmpdir(), 'polychrome-krew-test-'));
const url = 'https://example.com/releases/v0.1.0/polychrome-v0.1.0.tar.gz';
let release: KrewRelease;

beforeAll(async () => {
  release = await packKrewArchive({ version: 'v0.1.0', url, outDir: join(dir, 'out') });
}, 120_000);
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** What each platform of the manifest names as its archive. */
interface Platform {
  readonly uri: string;
  readonly sha256: string;
}

function platforms(): Platform[] {
  const manifest = parse(readFileSync(release.manifest, 'utf8')) as {
    spec: { platforms: Platform[] };
  };
  return manifest.spec.platforms;
}

/**
 * krew itself (hack/krew/upstream, built from its Go module at KREW_VERSION) with a root of
 * its own, installing from the manifest and the archive on disk: nothing is downloaded, and
 * krew checks the manifest, the archive's sha256 and the platform as it does for a user.
 * KREW_OS picks the platform krew matches the selectors against.
 */
function krew(
  args: readonly string[],
  { os = 'linux', root = `krew-${os}` }: { os?: string; root?: string } = {},
): { status: number | null; out: string; err: string } {
  const result = spawnSync(join(defaultBinDir, 'krew'), args, {
    cwd: dir,
    env: {
      PATH: process.env.PATH ?? '',
      HOME: dir,
      KREW_ROOT: join(dir, root),
      KREW_OS: os,
    },
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'pipe'],
    timeout: 60_000,
  });
  return { status: result.status, out: result.stdout, err: result.stderr };
}

/** `krew install` of the manifest with `archive`. */
const krewInstall = (archive: string, options: Parameters<typeof krew>[1] = {}) =>
  krew(['install', `--manifest=${release.manifest}`, `--archive=${archive}`], options);

describe('the krew archive', () => {
  it('is what the manifest names: a valid manifest, the sha256 of the archive, one folder', () => {
    expect(checkKrewManifest(readFileSync(release.manifest, 'utf8'))).toEqual([]);
    const sha256 = createHash('sha256').update(readFileSync(release.archive)).digest('hex');
    expect(release.sha256).toBe(sha256);
    const all = platforms();
    expect(all.map((p) => ({ uri: p.uri, sha256: p.sha256 }))).toEqual(
      all.map(() => ({ uri: url, sha256 })),
    );
    const listing = execFileSync('tar', ['-tzf', release.archive], { encoding: 'utf8' });
    // The repository's LICENSE travels with the plugin, when there is one.
    expect(listing.split('\n').includes(`${ARCHIVE_FOLDER}/LICENSE`)).toBe(
      existsSync(join(repoRoot, 'LICENSE')),
    );
    expect(
      listing.split('\n').every((line) => line === '' || line.startsWith(`${ARCHIVE_FOLDER}/`)),
    ).toBe(true);
  });

  it('is refused by krew for a platform it does not offer, and when its bytes are not the ones the manifest names', () => {
    const windows = krewInstall(release.archive, { os: 'windows' });
    expect(windows.status).not.toBe(0);
    expect(windows.err).toContain('does not offer installation for this platform');
    const changed = join(dir, 'changed.tar.gz');
    const bytes = readFileSync(release.archive);
    bytes.writeUInt8(bytes.readUInt8(bytes.length - 1) ^ 1, bytes.length - 1);
    writeFileSync(changed, bytes);
    const tampered = krewInstall(changed, { root: 'krew-tampered' });
    expect(tampered.status).not.toBe(0);
    expect(tampered.err).toMatch(/checksum does not match/u);
    expect(existsSync(join(dir, 'krew-tampered', 'store', 'polychrome'))).toBe(false);
  });

  it('installs with krew on linux and darwin, and runs version, help and completion from there with no node_modules', () => {
    expect(krewInstall(release.archive, { os: 'darwin' })).toMatchObject({ status: 0 });
    const installed = krewInstall(release.archive);
    expect(installed).toMatchObject({ status: 0 });
    expect(installed.err).toContain('Installed plugin: polychrome');
    // krew links the bin as kubectl-polychrome in its bin folder, which a user puts on PATH;
    // the completion it installs beside it, and the caveats say to link that too.
    const install = join(dir, 'krew-linux', 'store', 'polychrome', 'v0.1.0');
    const binDir = join(dir, 'krew-linux', 'bin');
    expect(readdirSync(binDir)).toEqual(['kubectl-polychrome']);
    symlinkSync(
      join(install, 'kubectl_complete-polychrome'),
      join(binDir, 'kubectl_complete-polychrome'),
    );
    // The receipt krew keeps of what it installed: this manifest, for this version.
    const receipt = readFileSync(join(dir, 'krew-linux', 'receipts', 'polychrome.yaml'), 'utf8');
    expect(receipt).toContain('version: v0.1.0');
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
