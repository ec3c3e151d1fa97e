import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { chmod, copyFile, mkdir, mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { gzipSync } from 'node:zlib';

import { buildCli } from '../build-cli';
import { checkKrewManifest, fillManifest } from './fill-manifest';

/*
 * The krew release archive of `kubectl polychrome` (docs/kubectl.md, "Install"):
 * `polychrome-<version>.tar.gz` holds one folder, `polychrome/`, with the two commands krew
 * and kubectl run (`kubectl-polychrome`, `kubectl_complete-polychrome`: small launchers),
 * the bundle they run in `lib/` (hack/build-cli.ts: no node_modules needed), and LICENSE
 * when the repository has one. Writes the archive and the manifest filled for it
 * (hack/krew/polychrome.yaml through fill-manifest.ts) into OUT. `make krew-archive` runs it.
 *
 *   npx tsx hack/krew/pack.ts --url URL [--version vX.Y.Z] [--out DIR]
 *
 * URL is where the archive will be published (https); the version defaults to
 * package.json's. The archive is packed with GNU tar, sorted, owned by 0 and dated at
 * SOURCE_DATE_EPOCH (else 0), so the same sources give the same sha256.
 */

const root = resolve(__dirname, '..', '..');

/** The folder inside the archive that the manifest's `files:` takes (`polychrome/*`). */
export const ARCHIVE_FOLDER = 'polychrome';

/** The commands in the archive, each the launcher of one bundle entry in `lib/`. */
export const ARCHIVE_COMMANDS = {
  'kubectl-polychrome': 'kubectl-polychrome',
  'kubectl_complete-polychrome': 'kubectl-complete-polychrome',
} as const;

/** A launcher: Node runs it as CommonJS, which imports the ES module bundle beside it. */
function launcher(command: string, entry: string): string {
  return `#!/usr/bin/env node
'use strict';
// ${command} from the krew archive of Polychrome: runs the bundle in lib/ (Node 20.19+).
const { join } = require('node:path');
const { pathToFileURL } = require('node:url');
import(pathToFileURL(join(__dirname, 'lib', '${entry}.mjs')).href).catch((error) => {
  console.error('${command}:', error);
  process.exit(3);
});
`;
}

/** Lays out `polychrome/` in `stage`: the launchers, the bundle, package.json, LICENSE. */
async function stageArchive(stage: string): Promise<void> {
  const folder = join(stage, ARCHIVE_FOLDER);
  await buildCli(join(folder, 'lib'), Object.values(ARCHIVE_COMMANDS));
  for (const [command, entry] of Object.entries(ARCHIVE_COMMANDS)) {
    await writeFile(join(folder, command), launcher(command, entry));
    await chmod(join(folder, command), 0o755);
  }
  // The launchers are CommonJS whatever package.json a folder above the install says.
  await writeFile(join(folder, 'package.json'), '{ "type": "commonjs", "private": true }\n');
  const license = join(root, 'LICENSE');
  const hasLicense = await stat(license).then(
    (s) => s.isFile(),
    () => false,
  );
  if (hasLicense) await copyFile(license, join(folder, 'LICENSE'));
}

/** What {@link packKrewArchive} wrote. */
export interface KrewRelease {
  readonly archive: string;
  readonly manifest: string;
  readonly sha256: string;
}

/** Packs the archive for `version` and writes it and its filled manifest into `outDir`. */
export async function packKrewArchive(options: {
  readonly version: string;
  readonly url: string;
  readonly outDir: string;
}): Promise<KrewRelease> {
  const stage = await mkdtemp(join(tmpdir(), 'polychrome-krew-'));
  try {
    await stageArchive(stage);
    await mkdir(options.outDir, { recursive: true });
    const archive = join(options.outDir, `polychrome-${options.version}.tar.gz`);
    const epoch = process.env.SOURCE_DATE_EPOCH ?? '0';
    const tar = execFileSync(
      'tar',
      [
        '--sort=name',
        `--mtime=@${epoch}`,
        '--owner=0',
        '--group=0',
        '--numeric-owner',
        '-cf',
        '-',
        '-C',
        stage,
        ARCHIVE_FOLDER,
      ],
      { stdio: ['ignore', 'pipe', 'inherit'], maxBuffer: 256 * 1024 * 1024 },
    );
    // zlib's gzip header holds no name and no time.
    const gz = gzipSync(tar, { level: 9 });
    await writeFile(archive, gz);
    const sha256 = createHash('sha256').update(gz).digest('hex');
    const template = await readFile(join(__dirname, 'polychrome.yaml'), 'utf8');
    const filled = fillManifest(template, { version: options.version, url: options.url, sha256 });
    const problems = checkKrewManifest(filled);
    if (problems.length > 0) {
      throw new Error(`the filled krew manifest is not valid: ${problems.join('; ')}`);
    }
    const manifest = join(options.outDir, 'polychrome.yaml');
    await writeFile(manifest, filled);
    return { archive, manifest, sha256 };
  } finally {
    await rm(stage, { recursive: true, force: true });
  }
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      version: { type: 'string' },
      url: { type: 'string' },
      out: { type: 'string' },
    },
  });
  if (values.url === undefined || values.url === '') {
    throw new Error(
      'pack.ts needs --url: the https URL the archive will be published at ' +
        '(make krew-archive KREW_URL=https://.../polychrome-vX.Y.Z.tar.gz)',
    );
  }
  const pkg = JSON.parse(await readFile(join(root, 'package.json'), 'utf8')) as {
    version: string;
  };
  const release = await packKrewArchive({
    version: values.version ?? `v${pkg.version}`,
    url: values.url,
    outDir: resolve(values.out ?? join(root, 'dist', 'krew')),
  });
  console.log(`krew: ${release.archive} (sha256 ${release.sha256}), ${release.manifest}`);
}

if (require.main === module) {
  main().catch((error: unknown) => {
    console.error(error instanceof Error ? error.message : String(error));
    process.exitCode = 1;
  });
}
