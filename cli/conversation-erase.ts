import type { Env } from '../common/config';
import {
  ExitCode,
  Format,
  formatOptions,
  parse,
  parseFormat,
  stringValue,
  UsageError,
  write,
  type CliIo,
} from './cli-support';
import type { CommandDoor } from './command-door';
import { actorOrSelf, parseActorFlag } from './forensic-request';

/*
 * `polychrome conversation erase ID POSITION... --actor A --reason R [--dry-run]`: an admin
 * has the content of journal entries erased, through the control plane (docs/replay.md,
 * "Erasure"; docs/state-plane.md, "Erasure"). Each entry is excised, keeping its leaf
 * digest, and recorded by a signed record naming the actor and the reason.
 */

/** The positions given on the command line. @throws UsageError */
function parsePositions(values: readonly string[], label: string): number[] {
  if (values.length === 0) {
    throw new UsageError(
      `${label} takes the journal positions to erase after the conversation (see the export)`,
    );
  }
  return values.map((text) => {
    if (!/^\d{1,15}$/u.test(text)) {
      throw new UsageError(`${label}: ${JSON.stringify(text)} is not a journal position`);
    }
    return Number(text);
  });
}

/** Runs `erase` over `door`. */
export async function eraseCommand(
  door: CommandDoor,
  rest: readonly string[],
  env: Env | undefined,
  io: CliIo,
  label: string,
): Promise<ExitCode> {
  const { values, positionals } = parse(rest, {
    ...door.options,
    ...formatOptions,
    actor: { type: 'string' },
    reason: { type: 'string' },
    'dry-run': { type: 'boolean' },
  });
  const format = parseFormat(values);
  const [id, ...given] = positionals;
  const conversationId = door.conversation(id, label);
  const positions = parsePositions(given, label);
  const actorGiven = values.actor === undefined ? undefined : parseActorFlag(values.actor);
  const reason = stringValue(values.reason);
  if (reason === undefined || reason.trim() === '') {
    throw new UsageError(`${label} needs --reason R: why the entries are erased (it is recorded)`);
  }
  const connection = await door.connect(values, env);
  const { client } = connection;
  const actor = await actorOrSelf(actorGiven, connection, io.signal);
  const request = { actor, positions, reason, dryRun: values['dry-run'] === true };
  const answer = await client.erase(conversationId, request, io.signal);
  if (format === Format.Json) {
    await write(io.stdout, `${JSON.stringify(answer.raw)}\n`);
    return ExitCode.Ok;
  }
  const { value } = answer;
  const lines = value.erased.map(
    (e) =>
      `  position ${String(e.position)}: ${e.kind}${e.turnId === '' ? '' : ` of turn ${e.turnId}`}` +
      ` (leaf ${e.leafDigestHex})${value.dryRun ? '' : ', erased'}`,
  );
  await write(
    io.stdout,
    `conversation ${value.conversationId}: ${value.dryRun ? 'dry run, nothing written' : 'erased'} ` +
      `as ${value.actor}, head ${String(value.head)}\n${lines.join('\n')}\n  ${value.message}\n`,
  );
  return ExitCode.Ok;
}
