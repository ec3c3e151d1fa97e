import type { Writable } from 'node:stream';

import type { Env } from '../common/config';
import { ExitCode, reportFailure, UsageError, write, type CliIo } from './cli-support';
import { doorCommands } from './conversation-commands';
import { eraseCommand } from './conversation-erase';
import { forensicCommand, isForensicCommand } from './conversation-forensics';
import { dashboardCommand } from './dashboard';
import { kubeDoor } from './kube-door';
import { positionalsOf, verbUsage, versionText } from './kube-help';
import { getConversation } from './kube-get';
import { translateOutput, yamlWriter } from './kube-output';
import { personas } from './kube-personas';
import { memoryCommand } from './memory-command';
import { sessions } from './kube-sessions';
import { KUBE_USAGE } from './kube-verbs';

/*
 * `kubectl polychrome`: the conversation commands by Conversation name, through the
 * kubeconfig and the Kubernetes door (docs/kubectl.md). The verbs are the `polychrome`
 * commands (conversation-commands.ts, conversation-forensics.ts) over the kube door
 * (kube-door.ts), plus `get` (kube-get.ts: the Conversation object), `sessions` and
 * `personas` (kube-sessions.ts, kube-personas.ts: the door's cluster-scoped resources) and
 * `dashboard`. The verbs and the usage are kube-verbs.ts; `-o` is kube-output.ts.
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
      await write(io.stdout, versionText());
      return ExitCode.Ok;
    case 'get':
      return getConversation(rest, env, io);
    case 'sessions':
      return sessions(rest, env, io);
    case 'personas':
      return personas(rest, env, io);
    case 'dashboard':
      return dashboardCommand(rest, io, env);
    case 'logs':
      return doorCommands.stream(kubeDoor, logsArgs(rest), env, io);
    case 'erase':
      return eraseCommand(kubeDoor, rest, env, io, 'erase');
    case 'send':
    case 'approve':
    case 'answer':
    case 'transcript':
      return doorCommands[verb](kubeDoor, rest, env, io);
    case 'memory':
      return memoryCommand(kubeDoor, rest, env, io);
    default:
      if (isForensicCommand(verb)) return forensicCommand(kubeDoor, verb, rest, env, io);
      throw new UsageError(`unknown verb ${JSON.stringify(verb)}`);
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
