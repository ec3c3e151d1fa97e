/**
 * Running the pinned Helm (hack/bin/helm, `make binaries`) on charts/polychrome for the chart's
 * tests, and comparing renders field by field.
 */
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { parseAllDocuments } from 'yaml';
import { defaultBinDir, repoRoot } from '../lib/paths';
import { KEEP_ANNOTATION } from './values';
import { objectKey, type Obj } from './render';

const CHART = join(repoRoot, 'charts', 'polychrome');

function helmPath(): string {
  const helm = join(defaultBinDir, 'helm');
  if (!existsSync(helm))
    throw new Error(`${helm} is missing: run 'make binaries' (it builds Helm from its Go module)`);
  return helm;
}

/** `--set-json path=value` for each value. */
const setJson = (values: Record<string, unknown>): string[] =>
  Object.entries(values).flatMap(([path, value]) => [
    '--set-json',
    `${path}=${JSON.stringify(value)}`,
  ]);

/** The pinned helm with these arguments; its output. */
export function helm(args: readonly string[]): string {
  return execFileSync(helmPath(), args, {
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'pipe'],
    maxBuffer: 64 * 1024 * 1024,
  });
}

/** The objects `helm template` renders with these values (`--set-json`), in `namespace`. */
export function helmTemplate(
  values: Record<string, unknown>,
  namespace = 'polychrome-system',
): Obj[] {
  const out = helm(['template', 'polychrome', CHART, '--namespace', namespace, ...setJson(values)]);
  return parseAllDocuments(out)
    .map((d) => d.toJS() as unknown)
    .filter((o): o is Obj => typeof o === 'object' && o !== null);
}

/** `helm lint --strict` of the chart; its output. */
export function helmLint(args: readonly string[]): string {
  return helm(['lint', '--strict', CHART, ...args]);
}

/** What `helm template` prints when it refuses these values (a test failure if it renders). */
export function helmError(values: Record<string, unknown>): string {
  try {
    helm(['template', 'polychrome', CHART, ...setJson(values)]);
  } catch (err: unknown) {
    return String((err as { stderr?: unknown }).stderr ?? err);
  }
  throw new Error(`helm template accepted ${JSON.stringify(values)}`);
}

/** `o` without Helm's keep annotation (the one difference allowed from kustomize's build). */
export function withoutKeep(o: Obj): Obj {
  const copy = structuredClone(o);
  const annotations = (copy['metadata'] as Obj | undefined)?.['annotations'] as Obj | undefined;
  if (annotations !== undefined) delete annotations[KEEP_ANNOTATION];
  return copy;
}

const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);

/** A list element's label: its name (or metadata.name), else its index. */
function label(el: unknown, i: number): string {
  if (isObj(el)) {
    const name = el['name'] ?? (isObj(el['metadata']) ? el['metadata']['name'] : undefined);
    if (typeof name === 'string') return name;
  }
  return String(i);
}

function entries(v: unknown): Map<string, unknown> {
  if (Array.isArray(v)) return new Map(v.map((el, i) => [`[${label(el, i)}]`, el as unknown]));
  return new Map(Object.entries(v as Obj).map(([k, x]) => [`.${k}`, x]));
}

const show = (v: unknown): string =>
  v === undefined ? '(absent)' : typeof v === 'string' ? v : JSON.stringify(v);

function walk(a: unknown, b: unknown, path: string, out: string[]): void {
  const container = (v: unknown): boolean => isObj(v) || Array.isArray(v);
  if (container(a) && container(b) && Array.isArray(a) === Array.isArray(b)) {
    const ea = entries(a);
    const eb = entries(b);
    for (const k of new Set([...ea.keys(), ...eb.keys()]))
      walk(ea.get(k), eb.get(k), `${path}${k}`, out);
  } else if (JSON.stringify(a) !== JSON.stringify(b)) {
    out.push(`${path.replace(/^\./u, '')}: ${show(a)} -> ${show(b)}`);
  }
}

/**
 * Every leaf that differs between two renders, as `<key> <path>: <before> -> <after>`, list
 * elements named by their name; sorted. An object on one side only is one line.
 */
export function leafDiffs(before: readonly Obj[], after: readonly Obj[]): string[] {
  const a = new Map(before.map((o) => [objectKey(o), o]));
  const b = new Map(after.map((o) => [objectKey(o), o]));
  const out: string[] = [];
  for (const key of new Set([...a.keys(), ...b.keys()])) {
    const lines: string[] = [];
    walk(a.get(key), b.get(key), '', lines);
    out.push(...lines.map((l) => `${key} ${l}`));
  }
  return out.sort();
}
