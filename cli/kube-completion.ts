import type { Env } from '../common/config';
import { stringValue, write, type CliIo } from './cli-support';
import { KUBE_VERBS } from './kube-verbs';
import { loadKubeConnection } from './kube-connection';
import { CONVERSATION_GROUP_VERSION } from './kube-transport';
import { joinUrl } from './transport';

/*
 * `kubectl_complete-polychrome`: kubectl (1.26 and later) runs it for `kubectl polychrome
 * <TAB>` with the words typed after `polychrome`, the last one the word being completed,
 * and reads one candidate a line and a last line `:DIRECTIVE` (cobra's protocol). It
 * completes verbs, and Conversation names in the namespace through the kubeconfig.
 */

/** cobra's ShellCompDirectiveNoFileComp: no file names after the candidates. */
const NO_FILE_COMPLETION = 4;

/** The verbs whose first argument is a Conversation name. */
const TAKES_NAME: ReadonlySet<string> = new Set(
  KUBE_VERBS.filter((v) => !['sessions', 'personas', 'version', 'help'].includes(v)),
);

/** The kube flags among the words typed, as `loadKubeConnection` takes them. */
function kubeFlags(words: readonly string[]): Record<string, string> {
  const flags: Record<string, string> = {};
  for (let i = 0; i < words.length; i++) {
    const word = words[i] ?? '';
    const eq = /^--(kubeconfig|context|namespace)=(.*)$/u.exec(word);
    if (eq !== null) flags[eq[1] ?? ''] = eq[2] ?? '';
    else if (
      word === '--kubeconfig' ||
      word === '--context' ||
      word === '--namespace' ||
      word === '-n'
    ) {
      const value = words[i + 1];
      if (value !== undefined) flags[word === '-n' ? 'namespace' : word.slice(2)] = value;
      i += 1;
    }
  }
  return flags;
}

/** The positionals among the words typed (flags and their values left out). */
function positionals(words: readonly string[]): string[] {
  const out: string[] = [];
  for (let i = 0; i < words.length; i++) {
    const word = words[i] ?? '';
    if (['--kubeconfig', '--context', '--namespace', '-n', '-o', '--output'].includes(word)) i += 1;
    else if (!word.startsWith('-')) out.push(word);
  }
  return out;
}

/** The Conversation names in the namespace the flags select; none when the cluster says no. */
async function conversationNames(
  flags: Record<string, string>,
  env: Env | undefined,
): Promise<string[]> {
  try {
    const connection = await loadKubeConnection({
      ...(flags.kubeconfig === undefined ? {} : { kubeconfig: flags.kubeconfig }),
      ...(flags.context === undefined ? {} : { context: flags.context }),
      ...(flags.namespace === undefined ? {} : { namespace: flags.namespace }),
      env: env ?? process.env,
    });
    const url = joinUrl(`${connection.server}/apis/${CONVERSATION_GROUP_VERSION}`, [
      'namespaces',
      connection.namespace,
      'conversations',
    ]);
    const response = await connection.fetch(url, {
      headers: { accept: 'application/json' },
      signal: AbortSignal.timeout(10_000),
    });
    if (!response.ok) return [];
    const list = (await response.json()) as { items?: { metadata?: { name?: unknown } }[] };
    return (list.items ?? [])
      .map((item) => stringValue(item.metadata?.name))
      .filter((n): n is string => n !== undefined);
  } catch {
    return [];
  }
}

/** The candidates for `args` (the words after `polychrome`, the last one being completed). */
export async function completions(args: readonly string[], env?: Env): Promise<string[]> {
  const typed = args.slice(0, -1);
  const current = args.at(-1) ?? '';
  const before = positionals(typed);
  if (current.startsWith('-')) return [];
  if (before.length === 0) return KUBE_VERBS.filter((v) => v.startsWith(current));
  const [verb] = before;
  if (before.length === 1 && verb !== undefined && TAKES_NAME.has(verb)) {
    return (await conversationNames(kubeFlags(typed), env)).filter((n) => n.startsWith(current));
  }
  if (before.length === 1 && verb === 'sessions') {
    return ['create', 'revoke'].filter((v) => v.startsWith(current));
  }
  if (before.length === 1 && verb === 'personas') {
    return ['set-roles', 'payment-policy'].filter((v) => v.startsWith(current));
  }
  if (before.length === 2 && verb === 'personas' && before[1] === 'payment-policy') {
    return ['set', 'clear', 'get'].filter((v) => v.startsWith(current));
  }
  return [];
}

/** Prints the candidates and the directive, as kubectl expects. */
export async function runCompletion(
  args: readonly string[],
  io: CliIo,
  env?: Env,
): Promise<number> {
  const found = await completions(args, env);
  await write(io.stdout, `${[...found, `:${String(NO_FILE_COMPLETION)}`].join('\n')}\n`);
  return 0;
}
