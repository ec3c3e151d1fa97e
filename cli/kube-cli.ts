import type { Writable } from 'node:stream';

import type { Env } from '../common/config';
import { ExitCode, reportFailure, UsageError, write, type CliIo } from './cli-support';
import type { CommandDoor } from './command-door';
import { versionText } from './build-info';
import { positionalsOf, verbUsage } from './kube-help';
import { translateOutput, yamlWriter } from './kube-output';
import { KUBE_USAGE, KUBE_VERBS } from './kube-verbs';

/*
 * `kubectl polychrome`: the conversation commands by Conversation name, through the
 * kubeconfig and the Kubernetes door (docs/kubectl.md). The verbs are the `polychrome`
 * commands (conversation-commands.ts, conversation-forensics.ts) over the kube door
 * (kube-door.ts), plus `get` (kube-get.ts: the Conversation object), `sessions` and
 * `personas` (kube-sessions.ts, kube-personas.ts: the door's cluster-scoped resources) and
 * `dashboard`. The verbs and the usage are kube-verbs.ts; `-o` is kube-output.ts.
 *
 * A verb's module is imported when that verb runs, so `help`, `VERB --help`, `version` and
 * a usage error load none of them, nor the libraries they use (docs/kubectl.md, "Start
 * time"). The `.ts` specifiers are what esbuild splits the bundle at (hack/build-cli.ts);
 * tsc rewrites them to `.js`.
 */

/** `logs NAME -f`: the stream command; -f is required, as the stream has no end. */
function logsArgs(args: readonly string[]): string[] {
  const end = args.indexOf('--');
  const flags = end === -1 ? args : args.slice(0, end);
  const follow = flags.filter((a) => a === '-f' || a === '--follow').length;
  if (follow === 0) {
    throw new UsageError(
      'logs follows the stream until Ctrl-C: pass -f (for the committed turns, use transcript)',
    );
  }
  return args.filter((a, i) => (end !== -1 && i >= end) || (a !== '-f' && a !== '--follow'));
}

/** `help [VERB]`: the whole usage, or one verb's; flags (`-n NS`) are taken and unused. */
async function help(rest: readonly string[], io: CliIo): Promise<ExitCode> {
  const words = positionalsOf(rest);
  const [verb, ...extra] = words;
  if (extra.length > 0) throw new UsageError(`help takes one verb, got ${words.join(' ')}`);
  const text = verb === undefined ? KUBE_USAGE : verbUsage(verb);
  if (text === undefined) throw new UsageError(`unknown verb ${JSON.stringify(verb)}`);
  await write(io.stdout, text);
  return ExitCode.Ok;
}

/** Whether `args` ask for help (`--help` or `-h` before any `--`). */
function asksHelp(args: readonly string[]): boolean {
  const end = args.indexOf('--');
  return (end === -1 ? args : args.slice(0, end)).some((a) => a === '--help' || a === '-h');
}

/** The Kubernetes door, loaded with the first verb that goes through it. */
async function kubeDoor(): Promise<CommandDoor> {
  return (await import('./kube-door.ts')).kubeDoor;
}

/** The verbs that go through the door: each one's module is imported here, when it runs. */
async function doorVerb(
  verb: string,
  rest: readonly string[],
  env: Env | undefined,
  io: CliIo,
): Promise<ExitCode> {
  switch (verb) {
    case 'logs': {
      const args = logsArgs(rest);
      const { doorCommands } = await import('./conversation-commands.ts');
      return doorCommands.stream(await kubeDoor(), args, env, io);
    }
    case 'send':
    case 'approve':
    case 'answer':
    case 'transcript': {
      const { doorCommands } = await import('./conversation-commands.ts');
      return doorCommands[verb](await kubeDoor(), rest, env, io);
    }
    case 'memory':
      return (await import('./memory-command.ts')).memoryCommand(await kubeDoor(), rest, env, io);
    case 'payments':
      return (await import('./payments-command.ts')).paymentsCommand(
        await kubeDoor(),
        rest,
        env,
        io,
      );
    case 'erase':
      return (await import('./conversation-erase.ts')).eraseCommand(
        await kubeDoor(),
        rest,
        env,
        io,
        'erase',
      );
    default: {
      // The verbs left are the forensic ones; anything else is not a verb.
      const forensics = (KUBE_VERBS as readonly string[]).includes(verb)
        ? await import('./conversation-forensics.ts')
        : undefined;
      if (forensics?.isForensicCommand(verb) === true) {
        return forensics.forensicCommand(await kubeDoor(), verb, rest, env, io);
      }
      throw new UsageError(`unknown verb ${JSON.stringify(verb)}`);
    }
  }
}

async function dispatch(
  verb: string,
  rest: readonly string[],
  env: Env | undefined,
  io: CliIo,
): Promise<ExitCode> {
  switch (verb) {
    case 'help':
    case '--help':
    case '-h':
      return help(rest, io);
    case 'version':
      if (positionalsOf(rest).length > 0) {
        throw new UsageError(`version takes no argument, got ${positionalsOf(rest).join(' ')}`);
      }
      await write(io.stdout, versionText('kubectl-polychrome'));
      return ExitCode.Ok;
    case 'get':
      return (await import('./kube-get.ts')).getConversation(rest, env, io);
    case 'sessions':
      return (await import('./kube-sessions.ts')).sessions(rest, env, io);
    case 'personas':
      return (await import('./kube-personas.ts')).personas(rest, env, io);
    case 'dashboard':
      return (await import('./dashboard.ts')).dashboardCommand(rest, io, env);
    default:
      return doorVerb(verb, rest, env, io);
  }
}

/**
 * Runs one `kubectl polychrome` invocation: never throws, never exits; returns the exit
 * code, having written results to stdout and problems to stderr.
 */
export async function runKubectlPolychrome(
  argv: readonly string[],
  io: CliIo,
  env?: Env,
): Promise<ExitCode> {
  let yamlOut: Writable | undefined;
  try {
    const [verb, ...rest] = argv;
    if (verb === undefined) throw new UsageError('no verb given');
    // `VERB --help`: that verb's usage, whatever else was typed; nothing is reached.
    if (asksHelp(rest)) return await help([verb], io);
    const translated = translateOutput(rest);
    yamlOut = translated.yaml ? await yamlWriter(io.stdout) : undefined;
    const out = yamlOut === undefined ? io : { ...io, stdout: yamlOut };
    return await dispatch(verb, translated.args, env, out);
  } catch (error) {
    return reportFailure(error, io, { program: 'kubectl polychrome', usage: KUBE_USAGE });
  } finally {
    if (yamlOut !== undefined) {
      const done = new Promise<void>((resolve) => yamlOut?.once('finish', () => resolve()));
      yamlOut.end();
      await done;
    }
  }
}
