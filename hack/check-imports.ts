/**
 * `make lint`'s import check: no import circle between files or folders, type-only imports
 * included, and no re-export of another module's names (hack/lib/import-graph.ts,
 * docs/design.md "Boundaries"). Reads every TypeScript file git knows of, generated code
 * excepted; exits 1 naming each problem.
 *
 * Usage: npx tsx hack/check-imports.ts
 */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileCircles, folderCircles, importGraph, reexportedImports } from './lib/import-graph';
import { repoRoot } from './lib/paths';

/** Generated code is outside the rule: it is written by protoc, not read. */
const GENERATED = /^proto\/gen\//u;
/** A test may import the support it uses, wherever that lives. */
const isProduction = (file: string): boolean =>
  !file.endsWith('.test.ts') && !file.startsWith('test/') && !file.includes('/testdata/');

function trackedSources(): Map<string, string> {
  const listed = execFileSync(
    'git',
    ['ls-files', '--cached', '--others', '--exclude-standard', '*.ts', '*.tsx'],
    { cwd: repoRoot, encoding: 'utf8' },
  );
  const files = listed.split('\n').filter((file) => file !== '' && !GENERATED.test(file));
  return new Map(files.map((file) => [file, readFileSync(path.join(repoRoot, file), 'utf8')]));
}

const sources = trackedSources();
const graph = importGraph(sources);
const problems = [
  ...[...sources].flatMap(([file, text]) =>
    reexportedImports(file, text).map(
      (name) => `re-export: ${file} exports ${name}, which it imports from another module`,
    ),
  ),
  ...fileCircles(graph).map((circle) => `file circle: ${circle.join(' -> ')}`),
  ...folderCircles(graph, isProduction).map((circle) => `folder circle: ${circle.join('/ -> ')}/`),
];
if (problems.length > 0) {
  console.error(problems.join('\n'));
  console.error(
    `\n${problems.length} problem(s). A re-export: import the name from the module that ` +
      'declares it instead. A circle (`import type` counts too): move what both sides need into ' +
      'a module (or folder) both import, or turn the dependency around (the inner module ' +
      'declares a port, the outer one implements it). docs/design.md "Boundaries".',
  );
  process.exit(1);
}
console.log(`imports: ${graph.size} modules, no circles, no re-exports`);
