import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import type { Env } from '../common/config';
import { AppError } from '../common/errors';
import { parseIdentity } from '../common/identity';
import type { ApiClient } from './api-client';
import { ApiCallError } from './api-errors';
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
import type { ApiConnection, CommandDoor } from './command-door';
import { publicApiDoor } from './public-api-door';
import { parseCheckpoint } from '../common/journal-export-parse';
import { LIVE_NEEDS_WHAT_IF, liveSetup, type LiveSetup } from './journal-live';
import { formatReplayJson, formatReplayText, replayExportFile } from './journal-replay';
import {
  formatWhatIfJson,
  formatWhatIfText,
  parseWhatIf,
  whatIfParsed,
  type ParsedWhatIf,
} from './journal-what-if';
import { missingCheckpoint } from '../state/journal/export-verify';
import { verifyExportFile, type OfflineVerification } from './journal-verify';
import {
  journalKeyLine,
  NO_PINNED_KEY_HELP,
  noPinnedKey,
  pinJournalKeys,
  StatusKeysFrom,
  type JournalKeyPin,
  type JournalKeySource,
  type StatusKeys,
} from './journal-key-pin';
import { parsePublicKey, parsePublicKeyFlags, publicKeyOption } from './public-key-flags';

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

/** What the control plane sent beside the export: its answer headers, as they came. */
interface ExportSidecar {
  readonly checkpoint: string | undefined;
  readonly publicKeys: string | undefined;
}

/** The conversation's export in a private temporary file, removed after `use`. */
async function withExport<T>(
  client: ApiClient,
  request: ForensicRequest,
  use: (file: string, sidecar: ExportSidecar) => Promise<T>,
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
    return await use(file, { checkpoint: exported.checkpoint, publicKeys: exported.publicKeys });
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/** The journal-key options of `conversation verify` and `replay`. */
interface KeyOptions {
  /** `--public-key`: the journal keys to trust, instead of those the status recorded. */
  readonly publicKeys?: readonly Uint8Array[];
  /** Reads the status's keys from the Conversation object (ApiConnection.statusJournalKeys). */
  readonly statusJournalKeys?: ApiConnection['statusJournalKeys'];
}

/**
 * The status's keys read from the Conversation object, before the export is fetched (so
 * the export holds at least the batches they signed). Undefined, so the keys the control
 * plane sends with the export are used, when keys were pinned with `--public-key`, the
 * door cannot read the object (the public API; a caller without `get conversations`), or
 * the object records none: both are the same status, the object read directly.
 */
async function statusKeysOfObject(
  request: ForensicRequest,
  options: KeyOptions,
): Promise<StatusKeys | undefined> {
  const read = options.statusJournalKeys;
  if (read === undefined || (options.publicKeys ?? []).length > 0) return undefined;
  let keys: string[];
  try {
    keys = await read(request.conversationId, request.signal);
  } catch (error) {
    if (error instanceof ApiCallError) return undefined;
    throw error;
  }
  return keys.length === 0 ? undefined : { keys: keys.join(','), from: StatusKeysFrom.Object };
}

/** What `conversation replay` takes besides the request. */
export interface ReplayOptions extends KeyOptions {
  /** Pinned: wins over the export header's key (a mismatch is reported). */
  readonly approvalKey?: Uint8Array;
  /** `--what-if CHANGE`: report where the recorded run departs under the change. */
  readonly whatIf?: ParsedWhatIf;
  /** `--live` (with a what-if): the scratch run from the departure. */
  readonly live?: LiveSetup;
}

/**
 * `conversation replay`: the export through the control plane, replayed as `journal replay`
 * replays a file (verified first; the harness's turn machine; no model, no tool), or, with
 * a what-if, changed and replayed as `journal replay FILE --what-if` does. The export's
 * header carries the control plane's approval key, used unless one is pinned.
 */
export async function replayConversation(
  client: ApiClient,
  request: ForensicRequest,
  io: CliIo,
  options: ReplayOptions = {},
): Promise<ExitCode> {
  const source = `conversation ${request.conversationId}`;
  const json = request.format === Format.Json;
  const fromObject = await statusKeysOfObject(request, options);
  return withExport(client, request, async (file, sidecar) => {
    const pin = pinJournalKeys(
      options.publicKeys ?? [],
      fromObject ?? { keys: sidecar.publicKeys, from: StatusKeysFrom.ExportAnswer },
      client.transport.description,
    );
    if (pin === undefined) {
      throw new AppError(
        'failed_precondition',
        `${source}: replay is refused: ${NO_PINNED_KEY_HELP}`,
      );
    }
    const named = <T>(run: () => Promise<T>): Promise<T> =>
      run().catch((error: unknown) => {
        throw error instanceof AppError
          ? new AppError(error.code, error.message.split(file).join(source), { cause: error })
          : error;
      });
    if (options.whatIf !== undefined) {
      const { whatIf } = options;
      const run = await named(() =>
        whatIfParsed(file, whatIf, pin.keys, options.approvalKey, options.live),
      );
      const shown = { ...run, source };
      await write(
        io.stdout,
        json
          ? formatWhatIfJson(shown, { journalKey: journalKeyJson(pin) })
          : `${journalKeyLine(pin)}\n${formatWhatIfText(shown)}`,
      );
      return run.report.divergence === undefined ? ExitCode.Ok : ExitCode.VerifyFailed;
    }
    const report = await named(() => replayExportFile(file, pin.keys, options.approvalKey));
    const shown = { ...report, source };
    await write(
      io.stdout,
      json
        ? formatReplayJson(shown, { journalKey: journalKeyJson(pin) })
        : `${journalKeyLine(pin)}\n${formatReplayText(shown)}`,
    );
    return report.replay.ok ? ExitCode.Ok : ExitCode.VerifyFailed;
  });
}

/** What `conversation verify` found. */
export interface ConversationVerification extends OfflineVerification {
  /** The checkpoint the control plane keeps outside the journal, as it sent it. */
  readonly statusCheckpoint: string | null;
  /** The journal keys pinned and where from; null when none could be (then it fails). */
  readonly journalKey: JournalKeyJson | null;
}

/** The JSON form of a {@link JournalKeyPin}. */
export interface JournalKeyJson {
  readonly source: JournalKeySource;
  readonly statusFrom: StatusKeysFrom;
  readonly keyIds: readonly string[];
  readonly statusKeyIds: readonly string[];
}

function journalKeyJson(pin: JournalKeyPin): JournalKeyJson {
  return {
    source: pin.source,
    statusFrom: pin.statusFrom,
    keyIds: pin.keyIds,
    statusKeyIds: pin.statusKeyIds,
  };
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
  options: KeyOptions = {},
): Promise<ExitCode> {
  const source = `conversation ${request.conversationId}`;
  const fromObject = await statusKeysOfObject(request, options);
  return withExport(client, request, async (file, sidecar) => {
    const header = sidecar.checkpoint;
    const pin = pinJournalKeys(
      options.publicKeys ?? [],
      fromObject ?? { keys: sidecar.publicKeys, from: StatusKeysFrom.ExportAnswer },
      client.transport.description,
    );
    const checkpoint = header === undefined ? undefined : parseCheckpoint(header);
    if (typeof checkpoint === 'string') {
      throw new AppError(
        'internal',
        `${client.transport.description} sent a checkpoint that does not read (${JSON.stringify(header?.slice(0, 120))}): ${checkpoint}; is the CLI older than the control plane?`,
      );
    }
    // With nothing to pin, the header's keys are used only to report how far the journal
    // goes; the verification fails all the same (no_pinned_key).
    const verified = await verifyExportFile(file, pin?.keys ?? [], checkpoint);
    const failure =
      verified.failure ??
      missingCheckpoint(verified) ??
      (pin === undefined ? noPinnedKey() : undefined);
    const result: ConversationVerification = {
      ...verified,
      source,
      ok: failure === undefined,
      failure,
      statusCheckpoint: header ?? null,
      journalKey: pin === undefined ? null : journalKeyJson(pin),
    };
    const keyLine = pin === undefined ? '' : `  ${journalKeyLine(pin)}\n`;
    const ok = result.ok && result.unsealed === 0;
    if (request.format === Format.Json) {
      await write(io.stdout, `${JSON.stringify({ ...result, ok, failure: failure ?? null })}\n`);
    } else if (failure !== undefined) {
      await write(
        io.stdout,
        `${source} (${result.partition}): FAILED at position ${String(failure.position)} (${failure.reason})\n` +
          `  ${failure.message}\n` +
          (failure.expected === '' ? '' : `  expected: ${failure.expected}\n`) +
          (failure.found === '' ? '' : `  found:    ${failure.found}\n`) +
          keyLine,
      );
    } else if (!ok) {
      await write(
        io.stdout,
        `${source} (${result.partition}): FAILED: ${String(result.unsealed)} events after the last signed root are not covered by any root\n` +
          keyLine,
      );
    } else {
      await write(
        io.stdout,
        `${source} (${result.partition}): OK: ${String(result.events)} events, ${String(result.signedRoots)} signed roots verified ` +
          `against the state plane's key(s) ${result.trustedKeyIds.join(', ')}\n` +
          keyLine +
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

/**
 * `export`: the conversation's journal export file (the format of `polychrome state
 * export`, docs/journal-format.md), to stdout or `--file F`; the control plane's
 * checkpoint for it goes to stderr, to pass to `journal verify --checkpoint`.
 */
export async function exportConversation(
  client: ApiClient,
  request: ForensicRequest & { readonly file?: string },
  io: CliIo,
): Promise<ExitCode> {
  const exported = await client.exportJournal(
    request.conversationId,
    request.actor,
    request.signal,
  );
  if (request.file === undefined || request.file === '-') {
    await write(io.stdout, exported.text);
  } else {
    await writeFile(request.file, exported.text, { mode: 0o600 });
  }
  const lines = exported.text.split('\n').filter((l) => l !== '').length;
  await write(
    io.stderr,
    `conversation ${request.conversationId}: exported ${String(Math.max(0, lines - 1))} events` +
      (request.file === undefined || request.file === '-' ? '' : ` to ${request.file}`) +
      (exported.checkpoint === undefined ? '' : `; checkpoint ${exported.checkpoint}`) +
      '\n',
  );
  return ExitCode.Ok;
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

/** `--head N --reason TEXT` of `accept-rollback`, both required. @throws UsageError */
function parseAcceptRollbackFlags(values: Readonly<Record<string, unknown>>): {
  head: number;
  reason: string;
} {
  const headText = stringValue(values.head);
  const reason = stringValue(values.reason);
  if (
    headText === undefined ||
    !/^\d+$/u.test(headText) ||
    !Number.isSafeInteger(Number(headText))
  ) {
    throw new UsageError(
      `accept-rollback takes --head N: the journal head you accept (status.journal.rollback.journalHead)${headText === undefined ? '' : `, got ${JSON.stringify(headText.slice(0, 40))}`}`,
    );
  }
  if (reason === undefined || reason.trim() === '') {
    throw new UsageError(
      'accept-rollback takes --reason TEXT: why the lost entries are accepted (it is recorded in the journal)',
    );
  }
  return { head: Number(headText), reason };
}

const RESOLVE_OPTIONS = {
  ran: { type: 'boolean' },
  'did-not-run': { type: 'boolean' },
  result: { type: 'string' },
} as const;

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
  const actor = parseActorFlag(values.actor);
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
  const { client, statusJournalKeys } = await door.connect(values, env);
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
  if (command === 'export' || !isForensicCommand(command)) {
    throw new UsageError(
      `unknown command "conversation ${command ?? ''}": conversation takes replay, verify, repair, resolve or accept-rollback`,
    );
  }
  return forensicCommand(publicApiDoor, command, rest, env, io, `conversation ${command}`);
}
