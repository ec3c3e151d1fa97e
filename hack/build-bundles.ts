/**
 * Bundles each plane's entry point into one file with esbuild, for Node 22 on Linux: what
 * the images run (docs/images.md). The three Dockerfiles and `hack/build-images.sh` both
 * run it, so a Docker build and `make images` are one recipe.
 *
 *   tsx hack/build-bundles.ts OUT_DIR [--arch x64|arm64] [--metafile-dir DIR] [PLANE...]
 *
 * PLANE is `control-plane`, `state` or `harness` (default: all three). It writes
 * `OUT_DIR/<dir>/main.js` (`dir` the plane's source folder: operator, state, harness), which
 * the images carry as `/app/dist/<dir>/main.js`, plus what a bundle cannot hold:
 * - the state plane's LevelDB binding: `classic-level` is bundled, and its loader
 *   (node-gyp-build) looks for `prebuilds/linux-<arch>/` beside the file it runs from, so
 *   the package's prebuilds for that one platform are copied to `OUT_DIR/state/prebuilds/`;
 * - the control plane's forensics UI (`OUT_DIR/ui`, hack/build-ui.ts), which
 *   operator/ui/ui-assets.ts finds at `dist/ui`. The OpenAPI document the control plane
 *   serves is a JSON import, so it is in the bundle.
 *
 * With `--metafile-dir`, esbuild's metafile of each bundle (every input file, so every npm
 * package in it) is written to `DIR/<plane>.json` (and the UI's to `DIR/ui.json`), outside
 * what the images carry: `make release` makes its SBOMs from them (hack/release/sbom.ts).
 *
 * Nothing is external but Node's built-in modules: a bundle that still requires a package
 * (other than the optional ones in {@link OPTIONAL_REQUIRES}, which their callers load in a
 * try/catch) fails the build, naming it, since the images carry no node_modules.
 */
import { cp, mkdir, readdir, rm, stat, writeFile } from 'node:fs/promises';
import { builtinModules } from 'node:module';
import { dirname, join, resolve } from 'node:path';

import { build, type Metafile } from 'esbuild';

import { buildUi } from './build-ui';

const root = resolve(__dirname, '..');

/** One plane's image: its name and the source folder of its `main.ts`. */
export interface Plane {
  readonly name: 'control-plane' | 'state' | 'harness';
  readonly dir: 'operator' | 'state' | 'harness';
}

/** The three planes, in the order the images are built. */
export const PLANES: readonly Plane[] = [
  { name: 'control-plane', dir: 'operator' },
  { name: 'state', dir: 'state' },
  { name: 'harness', dir: 'harness' },
];

/** The CPU architectures an image can be built for (Node's `process.arch` names). */
export const ARCHES = ['x64', 'arm64'] as const;
export type Arch = (typeof ARCHES)[number];

/**
 * Packages a bundle may still require at run time, because the module requiring them does
 * it in a try/catch and works without them (neither is installed in the images):
 * `ws`'s optional native speedups and `node-fetch`'s optional charset converter.
 */
export const OPTIONAL_REQUIRES: readonly string[] = ['bufferutil', 'utf-8-validate', 'encoding'];

/**
 * `punycode` is Node's deprecated built-in unless a package of that name is asked for with
 * a trailing slash. `tr46` (through `@kubernetes/client-node` and `node-fetch`) asks for the
 * built-in; inside node_modules Node stays silent about it, but a bundle is not inside
 * node_modules, so the control plane would print DEP0040 on every start. The npm package
 * (the same code Node vendors) is bundled instead.
 */
export const ALIASES: Readonly<Record<string, string>> = { punycode: 'punycode/' };

const builtins = new Set(builtinModules.flatMap((m) => [m, `node:${m}`]));

/** The packages `metafile`'s outputs still require at run time, besides Node's built-ins. */
export function externalPackages(metafile: Metafile): string[] {
  const found = new Set<string>();
  for (const output of Object.values(metafile.outputs)) {
    for (const imported of output.imports) {
      if (imported.path === '<runtime>' || builtins.has(imported.path)) continue;
      found.add(imported.path);
    }
  }
  return [...found].sort();
}

/**
 * The folder of `classic-level`'s prebuilds for Linux on `arch`, as its loader
 * (node-gyp-build) names them; only the glibc builds (the images' libc) are kept.
 */
async function levelPrebuilds(arch: Arch, outDir: string): Promise<string[]> {
  const pkg = dirname(require.resolve('classic-level/package.json', { paths: [root] }));
  const from = join(pkg, 'prebuilds', `linux-${arch}`);
  const files = await readdir(from).catch(() => []);
  const glibc = files.filter((f) => f.endsWith('.node') && !f.includes('.musl.'));
  if (glibc.length === 0) {
    throw new Error(
      `${from} holds no glibc prebuild: classic-level no longer ships one for linux-${arch}, ` +
        'so the state image has no LevelDB binding',
    );
  }
  const to = join(outDir, 'prebuilds', `linux-${arch}`);
  await mkdir(to, { recursive: true });
  for (const file of glibc) await cp(join(from, file), join(to, file));
  return glibc.map((f) => join('prebuilds', `linux-${arch}`, f));
}

/**
 * Bundles `plane` into `outDir/<dir>` (emptied first); returns the files written, relative.
 * With `metafileDir`, the bundle's metafile goes to `metafileDir/<plane>.json` (and the UI's
 * to `metafileDir/ui.json`).
 */
export async function buildPlane(
  plane: Plane,
  outDir: string,
  arch: Arch,
  metafileDir?: string,
): Promise<string[]> {
  const dir = join(outDir, plane.dir);
  await rm(dir, { recursive: true, force: true });
  const result = await build({
    // Aliases resolve from the working directory: the repository's, wherever this runs from.
    absWorkingDir: root,
    entryPoints: [join(root, plane.dir, 'main.ts')],
    outfile: join(dir, 'main.js'),
    bundle: true,
    platform: 'node',
    format: 'cjs',
    target: ['node22'],
    alias: ALIASES,
    // Syntax only. Names stay (errors and logs name classes and functions) and so do the
    // lines: Node prints the source line of an uncaught error, which must not be megabytes.
    minifySyntax: true,
    keepNames: true,
    legalComments: 'eof',
    metafile: true,
    logLevel: 'warning',
  });
  if (metafileDir !== undefined) {
    await mkdir(metafileDir, { recursive: true });
    await writeFile(join(metafileDir, `${plane.name}.json`), JSON.stringify(result.metafile));
  }
  const left = externalPackages(result.metafile).filter((p) => !OPTIONAL_REQUIRES.includes(p));
  if (left.length > 0) {
    throw new Error(
      `${plane.name}: the bundle still requires ${left.join(', ')} at run time, which the ` +
        'image does not carry; bundle it, or if it is optional (loaded in a try/catch) add it ' +
        'to OPTIONAL_REQUIRES in hack/build-bundles.ts',
    );
  }
  const written = [join(plane.dir, 'main.js')];
  if (plane.name === 'state') {
    written.push(...(await levelPrebuilds(arch, dir)).map((f) => join(plane.dir, f)));
  }
  if (plane.name === 'control-plane') {
    const ui = await buildUi(
      join(outDir, 'ui'),
      metafileDir === undefined ? undefined : join(metafileDir, 'ui.json'),
    );
    written.push(...ui.map((f) => join('ui', f)));
  }
  return written;
}

/** Parses the command line: `OUT_DIR [--arch x64|arm64] [--metafile-dir DIR] [PLANE...]`. */
export function parseArgs(argv: readonly string[]): {
  outDir: string;
  arch: Arch;
  planes: Plane[];
  metafileDir?: string;
} {
  const rest = [...argv];
  const usage =
    'usage: tsx hack/build-bundles.ts OUT_DIR [--arch x64|arm64] [--metafile-dir DIR] [PLANE...]';
  const outDir = rest.shift();
  if (outDir === undefined || outDir.startsWith('-')) throw new Error(usage);
  let arch: Arch = process.arch === 'arm64' ? 'arm64' : 'x64';
  let metafileDir: string | undefined;
  const names: string[] = [];
  while (rest.length > 0) {
    const arg = rest.shift() ?? '';
    if (arg === '--arch') {
      const value = rest.shift() ?? '';
      if (!(ARCHES as readonly string[]).includes(value)) {
        throw new Error(`--arch must be one of ${ARCHES.join(', ')}, got ${JSON.stringify(value)}`);
      }
      arch = value as Arch;
    } else if (arg === '--metafile-dir') {
      const value = rest.shift();
      if (value === undefined || value.startsWith('-')) throw new Error(usage);
      metafileDir = resolve(value);
    } else {
      names.push(arg);
    }
  }
  const planes = names.map((name) => {
    const plane = PLANES.find((p) => p.name === name);
    if (plane === undefined) {
      throw new Error(
        `unknown plane ${JSON.stringify(name)}: one of ${PLANES.map((p) => p.name).join(', ')}`,
      );
    }
    return plane;
  });
  return {
    outDir: resolve(outDir),
    arch,
    planes: planes.length > 0 ? planes : [...PLANES],
    ...(metafileDir === undefined ? {} : { metafileDir }),
  };
}

async function main(argv: readonly string[]): Promise<void> {
  const { outDir, arch, planes, metafileDir } = parseArgs(argv);
  for (const plane of planes) {
    const files = await buildPlane(plane, outDir, arch, metafileDir);
    const size = (await stat(join(outDir, plane.dir, 'main.js'))).size;
    console.log(
      `bundles: ${plane.name} (linux-${arch}): ${files.join(', ')}; ` +
        `main.js ${(size / 1e6).toFixed(1)} MB`,
    );
  }
}

if (require.main === module) {
  main(process.argv.slice(2)).catch((error: unknown) => {
    console.error(`bundles: ${error instanceof Error ? error.message : String(error)}`);
    process.exit(1);
  });
}
