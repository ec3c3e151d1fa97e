/**
 * Writes the Helm chart charts/polychrome from the kustomize trees under config/ (run by
 * `make generate`; `make verify-generate` fails when the committed chart differs): the pinned
 * kubectl's kustomize builds config/default, each optional component's tree
 * (hack/chart/values.ts) and hack/chart/render.ts turns them into templates, values.yaml and
 * values.schema.json. The version is package.json's. A re-run is byte-identical.
 *
 *   tsx hack/build-chart.ts [OUT_DIR]   (default charts/polychrome)
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { parseAllDocuments } from 'yaml';
import { chartFiles, type Obj } from './chart/render';
import { COMPONENTS } from './chart/values';
import { defaultBinDir, repoRoot } from './lib/paths';

/** The committed chart, relative to the repository root. */
export const CHART_DIR = 'charts/polychrome';

/** The objects the pinned kubectl's kustomize builds from `dir` (relative to the root). */
export function kustomizeBuild(dir: string): Obj[] {
  const kubectl = join(defaultBinDir, 'kubectl');
  if (!existsSync(kubectl)) throw new Error(`${kubectl} is missing: run 'make binaries'`);
  const out = execFileSync(kubectl, ['kustomize', join(repoRoot, dir)], {
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  return parseAllDocuments(out).map((d) => d.toJS() as Obj);
}

function main(): void {
  const out = process.argv[2] ?? join(repoRoot, CHART_DIR);
  const pkg = JSON.parse(readFileSync(join(repoRoot, 'package.json'), 'utf8')) as {
    version: string;
  };
  const dirs = ['config/default', ...COMPONENTS.map((c) => c.source)];
  const builds = new Map(dirs.map((d) => [d, kustomizeBuild(d)]));
  const files = chartFiles({ version: pkg.version, builds });
  rmSync(join(out, 'templates'), { recursive: true, force: true });
  for (const [path, text] of files) {
    mkdirSync(dirname(join(out, path)), { recursive: true });
    writeFileSync(join(out, path), text);
  }
  console.log(`hack: wrote ${String(files.size)} files of the chart to ${out}`);
}

if (require.main === module) main();
