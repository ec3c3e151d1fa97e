/**
 * The project's import graph and the circles in it (docs/design.md "Boundaries"). Pure: the
 * caller reads the files (hack/check-imports.ts).
 *
 * Every import counts, `import type` and `export ... from` included: a type-only import
 * does not run, but it ties two modules together as much as any other (neither can be read,
 * moved or tested without the other), and ESLint's `import-x/no-cycle` skips them. Only
 * relative specifiers are followed; packages are outside the graph.
 *
 * Two kinds of circle are refused:
 * - a file circle: modules that import each other, directly or through others;
 * - a folder circle: folders whose production files import each other both ways, directly
 *   or through other folders (tests are left out: a test may import the support it uses).
 *
 * It also finds re-exports that ESLint cannot see: `import { x } from './m'; export { x };`
 * hands on another module's name as a barrel would (ESLint refuses `export ... from`).
 */
import path from 'node:path';
import ts from 'typescript';

/** A module's imports of other project modules, by path relative to the repository. */
export type ImportGraph = ReadonlyMap<string, readonly string[]>;

/** How a module specifier is found: the candidates tried in order. */
const RESOLUTION_SUFFIXES = ['.ts', '.tsx', '/index.ts', ''] as const;

/**
 * The graph of `sources` (path relative to the repository → text). A relative specifier
 * that names no file among them (an asset, a generated file outside the set) is left out.
 */
export function importGraph(sources: ReadonlyMap<string, string>): ImportGraph {
  const graph = new Map<string, string[]>();
  for (const [file, text] of sources) {
    const { importedFiles } = ts.preProcessFile(text, true, true);
    const targets = importedFiles
      .map(({ fileName }) => resolveSpecifier(file, fileName, sources))
      .filter((target): target is string => target !== undefined && target !== file);
    graph.set(file, [...new Set(targets)]);
  }
  return graph;
}

function resolveSpecifier(
  from: string,
  specifier: string,
  sources: ReadonlyMap<string, string>,
): string | undefined {
  if (!specifier.startsWith('.')) return undefined;
  const base = path.posix
    .normalize(path.posix.join(path.posix.dirname(from), specifier))
    .replace(/\.js$/u, '');
  return RESOLUTION_SUFFIXES.map((suffix) => base + suffix).find((c) => sources.has(c));
}

/**
 * The file circles: one path per strongly connected component of more than one module,
 * starting and ending at its first module in sort order (`a.ts`, `b.ts`, `a.ts`).
 */
export function fileCircles(graph: ImportGraph): string[][] {
  return circlesOf(graph);
}

/**
 * The folder circles among the modules `isProduction` keeps: the graph of folders (a
 * module's directory), with an edge where a module of one imports a module of another.
 */
export function folderCircles(
  graph: ImportGraph,
  isProduction: (file: string) => boolean,
): string[][] {
  const folders = new Map<string, Set<string>>();
  for (const [file, targets] of graph) {
    if (!isProduction(file)) continue;
    const from = path.posix.dirname(file);
    const edges = folders.get(from) ?? new Set<string>();
    folders.set(from, edges);
    for (const target of targets) {
      const to = path.posix.dirname(target);
      if (to !== from && isProduction(target)) edges.add(to);
    }
  }
  return circlesOf(new Map([...folders].map(([folder, edges]) => [folder, [...edges]])));
}

/** One circle per strongly connected component of more than one node (Tarjan's). */
function circlesOf(graph: ImportGraph): string[][] {
  return stronglyConnected(graph)
    .filter((component) => component.length > 1)
    .map((component) => circleThrough(graph, new Set(component)))
    .sort((a, b) => a[0]!.localeCompare(b[0]!));
}

function stronglyConnected(graph: ImportGraph): string[][] {
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const components: string[][] = [];
  const visit = (node: string): void => {
    index.set(node, index.size);
    low.set(node, index.get(node)!);
    stack.push(node);
    onStack.add(node);
    for (const next of graph.get(node) ?? []) {
      if (!index.has(next)) {
        visit(next);
        low.set(node, Math.min(low.get(node)!, low.get(next)!));
      } else if (onStack.has(next)) {
        low.set(node, Math.min(low.get(node)!, index.get(next)!));
      }
    }
    if (low.get(node) !== index.get(node)) return;
    const component: string[] = [];
    let member: string;
    do {
      member = stack.pop()!;
      onStack.delete(member);
      component.push(member);
    } while (member !== node);
    components.push(component.sort());
  };
  for (const node of [...graph.keys()].sort()) if (!index.has(node)) visit(node);
  return components;
}

/** The shortest way from the component's first node back to itself, within the component. */
function circleThrough(graph: ImportGraph, component: ReadonlySet<string>): string[] {
  const start = [...component].sort()[0]!;
  const cameFrom = new Map<string, string>();
  const queue = [start];
  while (queue.length > 0) {
    const node = queue.shift()!;
    for (const next of graph.get(node) ?? []) {
      if (!component.has(next)) continue;
      if (next === start) return [...pathTo(cameFrom, node, start), start];
      if (cameFrom.has(next)) continue;
      cameFrom.set(next, node);
      queue.push(next);
    }
  }
  throw new Error(`no circle through ${start}: not a strongly connected component`);
}

function pathTo(cameFrom: ReadonlyMap<string, string>, node: string, start: string): string[] {
  const way = [node];
  while (way[0] !== start) way.unshift(cameFrom.get(way[0]!)!);
  return way;
}

/**
 * The names `text` imports from a project module (a relative specifier) and exports again
 * with a bare `export { ... }`. Names imported from packages may be handed on (a facade over
 * a library is a choice, not a barrel).
 */
export function reexportedImports(fileName: string, text: string): string[] {
  const file = ts.createSourceFile(fileName, text, ts.ScriptTarget.Latest, false);
  const imported = new Set<string>();
  for (const statement of file.statements) {
    if (!ts.isImportDeclaration(statement) || statement.importClause === undefined) continue;
    if (!(statement.moduleSpecifier as ts.StringLiteral).text.startsWith('.')) continue;
    const { name, namedBindings } = statement.importClause;
    if (name !== undefined) imported.add(name.text);
    if (namedBindings !== undefined && ts.isNamedImports(namedBindings)) {
      for (const element of namedBindings.elements) imported.add(element.name.text);
    }
  }
  const handedOn: string[] = [];
  for (const statement of file.statements) {
    if (!ts.isExportDeclaration(statement) || statement.moduleSpecifier !== undefined) continue;
    const clause = statement.exportClause;
    if (clause === undefined || !ts.isNamedExports(clause)) continue;
    for (const element of clause.elements) {
      const local = (element.propertyName ?? element.name).text;
      if (imported.has(local)) handedOn.push(local);
    }
  }
  return handedOn;
}
