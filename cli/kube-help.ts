import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  KUBE_ACTOR_NOTE,
  KUBE_ACTOR_VERBS,
  KUBE_FLAGS_NOTE,
  KUBE_USAGE,
  KUBE_VERBS,
} from './kube-verbs';

/*
 * `kubectl polychrome help VERB` / `VERB --help` and `kubectl polychrome version`: text
 * only, from kube-verbs.ts's usage and the files beside the code. Nothing here reaches the
 * cluster or loads more than node:fs, so both answer as fast as the plugin starts.
 */

/** The usage lines of `verb` in the usage: each of its entries, with their continuation lines. */
function entriesOf(verb: string): string[] {
  const lines = KUBE_USAGE.split('\n');
  const out: string[] = [];
  let inEntry = false;
  for (const line of lines) {
    if (/^ {2}\S/u.test(line)) inEntry = line.startsWith(`  ${verb} `) || line === `  ${verb}`;
    else if (!/^ {3,}\S/u.test(line)) inEntry = false;
    if (inEntry) out.push(line);
  }
  return out;
}

/**
 * One verb's help: its entries of the usage, what --actor is when it takes one, and the
 * flags and exit codes every verb shares. `undefined` for a word that is not a verb.
 */
export function verbUsage(verb: string): string | undefined {
  if (!(KUBE_VERBS as readonly string[]).includes(verb)) return undefined;
  if (verb === 'help') return KUBE_USAGE;
  const parts = [`usage: kubectl polychrome ${verb} ...\n\n${entriesOf(verb).join('\n')}`];
  if (KUBE_ACTOR_VERBS.has(verb)) parts.push(KUBE_ACTOR_NOTE);
  parts.push(KUBE_FLAGS_NOTE);
  return `${parts.join('\n\n')}\n`;
}

/** The flags of every verb that take a value: the kube flags and -o. */
const VALUE_FLAGS: ReadonlySet<string> = new Set([
  '--kubeconfig',
  '--context',
  '-n',
  '--namespace',
  '-o',
  '--output',
]);

/**
 * The words of `args` that are not flags, for `help` and `version`, which take the kube
 * flags every verb takes (`help -n team` is the usage) and use none of them.
 */
export function positionalsOf(args: readonly string[]): string[] {
  const out: string[] = [];
  for (let i = 0; i < args.length; i++) {
    const arg = args[i] ?? '';
    if (arg === '--') return [...out, ...args.slice(i + 1)];
    if (VALUE_FLAGS.has(arg)) i += 1;
    else if (!arg.startsWith('-')) out.push(arg);
  }
  return out;
}

/** What a build records beside the code it compiled (`make build` writes it). */
interface BuildInfo {
  readonly version?: string;
  readonly commit?: string;
}

/*
 * What the bundle was built from: hack/build-cli.ts defines POLYCHROME_BUILD_INFO as the
 * package's version and the commit, as the bundle travels without package.json (the krew
 * archive). Run from the sources or tsc's dist/, it is not defined.
 */
declare const POLYCHROME_BUILD_INFO: BuildInfo | undefined;

/** The first of `paths` that reads as JSON, else undefined. */
function readJson(paths: readonly string[]): Record<string, unknown> | undefined {
  for (const path of paths) {
    try {
      const value: unknown = JSON.parse(readFileSync(path, 'utf8'));
      if (typeof value === 'object' && value !== null) return value as Record<string, unknown>;
    } catch {
      // not there (a source checkout has no build info): the next place, or none
    }
  }
  return undefined;
}

/** package.json's version and build-info.json's commit, found from `dir`. */
function buildInfoBeside(dir: string): BuildInfo {
  const pkg = readJson([join(dir, '..', 'package.json'), join(dir, '..', '..', 'package.json')]);
  const info = readJson([join(dir, '..', 'build-info.json')]);
  return {
    ...(typeof pkg?.['version'] === 'string' ? { version: pkg['version'] } : {}),
    ...(typeof info?.['commit'] === 'string' ? { commit: info['commit'] } : {}),
  };
}

/**
 * `kubectl polychrome version`: package.json's version, and the git commit the build
 * recorded in build-info.json (dist/, beside the compiled cli/), when it was built from a
 * checkout; the bundle carries both (hack/build-cli.ts). `dir` is where this module is:
 * cli/ in a checkout, dist/cli/ when compiled.
 */
export function versionText(dir?: string): string {
  const info =
    dir === undefined && typeof POLYCHROME_BUILD_INFO !== 'undefined'
      ? POLYCHROME_BUILD_INFO
      : buildInfoBeside(dir ?? __dirname);
  const version = info?.version ?? 'unknown';
  const commit =
    typeof info?.commit === 'string' && /^[0-9a-f]{7,64}$/u.test(info.commit)
      ? `commit ${info.commit}`
      : 'commit unknown: not built with `make build` from a git checkout';
  return `kubectl-polychrome ${version} (${commit})\n`;
}
