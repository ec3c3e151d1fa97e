/**
 * Bundles the forensics UI (ui/, docs/ui.md) into a few static files with esbuild:
 * `index.html`, `app.css` and one `app.js` (no inline script: the control plane serves them
 * under a CSP of `default-src 'self'`). `npm run build` runs it into `dist/ui`;
 * operator/ui/ui-assets.ts serves that folder.
 *
 *   tsx hack/build-ui.ts [OUT_DIR]      (default dist/ui)
 */
import { copyFile, mkdir, readdir, rm, writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';

import { build } from 'esbuild';

const root = resolve(__dirname, '..');

/**
 * Builds the bundle into `outDir` (emptied first); returns the files written. With
 * `metafileOut`, esbuild's metafile (what went into the bundle) is written there too, for the
 * release's SBOM (hack/release/sbom.ts).
 */
export async function buildUi(
  outDir: string = join(root, 'dist', 'ui'),
  metafileOut?: string,
): Promise<string[]> {
  await rm(outDir, { recursive: true, force: true });
  await mkdir(outDir, { recursive: true });
  const result = await build({
    entryPoints: [join(root, 'ui', 'main.ts')],
    outfile: join(outDir, 'app.js'),
    bundle: true,
    format: 'iife',
    platform: 'browser',
    target: ['es2022'],
    minify: true,
    sourcemap: false,
    legalComments: 'none',
    inject: [join(root, 'ui', 'shims', 'buffer.ts')],
    tsconfig: join(root, 'ui', 'tsconfig.json'),
    metafile: metafileOut !== undefined,
    logLevel: 'warning',
  });
  if (metafileOut !== undefined) await writeFile(metafileOut, JSON.stringify(result.metafile));
  for (const file of ['index.html', 'app.css']) {
    await copyFile(join(root, 'ui', file), join(outDir, file));
  }
  return (await readdir(outDir)).sort();
}

if (require.main === module) {
  buildUi(process.argv[2] === undefined ? undefined : resolve(process.argv[2]))
    .then((files) => console.log(`ui: built ${files.join(', ')}`))
    .catch((error: unknown) => {
      console.error(error);
      process.exit(1);
    });
}
