import type { Env } from '../common/config';
import {
  formatOptions,
  parse,
  parseFormat,
  stringValue,
  UsageError,
  type CliIo,
  type ExitCode,
} from './cli-support';
import type { CommandDoor } from './command-door';
import {
  acceptConversationRollback,
  repairConversation,
  resolveConversationTurn,
} from './conversation-admin-actions';
import { eraseCommand } from './conversation-erase';
import { exportConversation } from './conversation-export';
import { replayConversation } from './conversation-replay';
import { verifyConversation } from './conversation-verify';
import {
  actorOrSelf,
  parseAcceptRollbackFlags,
  parseActorFlag,
  parseResolveFlags,
  RESOLVE_OPTIONS,
} from './forensic-request';
import { LIVE_NEEDS_WHAT_IF, liveSetup } from './journal-live';
import { parseWhatIf } from './journal-what-if';
import { parsePublicKey, parsePublicKeyFlags, publicKeyOption } from './public-key-flags';
import { publicApiDoor } from './public-api-door';

/*
 * The admin's forensic commands on one conversation, through the control plane
 * (docs/replay.md, "Commands"): `conversation replay` (conversation-replay.ts),
 * `conversation verify` (conversation-verify.ts), `export` (conversation-export.ts),
 * `conversation repair`, `resolve` (docs/turns.md, "Resolving a quarantined turn") and
 * `accept-rollback` (conversation-admin-actions.ts). This file reads the command line
 * (forensic-request.ts) and runs one of them. Each core takes an ApiClient, so it runs over
 * any transport (cli/transport.ts: the public API here, the Kubernetes door for `kubectl
 * polychrome`); the export is fetched once and checked with the very code `journal verify`
 * and `journal replay` run on a file.
 */

/** The forensic commands: `replay`, `verify`, `repair`, `export`, `resolve`, `accept-rollback`. */
export const FORENSIC_COMMANDS = [
  'replay',
  'verify',
  'repair',
  'export',
  'resolve',
  'accept-rollback',
] as const;
export type ForensicCommand = (typeof FORENSIC_COMMANDS)[number];

export function isForensicCommand(name: string | undefined): name is ForensicCommand {
  return (FORENSIC_COMMANDS as readonly (string | undefined)[]).includes(name);
}

/**
 * One forensic command over `door`: `polychrome conversation replay|verify|repair ID
 * --actor A` on the public API, `kubectl polychrome replay|verify|repair|export NAME
 * --actor A` on the Kubernetes door. `label` is the command as its messages name it.
 */
export async function forensicCommand(
  door: CommandDoor,
  command: ForensicCommand,
  rest: readonly string[],
  env: Env | undefined,
  io: CliIo,
  label: string = command,
): Promise<ExitCode> {
  const { values, positionals } = parse(rest, {
    ...door.options,
    ...formatOptions,
    actor: { type: 'string' },
    ...(command === 'repair' ? { 'dry-run': { type: 'boolean' } } : {}),
    ...(command === 'replay' || command === 'verify' ? publicKeyOption : {}),
    ...(command === 'replay'
      ? {
          'approval-key': { type: 'string' },
          'what-if': { type: 'string' },
          live: { type: 'boolean' },
        }
      : {}),
    ...(command === 'export' ? { file: { type: 'string' } } : {}),
    ...(command === 'resolve' ? RESOLVE_OPTIONS : {}),
    ...(command === 'accept-rollback'
      ? { head: { type: 'string' }, reason: { type: 'string' } }
      : {}),
  });
  const format = parseFormat(values);
  const [id, ...more] = positionals;
  const conversationId = door.conversation(id, label);
  const [turnId, ...extra] = command === 'resolve' ? more : [undefined, ...more];
  if (command === 'resolve' && turnId === undefined) {
    throw new UsageError(
      `${label} takes a ${door.noun} and a turn id: the quarantined turn (status.turns.quarantined.turnId)`,
    );
  }
  if (extra.length > 0) {
    throw new UsageError(
      `${label} takes ${command === 'resolve' ? `a ${door.noun} and a turn id` : `one ${door.noun}`}, got extra ${extra.join(' ')}`,
    );
  }
  const flags = command === 'resolve' ? parseResolveFlags(values) : undefined;
  const accept = command === 'accept-rollback' ? parseAcceptRollbackFlags(values) : undefined;
  const given = values.actor === undefined ? undefined : parseActorFlag(values.actor);
  const approvalText = stringValue(values['approval-key']);
  // Read before anything is fetched, so a bad key is a usage error (exit 2).
  const publicKeys = parsePublicKeyFlags(values);
  const approvalKey =
    approvalText === undefined ? undefined : parsePublicKey(approvalText, '--approval-key');
  const spec = stringValue(values['what-if']);
  // Read before anything is fetched, so a bad CHANGE is a usage error (exit 2).
  const whatIf = spec === undefined ? undefined : { spec, change: await parseWhatIf(spec) };
  if (values.live === true && whatIf === undefined) throw new UsageError(LIVE_NEEDS_WHAT_IF);
  const live = values.live === true ? await liveSetup(io.signal, env) : undefined;
  const connection = await door.connect(values, env);
  const { client, statusJournalKeys } = connection;
  const actor = await actorOrSelf(given, connection, io.signal);
  const keyOptions = {
    publicKeys,
    ...(statusJournalKeys === undefined ? {} : { statusJournalKeys }),
  };
  const request = {
    conversationId,
    actor,
    format,
    ...(io.signal === undefined ? {} : { signal: io.signal }),
  };
  switch (command) {
    case 'replay':
      return replayConversation(client, request, io, {
        ...keyOptions,
        ...(approvalKey === undefined ? {} : { approvalKey }),
        ...(whatIf === undefined ? {} : { whatIf }),
        ...(live === undefined ? {} : { live }),
      });
    case 'verify':
      return verifyConversation(client, request, io, keyOptions);
    case 'repair':
      return repairConversation(client, { ...request, dryRun: values['dry-run'] === true }, io);
    case 'export': {
      const file = stringValue(values.file);
      return exportConversation(
        client,
        { ...request, ...(file === undefined ? {} : { file }) },
        io,
      );
    }
    case 'resolve':
      if (flags === undefined || turnId === undefined) throw new Error('unreachable: parsed');
      return resolveConversationTurn(client, { ...request, turnId, flags }, io);
    case 'accept-rollback':
      if (accept === undefined) throw new Error('unreachable: parsed');
      return acceptConversationRollback(client, { ...request, ...accept }, io);
  }
}

/**
 * `polychrome conversation replay|verify|repair|resolve|accept-rollback ID ... --actor A`
 * over the public API.
 */
export async function conversationGroup(
  args: readonly string[],
  env: Env | undefined,
  io: CliIo,
): Promise<ExitCode> {
  const [command, ...rest] = args;
  if (command === 'erase') {
    return eraseCommand(publicApiDoor, rest, env, io, 'conversation erase');
  }
  if (command === 'export' || !isForensicCommand(command)) {
    throw new UsageError(
      `unknown command "conversation ${command ?? ''}": conversation takes replay, verify, repair, erase, resolve or accept-rollback`,
    );
  }
  return forensicCommand(publicApiDoor, command, rest, env, io, `conversation ${command}`);
}
