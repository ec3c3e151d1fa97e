import { readFile } from 'node:fs/promises';

import { AppError } from '../common/errors';
import type { ApiClient } from './api-client';
import { ExitCode, Format, write, type CliIo } from './cli-support';
import type { ForensicRequest, ResolveFlags } from './forensic-request';

/*
 * The admin's recorded actions on a conversation's journal, through the control plane:
 * `repair` (excise unreadable entries), `resolve` (settle a quarantined turn; docs/turns.md)
 * and `accept-rollback` (go on from a rolled-back journal). Each is recorded with the actor.
 */

/** `conversation repair`: the state plane excises unreadable entries, recorded with the actor. */
export async function repairConversation(
  client: ApiClient,
  request: ForensicRequest & { readonly dryRun: boolean },
  io: CliIo,
): Promise<ExitCode> {
  const answer = await client.repair(
    request.conversationId,
    { actor: request.actor, dryRun: request.dryRun },
    request.signal,
  );
  if (request.format === Format.Json) {
    await write(io.stdout, `${JSON.stringify(answer.raw)}\n`);
    return ExitCode.Ok;
  }
  const { value } = answer;
  const lines = value.excised.map(
    (e) =>
      `  position ${String(e.position)}: ${e.problem} (leaf ${e.leafDigestHex})${value.dryRun ? '' : ', excised'}`,
  );
  await write(
    io.stdout,
    `conversation ${value.conversationId}: ${value.dryRun ? 'dry run, nothing written' : 'repaired'} ` +
      `as ${value.actor}: ${String(value.excised.length)} unreadable entr${value.excised.length === 1 ? 'y' : 'ies'}, head ${String(value.head)}\n` +
      (lines.length === 0 ? '' : `${lines.join('\n')}\n`) +
      `  ${value.message}\n`,
  );
  return ExitCode.Ok;
}

/** `conversation resolve`: an admin settles a quarantined turn, recorded with the actor. */
export async function resolveConversationTurn(
  client: ApiClient,
  request: ForensicRequest & { readonly turnId: string; readonly flags: ResolveFlags },
  io: CliIo,
): Promise<ExitCode> {
  const { flags } = request;
  const file = flags.decision === 'ran' ? flags.resultFile : undefined;
  let result: string | undefined;
  if (file !== undefined) {
    try {
      result = await readFile(file, 'utf8');
    } catch (error) {
      throw new AppError(
        'invalid_argument',
        `--result ${file}: cannot read it (${error instanceof Error ? error.message : String(error)}); give the file holding the tool's result text`,
      );
    }
  }
  const answer = await client.resolveTurn(
    request.conversationId,
    request.turnId,
    {
      actor: request.actor,
      decision: flags.decision,
      ...resolveOutcome(flags, result),
    },
    request.signal,
  );
  if (request.format === Format.Json) {
    await write(
      io.stdout,
      `${JSON.stringify(answer.raw)}
`,
    );
    return ExitCode.Ok;
  }
  const { value } = answer;
  const decision =
    value.decision === 'did_not_run'
      ? 'did not run'
      : flags.decision === 'ran' && flags.transaction !== undefined
        ? `ran, paid in transaction ${flags.transaction}`
        : `ran${value.resultUnknown ? ', result unknown' : ', with its result'}`;
  await write(
    io.stdout,
    `conversation ${value.conversationId}: turn ${value.turnId} resolved (${decision}) as ${value.actor} ` +
      `at position ${String(value.position)}, head ${String(value.head)}\n  ${value.message}\n`,
  );
  return ExitCode.Ok;
}

/** What `ran` says of the call: its result, its payment's transaction, or that it is unknown. */
function resolveOutcome(
  flags: ResolveFlags,
  result: string | undefined,
): { result?: string; resultUnknown?: boolean; transaction?: string } {
  if (flags.decision === 'did_not_run') return {};
  if (flags.transaction !== undefined) return { transaction: flags.transaction };
  return result === undefined ? { resultUnknown: true } : { result };
}

/**
 * `conversation accept-rollback`: an admin accepts that the state plane lost entries the
 * status had recorded, at the head they name, recorded with the actor and the reason.
 */
export async function acceptConversationRollback(
  client: ApiClient,
  request: ForensicRequest & { readonly head: number; readonly reason: string },
  io: CliIo,
): Promise<ExitCode> {
  const answer = await client.acceptRollback(
    request.conversationId,
    { actor: request.actor, head: request.head, reason: request.reason },
    request.signal,
  );
  if (request.format === Format.Json) {
    await write(io.stdout, `${JSON.stringify(answer.raw)}\n`);
    return ExitCode.Ok;
  }
  const { value } = answer;
  await write(
    io.stdout,
    `conversation ${value.conversationId}: rollback from head ${String(value.checkpointHead)} accepted as ${value.actor} ` +
      `at position ${String(value.position)}, head ${String(value.head)}\n  ${value.message}\n`,
  );
  return ExitCode.Ok;
}
