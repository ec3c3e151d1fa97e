import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import type { Env } from '../common/config';
import { AppError } from '../common/errors';
import { parseIdentity } from '../common/identity';
import type { ApiClient } from './api-client';
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
import { apiOptions, connectApi, conversationIdOf } from './conversation-commands';
import { parseCheckpoint } from './export-file';
import { formatReplayJson, formatReplayText, replayExportFile } from './journal-replay';
import { verifyExportFile, type OfflineVerification } from './journal-verify';

/*
 * The admin's forensic commands on one conversation, through the control plane
 * (docs/replay.md, "Commands"): `conversation replay`, `conversation verify`,
 * `conversation repair` and `conversation resolve` (docs/turns.md, "Resolving a quarantined
 * turn"). Each core takes an {@link ApiClient}, so it runs over any
 * transport (cli/transport.ts: the public API here, the Kubernetes door for `kubectl
 * polychrome`); the export is fetched once and checked with the very code `journal verify`
 * and `journal replay` run on a file.
 */

/** The form `--actor` takes, for usage errors. */
export const ACTOR_FORMAT = 'provider:scope:external_id or provider:external_id';

/**
 * `--actor`: one of the caller's own identities, in the canonical form.
 * @throws UsageError when absent or not an identity, showing the format.
 */
export function parseActorFlag(value: unknown): string {
  const text = stringValue(value);
  if (text === undefined) {
    throw new UsageError(
      `--actor is required: the admin identity you act as (${ACTOR_FORMAT}, one of your own)`,
    );
  }
  try {
    parseIdentity(text);
  } catch (error) {
    throw new UsageError(
      `--actor ${JSON.stringify(text.slice(0, 80))} is not an identity: expected ${ACTOR_FORMAT} ` +
        `(${error instanceof AppError ? error.message : String(error)})`,
    );
  }
  return text;
}

/** What a conversation core needs besides its client. */
export interface ForensicRequest {
  readonly conversationId: string;
  readonly actor: string;
  readonly format: Format;
  readonly signal?: AbortSignal;
}

/** The conversation's export in a private temporary file, removed after `use`. */
async function withExport<T>(
  client: ApiClient,
  request: ForensicRequest,
  use: (file: string, checkpoint: string | undefined) => Promise<T>,
): Promise<T> {
  const exported = await client.exportJournal(
    request.conversationId,
    request.actor,
    request.signal,
  );
  const dir = await mkdtemp(join(tmpdir(), 'polychrome-export-'));
  try {
    const file = join(dir, 'journal.ndjson');
    await writeFile(file, exported.text, { mode: 0o600 });
    return await use(file, exported.checkpoint);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/**
 * `conversation replay`: the export through the control plane, replayed as `journal replay`
 * replays a file (verified first; the harness's turn machine; no model, no tool).
 */
export async function replayConversation(
  client: ApiClient,
  request: ForensicRequest,
  io: CliIo,
  options: { readonly approvalKey?: Uint8Array } = {},
): Promise<ExitCode> {
  const source = `conversation ${request.conversationId}`;
  return withExport(client, request, async (file) => {
    let report;
    try {
      report = await replayExportFile(file, [], options.approvalKey);
    } catch (error) {
      throw error instanceof AppError
        ? new AppError(error.code, error.message.split(file).join(source), { cause: error })
        : error;
    }
    const named = { ...report, source };
    await write(
      io.stdout,
      request.format === Format.Json ? formatReplayJson(named) : formatReplayText(named),
    );
    return report.replay.ok ? ExitCode.Ok : ExitCode.VerifyFailed;
  });
}

/** What `conversation verify` found. */
export interface ConversationVerification extends OfflineVerification {
  /** The checkpoint the control plane keeps outside the journal, as it sent it. */
  readonly statusCheckpoint: string | null;
}

/**
 * `conversation verify`: the export verified as `journal verify` verifies a file, against
 * the Conversation's `status.journal`, the checkpoint kept outside the journal: a journal
 * cut short or rolled back fails (`rolled_back`). A journal with events and no checkpoint
 * fails too (`no_checkpoint`): truncation could not be ruled out.
 */
export async function verifyConversation(
  client: ApiClient,
  request: ForensicRequest,
  io: CliIo,
): Promise<ExitCode> {
  const source = `conversation ${request.conversationId}`;
  return withExport(client, request, async (file, header) => {
    const checkpoint = header === undefined ? undefined : parseCheckpoint(header);
    if (typeof checkpoint === 'string') {
      throw new AppError(
        'internal',
        `${client.transport.description} sent a checkpoint that does not read (${JSON.stringify(header?.slice(0, 120))}): ${checkpoint}; is the CLI older than the control plane?`,
      );
    }
    const verified = await verifyExportFile(file, [], checkpoint);
    const failure =
      verified.failure ??
      (checkpoint === undefined && verified.events > 0
        ? {
            position: 0,
            reason: 'no_checkpoint',
            expected: 'the Conversation status.journal (head and last signed root)',
            found: 'none',
            message:
              'the Conversation status names no journal checkpoint, so a journal cut short would pass; retry once the status shows status.journal',
          }
        : undefined);
    const result: ConversationVerification = {
      ...verified,
      source,
      ok: failure === undefined,
      failure,
      statusCheckpoint: header ?? null,
    };
    const ok = result.ok && result.unsealed === 0;
    if (request.format === Format.Json) {
      await write(io.stdout, `${JSON.stringify({ ...result, ok, failure: failure ?? null })}\n`);
    } else if (failure !== undefined) {
      await write(
        io.stdout,
        `${source} (${result.partition}): FAILED at position ${String(failure.position)} (${failure.reason})\n` +
          `  ${failure.message}\n` +
          (failure.expected === '' ? '' : `  expected: ${failure.expected}\n`) +
          (failure.found === '' ? '' : `  found:    ${failure.found}\n`),
      );
    } else if (!ok) {
      await write(
        io.stdout,
        `${source} (${result.partition}): FAILED: ${String(result.unsealed)} events after the last signed root are not covered by any root\n`,
      );
    } else {
      await write(
        io.stdout,
        `${source} (${result.partition}): OK: ${String(result.events)} events, ${String(result.signedRoots)} signed roots verified ` +
          `against the state plane's key(s) ${result.trustedKeyIds.join(', ')}\n` +
          (result.excised.length === 0
            ? ''
            : `  excised by repair (checked by their kept leaf digests): ${result.excised.join(', ')}\n`) +
          `  checkpoint: checked against the Conversation status (head ${String(checkpoint?.head ?? 0)})\n`,
      );
    }
    return ok ? ExitCode.Ok : ExitCode.VerifyFailed;
  });
}

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

/** How an admin settles a quarantined turn, as `conversation resolve` reads it. */
export type ResolveFlags =
  | { readonly decision: 'did_not_run' }
  | { readonly decision: 'ran'; readonly resultFile: string | undefined };

/**
 * `--ran [--result FILE]` or `--did-not-run`: exactly one; `--result` goes with `--ran`
 * only (without it the result is unknown).
 * @throws UsageError naming the mistake.
 */
export function parseResolveFlags(values: Readonly<Record<string, unknown>>): ResolveFlags {
  const ran = values.ran === true;
  const didNotRun = values['did-not-run'] === true;
  const resultFile = stringValue(values.result);
  if (ran === didNotRun) {
    throw new UsageError(
      `conversation resolve takes exactly one of --ran (the call ran; --result FILE gives its result) and --did-not-run (it did not; the turn runs it again)${ran ? ', not both' : ''}`,
    );
  }
  if (didNotRun) {
    if (resultFile !== undefined) {
      throw new UsageError(
        '--result goes with --ran only: a call that did not run has no result; leave out --result',
      );
    }
    return { decision: 'did_not_run' };
  }
  return { decision: 'ran', resultFile };
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
      ...(flags.decision === 'ran' && result === undefined ? { resultUnknown: true } : {}),
      ...(result === undefined ? {} : { result }),
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
      : `ran${value.resultUnknown ? ', result unknown' : ', with its result'}`;
  await write(
    io.stdout,
    `conversation ${value.conversationId}: turn ${value.turnId} resolved (${decision}) as ${value.actor} ` +
      `at position ${String(value.position)}, head ${String(value.head)}\n  ${value.message}\n`,
  );
  return ExitCode.Ok;
}

function parsePublicKeyFlag(text: string): Uint8Array {
  const trimmed = text.trim();
  if (/^[0-9a-fA-F]{64}$/u.test(trimmed)) return new Uint8Array(Buffer.from(trimmed, 'hex'));
  const bytes = Buffer.from(trimmed, 'base64');
  if (bytes.length === 32 && bytes.toString('base64') === trimmed) return new Uint8Array(bytes);
  throw new UsageError(
    `--approval-key ${JSON.stringify(trimmed.slice(0, 80))} is not a raw ed25519 public key: ` +
      'give 64 hex digits or the base64 of 32 bytes',
  );
}

const RESOLVE_OPTIONS = {
  ran: { type: 'boolean' },
  'did-not-run': { type: 'boolean' },
  result: { type: 'string' },
} as const;

/** `polychrome conversation replay|verify|repair|resolve ID ... --actor A` over the public API. */
export async function conversationGroup(
  args: readonly string[],
  env: Env | undefined,
  io: CliIo,
): Promise<ExitCode> {
  const [command, ...rest] = args;
  if (
    command !== 'replay' &&
    command !== 'verify' &&
    command !== 'repair' &&
    command !== 'resolve'
  ) {
    throw new UsageError(
      `unknown command "conversation ${command ?? ''}": conversation takes replay, verify, repair or resolve`,
    );
  }
  const { values, positionals } = parse(rest, {
    ...apiOptions,
    ...formatOptions,
    actor: { type: 'string' },
    ...(command === 'repair' ? { 'dry-run': { type: 'boolean' } } : {}),
    ...(command === 'replay' ? { 'approval-key': { type: 'string' } } : {}),
    ...(command === 'resolve' ? RESOLVE_OPTIONS : {}),
  });
  const format = parseFormat(values);
  const [id, ...more] = positionals;
  const conversationId = conversationIdOf(id, `conversation ${command}`);
  const [turnId, ...extra] = command === 'resolve' ? more : [undefined, ...more];
  if (command === 'resolve' && turnId === undefined) {
    throw new UsageError(
      'conversation resolve takes ID TURN: the quarantined turn (status.turns.quarantined.turnId)',
    );
  }
  if (extra.length > 0) {
    throw new UsageError(
      `conversation ${command} takes ${command === 'resolve' ? 'a conversation id and a turn id' : 'one conversation id'}, got extra ${extra.join(' ')}`,
    );
  }
  const flags = command === 'resolve' ? parseResolveFlags(values) : undefined;
  const actor = parseActorFlag(values.actor);
  const approvalText = stringValue(values['approval-key']);
  const { client } = connectApi(values, env);
  const request = {
    conversationId,
    actor,
    format,
    ...(io.signal === undefined ? {} : { signal: io.signal }),
  };
  switch (command) {
    case 'replay':
      return replayConversation(
        client,
        request,
        io,
        approvalText === undefined ? {} : { approvalKey: parsePublicKeyFlag(approvalText) },
      );
    case 'verify':
      return verifyConversation(client, request, io);
    case 'repair':
      return repairConversation(client, { ...request, dryRun: values['dry-run'] === true }, io);
    case 'resolve':
      if (flags === undefined || turnId === undefined) throw new Error('unreachable: parsed');
      return resolveConversationTurn(client, { ...request, turnId, flags }, io);
  }
}
