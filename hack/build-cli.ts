/**
 * Bundles the CLI's entry points (cli/kubectl-polychrome.ts, cli/kubectl-complete-polychrome.ts,
 * cli/polychrome.ts) with esbuild into `<out>/<entry>.mjs`, with the code and libraries
 * they load on demand in `<out>/chunks/`: one file per entry for what every run needs, and
 * a chunk per `import()` (a verb's module, the kubeconfig library), read only when that verb
 * runs. The launchers in bin/ run the bundle when it is there (bin/launch.js), and the krew
 * archive carries it (hack/krew/pack.ts). docs/kubectl.md, "Start time".
 *
 * The bundle needs no node_modules: every library is inside. It records the package's
 * version and the commit (POLYCHROME_BUILD_INFO, cli/build-info.ts), as it travels without
 * package.json, and carries the demo model script `--live` falls back to.
 *
 *   tsx hack/build-cli.ts [OUT_DIR]      (default dist/bundle)
 */
import { copyFile, mkdir, readFile, readdir, rm } from 'node:fs/promises';
import { basename, join, relative, resolve } from 'node:path';

import { build, type Metafile } from 'esbuild';

import { ALIASES, externalPackages, OPTIONAL_REQUIRES } from './build-bundles';
import { headCommit } from './build-info';

const root = resolve(__dirname, '..');

/** The entry points, by the name their bundle gets (`<name>.mjs`). */
export const CLI_ENTRIES: readonly string[] = [
  'kubectl-polychrome',
  'kubectl-complete-polychrome',
  'polychrome',
];

/*
 * ESM, for esbuild's code splitting, which is what keeps a verb's libraries out of `help`.
 * The libraries written as CommonJS still call require() for Node's own modules: the banner
 * gives each file one, made for it. __dirname and __filename are given by the inject file,
 * as the sources would see them from cli/ in the bundle's folder (so `..` is that folder).
 */
const BANNER =
  "import { createRequire as __polychromeCreateRequire } from 'node:module';\n" +
  'const __polychromeFileUrl = import.meta.url;\n' +
  'const require = __polychromeCreateRequire(__polychromeFileUrl);';

/** The files the bundled code reads beside itself, as paths relative to the repository. */
const RESOURCES = ['harness/model/demo-script.yaml'];

/** What `kubectl polychrome version` prints: package.json's version and the checkout's HEAD. */
async function buildInfo(): Promise<{ version: string; commit?: string }> {
  const pkg = JSON.parse(await readFile(join(root, 'package.json'), 'utf8')) as {
    version: string;
  };
  const commit = headCommit(root);
  return { version: pkg.version, ...(commit === undefined ? {} : { commit }) };
}

/** What {@link buildCli} wrote: the files, relative to the folder, and esbuild's metafile. */
export interface BuiltCli {
  readonly files: string[];
  readonly metafile: Metafile;
}

/** Builds the bundle of `entries` into `outDir` (emptied first). */
export async function buildCli(
  outDir: string = join(root, 'dist', 'bundle'),
  entries: readonly string[] = CLI_ENTRIES,
): Promise<BuiltCli> {
  await rm(outDir, { recursive: true, force: true });
  await mkdir(outDir, { recursive: true });
  const { metafile } = await build({
    metafile: true,
    absWorkingDir: root,
    entryPoints: entries.map((name) => ({
      in: join(root, 'cli', `${name}.ts`),
      out: name,
    })),
    outdir: outDir,
    outExtension: { '.js': '.mjs' },
    chunkNames: 'chunks/[name]-[hash]',
    bundle: true,
    splitting: true,
    format: 'esm',
    platform: 'node',
    target: ['node20.19'],
    // Whitespace and syntax only: names stay, so a stack trace still reads.
    minifyWhitespace: true,
    minifySyntax: true,
    legalComments: 'none',
    sourcemap: false,
    banner: { js: BANNER },
    inject: [join(__dirname, 'build-cli-shims.ts')],
    define: { POLYCHROME_BUILD_INFO: JSON.stringify(await buildInfo()) },
    // As the images' bundles (hack/build-bundles.ts): the npm punycode, not Node's
    // deprecated one, and nothing left to require but Node's modules and optional ones.
    alias: ALIASES,
    tsconfig: join(root, 'tsconfig.json'),
    logLevel: 'warning',
  });
  const left = externalPackages(metafile).filter(
    (p) => !(p in metafile.outputs) && !OPTIONAL_REQUIRES.includes(p),
  );
  if (left.length > 0) {
    throw new Error(
      `the CLI bundle still requires ${left.join(', ')} at run time, which the krew archive ` +
        'does not carry; bundle it, or if it is optional add it to OPTIONAL_REQUIRES in ' +
        'hack/build-bundles.ts',
    );
  }
  for (const resource of RESOURCES) {
    await mkdir(join(outDir, resource, '..'), { recursive: true });
    await copyFile(join(root, resource), join(outDir, resource));
  }
  const files = await readdir(outDir, { recursive: true, withFileTypes: true });
  return {
    files: files
      .filter((f) => f.isFile())
      .map((f) => relative(outDir, join(f.parentPath, f.name)))
      .sort(),
    metafile,
  };
}

/**
 * The source files (paths as the metafile names them) in what `entry` loads when it starts:
 * its file and the chunks it imports statically, not those it imports with `import()`.
 */
export function startupInputs(metafile: Metafile, entry: string): string[] {
  const outputs = metafile.outputs;
  const start = Object.keys(outputs).find((path) => basename(path) === `${entry}.mjs`);
  if (start === undefined) throw new Error(`no output for the entry ${entry}`);
  const seen = new Set<string>();
  const stack = [start];
  for (let next = stack.pop(); next !== undefined; next = stack.pop()) {
    if (seen.has(next)) continue;
    seen.add(next);
    for (const imported of outputs[next]?.imports ?? []) {
      if (imported.kind === 'import-statement' && imported.path in outputs)
        stack.push(imported.path);
    }
  }
  return [...seen].flatMap((path) => Object.keys(outputs[path]?.inputs ?? {})).sort();
}

if (require.main === module) {
  buildCli(process.argv[2] === undefined ? undefined : resolve(process.argv[2]))
    .then(({ files }) => {
      const entries = files.filter((f) => !f.startsWith('chunks/') && f.endsWith('.mjs'));
      console.log(`cli: built ${entries.join(', ')} and ${files.length - entries.length} more`);
    })
    .catch((error: unknown) => {
      console.error(error);
      process.exit(1);
    });
}
