/**
 * hack/build-bundles.ts, as the Dockerfiles and `make images` run it: a plane's bundle runs
 * from a folder with no node_modules anywhere above it, and the state plane's LevelDB
 * binding sits where classic-level's own loader looks for it; each holds only its own plane's
 * code and the libraries it uses. The images' smoke tests
 * (hack/build-images.sh) run the bundles in the built images.
 */
import { afterAll, describe, expect, it } from '@jest/globals';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { build } from 'esbuild';

import {
  buildPlane,
  externalPackages,
  parseArgs,
  PLANES,
  type Arch,
  type Plane,
} from './build-bundles';

const work = mkdtempSync(join(tmpdir(), 'polychrome-bundles-'));
afterAll(() => rmSync(work, { recursive: true, force: true }));

const plane = (name: Plane['name']): Plane => PLANES.find((p) => p.name === name) as Plane;
const hostArch: Arch = process.arch === 'arm64' ? 'arm64' : 'x64';

describe('hack/build-bundles.ts', () => {
  it('bundles the state plane into one file that runs without node_modules, its LevelDB binding beside it', async () => {
    const out = join(work, 'host');
    const files = await buildPlane(plane('state'), out, hostArch);
    const glibc = hostArch === 'x64' ? 'classic-level.node' : 'classic-level.armv8.node';
    expect(files).toEqual(['state/main.js', `state/prebuilds/linux-${hostArch}/${glibc}`]);
    // The configuration error is the bundle's own code, after every module loaded.
    const run = spawnSync(process.execPath, [join(out, 'state', 'main.js')], {
      cwd: out,
      env: {},
      encoding: 'utf8',
    });
    expect(run.stderr).toContain('state plane configuration has 6 problems');
    expect(run.stderr).toContain('STATE_TLS_CA_FILE: is required');
    expect(run.status).toBe(2);
    // classic-level's loader, given the bundle's folder as the bundle gives it __dirname.
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    const nodeGypBuild = require('node-gyp-build') as { path(dir: string): string };
    expect(nodeGypBuild.path(join(out, 'state'))).toBe(join(out, files[1] as string));
  }, 60_000);

  it('copies the arm64 prebuild for an arm64 image, and no musl build for either', async () => {
    const out = join(work, 'arm64');
    expect(await buildPlane(plane('state'), out, 'arm64')).toEqual([
      'state/main.js',
      'state/prebuilds/linux-arm64/classic-level.armv8.node',
    ]);
    await buildPlane(plane('state'), join(work, 'x64'), 'x64');
    expect(readdirSync(join(work, 'x64', 'state', 'prebuilds', 'linux-x64'))).toEqual([
      'classic-level.node',
    ]);
  }, 60_000);

  it('bundles the control plane with the forensics UI beside it', async () => {
    const out = join(work, 'control-plane');
    const files = await buildPlane(plane('control-plane'), out, hostArch);
    expect(files).toEqual(['operator/main.js', 'ui/app.css', 'ui/app.js', 'ui/index.html']);
    const run = spawnSync(process.execPath, [join(out, 'operator', 'main.js')], {
      cwd: out,
      env: {},
      encoding: 'utf8',
    });
    // No DEP0040: the bundle carries the npm punycode, not Node's deprecated built-in.
    expect(run.stderr).not.toContain('punycode');
    expect(run.stderr).toContain('POLYCHROME_STATE_ADDRESS: is required');
    expect(run.status).toBe(1);
  }, 60_000);

  it("holds only its own plane's code and libraries: its folder, common/ and proto/, and no library only another plane uses", async () => {
    /** The repository folders beside node_modules each plane's bundle may hold. */
    const own: Record<Plane['name'], readonly string[]> = {
      // docs/api/openapi.json: the public API serves its own description.
      'control-plane': ['common', 'docs', 'operator', 'proto'],
      state: ['common', 'proto', 'state'],
      harness: ['common', 'harness', 'proto'],
    };
    /** Libraries one plane alone uses: the Kubernetes client, the payment rails, LevelDB, MCP. */
    const onlyIn: Record<string, Plane['name']> = {
      '@kubernetes/client-node': 'control-plane',
      '@x402/core': 'control-plane',
      mppx: 'control-plane',
      viem: 'control-plane',
      'classic-level': 'state',
      '@modelcontextprotocol/sdk': 'harness',
    };
    const metafiles = join(work, 'metafiles');
    for (const p of PLANES) {
      await buildPlane(p, join(work, 'own'), hostArch, metafiles);
      const { inputs } = JSON.parse(readFileSync(join(metafiles, `${p.name}.json`), 'utf8')) as {
        inputs: Record<string, unknown>;
      };
      const packages = new Set<string>();
      const folders = new Set<string>();
      for (const input of Object.keys(inputs)) {
        const library = /(?:^|\/)node_modules\/((?:@[^/]+\/)?[^/]+)\//u.exec(input)?.[1];
        if (library === undefined) folders.add(input.split('/')[0] ?? '');
        else packages.add(library);
      }
      expect({ plane: p.name, folders: [...folders].sort() }).toEqual({
        plane: p.name,
        folders: own[p.name],
      });
      for (const [library, plane] of Object.entries(onlyIn)) {
        expect({ plane: p.name, library, bundled: packages.has(library) }).toEqual({
          plane: p.name,
          library,
          bundled: plane === p.name,
        });
      }
    }
  }, 120_000);

  it('names the packages a bundle still requires at run time, not the built-ins', async () => {
    const entry = join(work, 'entry.js');
    writeFileSync(
      entry,
      "require('node:fs'); require('path'); require('left-out');\n" +
        "try { require('not-installed-optional'); } catch {}\n",
    );
    const result = await build({
      entryPoints: [entry],
      outfile: join(work, 'entry-out.js'),
      bundle: true,
      platform: 'node',
      external: ['left-out'],
      metafile: true,
      logLevel: 'silent',
    });
    expect(externalPackages(result.metafile)).toEqual(['left-out', 'not-installed-optional']);
  });

  it('parses its command line and refuses what it does not know, naming it', () => {
    expect(parseArgs(['out', '--arch', 'arm64', 'state'])).toEqual({
      outDir: join(process.cwd(), 'out'),
      arch: 'arm64',
      planes: [plane('state')],
    });
    expect(parseArgs(['out']).planes).toEqual(PLANES);
    expect(parseArgs(['out', '--metafile-dir', 'meta', 'state'])).toEqual({
      outDir: join(process.cwd(), 'out'),
      arch: process.arch === 'arm64' ? 'arm64' : 'x64',
      planes: [plane('state')],
      metafileDir: join(process.cwd(), 'meta'),
    });
    expect(() => parseArgs(['out', '--metafile-dir'])).toThrow('usage:');
    expect(() => parseArgs([])).toThrow('usage: tsx hack/build-bundles.ts OUT_DIR');
    expect(() => parseArgs(['out', '--arch', 'riscv64'])).toThrow(
      '--arch must be one of x64, arm64, got "riscv64"',
    );
    expect(() => parseArgs(['out', 'operator'])).toThrow(
      'unknown plane "operator": one of control-plane, state, harness',
    );
  });
});
