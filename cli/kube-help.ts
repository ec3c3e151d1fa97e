import {
  KUBE_ACTOR_NOTE,
  KUBE_ACTOR_VERBS,
  KUBE_FLAGS_NOTE,
  KUBE_USAGE,
  KUBE_VERBS,
} from './kube-verbs';

/*
 * `kubectl polychrome help VERB` / `VERB --help`: text only, from kube-verbs.ts's usage
 * (`version` is build-info.ts). Nothing here reaches the cluster, so both answer as fast as
 * the plugin starts.
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
