import { createWriteStream } from 'node:fs';
import { once } from 'node:events';

import { z } from 'zod';

import { envInt, envOptionalString, envString, parseConfig, type Env } from '../common/config';
import { loadStateClientTls } from '../common/state-channel';
import { StateCallError } from '../common/state-call-errors';
import { StateClient } from '../common/state-client';
import { isPartitionName } from '../common/partition-name';
import {
  ExitCode,
  Format,
  formatOptions,
  parse,
  parseFormat,
  stringValue,
  UsageError,
  reportFailure,
  write,
  type CliIo,
} from './cli-support';
import { conversationCommands, isConversationCommand } from './conversation-commands';
import { conversationGroup } from './conversation-forensics';
import { exportFileLines } from '../common/journal-export-format';
import { parseCheckpoint, type ExportCheckpoint } from './export-file';
import {
  formatWhatIfJson,
  formatWhatIfText,
  parseWhatIf,
  whatIfParsed,
  WHAT_IF_FORMS,
} from './journal-what-if';
import { LIVE_NEEDS_WHAT_IF, liveSetup } from './journal-live';
import { formatReplayJson, formatReplayText, replayExportFile } from './journal-replay';
import { dashboardCommand } from './dashboard';
import { verifyExportFile } from './journal-verify';
import { parsePublicKey, parsePublicKeyFlags, publicKeyOption } from './public-key-flags';

export { ExitCode, type CliIo } from './cli-support';

export const USAGE = `usage: polychrome <command>

Talk to a conversation (the control plane's public API; ID is the Conversation's uid):

  polychrome send ID TEXT... [--key K] [--format json|text] [api flags]
      Post a message and print the reply; for a paused turn the approval card (tool,
      arguments, reason, request id) and the command that answers it; for a quarantined
      turn the notice. K is the idempotency key: the same K and text again gets the same
      turn, never a second one (default: a random key, shown by --format json).
      Exit 0 when the turn completed or waits for a person, 1 when it is quarantined.

  polychrome stream ID [--since N | --last-event-id N] [--format json|text] [api flags]
      Print the conversation's committed events (position, kind, a summary) and the live
      text of a running turn, until Ctrl-C. --since N starts at position N, --last-event-id N
      after it; default: the whole journal. A dropped connection is resumed after the last
      event printed (Last-Event-ID), so no event is printed twice or skipped.

  polychrome approve ID REQUEST-ID [--deny | --cancel] [--comment C] [--format json|text] [api flags]
      Approve (or deny) the call a paused turn waits for; print the turn's next state.
      --cancel (admins only) ends the turn without running the call.

  polychrome answer ID REQUEST-ID (TEXT... | --cancel [--comment C]) [--format json|text] [api flags]
      Answer the agent's question; print the turn's next state. --cancel (admins only)
      ends the turn without an answer.

  polychrome transcript ID [--format json|text] [api flags]
      Print the committed turns, oldest first.

Forensics, for admins (through the control plane; docs/replay.md). A is the identity you
act as, one of your own: provider:scope:external_id or provider:external_id.

  polychrome conversation replay ID --actor A [--public-key KEY]... [--approval-key KEY] [--what-if CHANGE [--live]] [--format json|text] [api flags]
      Fetch the conversation's export and replay it as journal replay does (verified
      first, under the pinned journal keys; the harness's turn machine; no model, no
      tool). The export carries the control plane's approval key; --approval-key pins
      another (it wins, and a mismatch is reported). Exit 0 when every turn replays, 1
      on a divergence. --what-if CHANGE runs journal replay's what-if (below) over the
      fetched export; --live goes on from the departure as journal replay --live does.

  polychrome conversation verify ID --actor A [--public-key KEY]... [--format json|text] [api flags]
      Fetch the export and verify it as journal verify does, against the checkpoint the
      Conversation's status keeps outside the journal: a journal cut short or rolled back
      fails (rolled_back). Exit 0 when it verifies, 1 when it does not.

  Journal keys (conversation verify and replay): the export header's keys are never
      trusted. --public-key KEY pins the state plane's keys (as journal verify takes
      them); without it, the keys the Conversation's status recorded are pinned; with
      neither, verify fails (no_pinned_key) and replay is refused. A journal signed by
      another key fails wrong_key, naming both key ids.

  polychrome conversation repair ID --actor A [--dry-run] [--format json|text] [api flags]
      Have the state plane excise unreadable journal entries (recorded with A), holding
      the conversation as a turn does; --dry-run reports them and writes nothing.

  polychrome conversation resolve ID TURN --ran [--result FILE] | --did-not-run --actor A [api flags]
      Settle a quarantined turn (recorded with A; docs/turns.md): it ran (FILE holds the
      tool's result; without it the result is unknown) or did not (the turn runs it again).
      The next message, or the retry of the turn's request, runs the turn.

  polychrome conversation accept-rollback ID --head N --reason TEXT --actor A [api flags]
      Go on from a journal the state plane rolled back (Degraded JournalRolledBack;
      docs/turns.md): N is status.journal.rollback.journalHead. Recorded in the journal
      with A and TEXT; until then, or until the state volume is restored, nothing is
      appended.

api flags (or environment variables):
  --api URL             POLYCHROME_API_URL         default http://127.0.0.1:8080
  --token T             POLYCHROME_TOKEN           a session token (pcs_...); required

Check a journal (the state plane):

  polychrome state verify conv-<id> [--checkpoint N:ROOTHEX] [--format json|text] [connection flags]
      Ask the state plane to replay the journal and check every root and signature.
      Exit 0 when every root verifies, 1 when one does not (the failing position is named).

  polychrome state export conv-<id> [-o FILE] [connection flags]
      Write the journal as JSON lines: a header with the public keys and the state plane's
      checkpoint, then one line per event ({position, kind, payload (base64)}, or
      {position, excised, leafHex} for an entry repair excised). Default: standard output.

  polychrome journal verify FILE [--public-key KEY]... [--checkpoint N:ROOTHEX] [--format json|text]
      Verify an export offline, with no server. KEY is the raw ed25519 public key, 64 hex
      digits or base64; without it the keys in the file's header are trusted.

  --checkpoint N:ROOTHEX[:KEYID] catches a journal cut short or rolled back: N is the head
      and ROOTHEX the last signed root as kept outside the journal (the Conversation's
      status.journal.head and .lastSignedRoot; KEYID optional, .keyId). Without it, a
      journal with its last batches cut off still verifies.

  polychrome journal replay FILE [--public-key KEY]... [--approval-key KEY] [--format json|text]
      Verify an export offline (as journal verify; a failing one is refused), then replay
      every turn through the harness's turn machine from the journal alone, with no model
      and no tool (docs/replay.md). Prints the reconstructed transcript and a verdict per
      turn: ok, or the first divergence (turn, step, expected, found). --approval-key is
      the control plane's approval public key (64 hex digits or base64), needed when the
      journal holds approval answers; without it the key in the file's header is
      trusted, as the header's keys are without --public-key. Exit 0 when every turn
      replays, 1 on a divergence.

  polychrome journal replay FILE --what-if CHANGE [the flags above]
      Change one recorded step or configuration input and report the first step where the
      recorded run no longer follows (turn, step, what the machine would do, what was
      recorded), and the tool calls and answer recorded after it. No model, no tool, and
      nothing is written. Exit 0 when the run still follows, 1 when it diverges, 3 when the
      recorded run itself does not replay.

  polychrome journal replay FILE --what-if CHANGE --live [the flags above]
      Then go on from the departure in a scratch run: the model is called (Anthropic with
      ANTHROPIC_API_KEY and ANTHROPIC_BASE_URL, else HARNESS_MODEL_SCRIPT, else the demo
      script), pure built-in tools run, and a side-effecting tool never runs: its recorded
      result is reused when the arguments match, otherwise the run stops and says what it
      would have called. Nothing is written.
  ${WHAT_IF_FORMS}

  polychrome dashboard [--kubeconfig FILE] [--context NAME] [-n NAMESPACE] [--port P] [--no-open]
      (also kubectl polychrome dashboard) The read-only forensics UI of a namespace
      through a local proxy on 127.0.0.1 with the kubeconfig's credentials (docs/ui.md).
      Prints the URL, which holds this session's secret; opens it when there is a display.

connection flags (or environment variables):
  --address HOST:PORT   POLYCHROME_STATE_ADDRESS   default localhost:7443
  --ca FILE             POLYCHROME_STATE_CA        the Polychrome CA certificate (PEM)
  --cert FILE           POLYCHROME_STATE_CERT      this client's certificate (PEM)
  --key FILE            POLYCHROME_STATE_KEY       this client's key (PEM)
  --server-name NAME    POLYCHROME_STATE_SERVER_NAME  name to check the server certificate against
  --timeout-ms N        POLYCHROME_STATE_TIMEOUT_MS   default 60000

--json is short for --format json.

exit codes: 0 ok, 1 verification failed or turn quarantined, 2 usage error, 3 could not run
(no connection, an error answer: its message is printed)
`;

const envSchema = z
  .object({
    POLYCHROME_STATE_ADDRESS: envString({ default: 'localhost:7443' }),
    POLYCHROME_STATE_CA: envOptionalString(),
    POLYCHROME_STATE_CERT: envOptionalString(),
    POLYCHROME_STATE_KEY: envOptionalString(),
    POLYCHROME_STATE_SERVER_NAME: envOptionalString(),
    POLYCHROME_STATE_TIMEOUT_MS: envInt({ default: 60_000, min: 1, max: 3_600_000 }),
  })
  .transform((env) => ({
    address: env.POLYCHROME_STATE_ADDRESS,
    ca: env.POLYCHROME_STATE_CA,
    cert: env.POLYCHROME_STATE_CERT,
    key: env.POLYCHROME_STATE_KEY,
    serverName: env.POLYCHROME_STATE_SERVER_NAME,
    timeoutMs: env.POLYCHROME_STATE_TIMEOUT_MS,
  }));

const connectionOptions = {
  address: { type: 'string' },
  ca: { type: 'string' },
  cert: { type: 'string' },
  key: { type: 'string' },
  'server-name': { type: 'string' },
  'timeout-ms': { type: 'string' },
} as const;

const checkpointOption = { checkpoint: { type: 'string' } } as const;

function checkpointOf(values: Record<string, unknown>): ExportCheckpoint | undefined {
  const text = stringValue(values.checkpoint);
  if (text === undefined) return undefined;
  const checkpoint = parseCheckpoint(text);
  if (typeof checkpoint === 'string') {
    throw new UsageError(`--checkpoint ${JSON.stringify(text.slice(0, 120))}: ${checkpoint}`);
  }
  return checkpoint;
}

function checkpointNote(checked: boolean, excised: readonly number[]): string {
  return (
    (excised.length === 0
      ? ''
      : `  excised by repair (checked by their kept leaf digests): ${excised.join(', ')}\n`) +
    (checked
      ? '  checkpoint: checked\n'
      : '  no checkpoint was checked: a journal cut short would pass; pass --checkpoint N:ROOTHEX\n')
  );
}

function onePartition(positionals: readonly string[], command: string): string {
  const [partition, ...extra] = positionals;
  if (partition === undefined) throw new UsageError(`${command} needs a partition: conv-<id>`);
  if (extra.length > 0)
    throw new UsageError(`${command} takes one partition, got extra ${extra.join(' ')}`);
  if (!isPartitionName(partition)) {
    throw new UsageError(
      `${JSON.stringify(partition)} is not a partition name: expected conv-<conversation uid> ` +
        '(a-z, 0-9 and "-", up to 63 characters after "conv-")',
    );
  }
  return partition;
}

async function connect(
  values: Record<string, unknown>,
  env: Env | undefined,
): Promise<StateClient> {
  const config = parseConfig('polychrome CLI', envSchema, env);
  const pick = (flag: string, fromEnv: string | undefined, variable: string): string => {
    const value = stringValue(values[flag]) ?? fromEnv;
    if (value === undefined) {
      throw new UsageError(`no ${flag} file: pass --${flag} FILE or set ${variable}`);
    }
    return value;
  };
  const tls = await loadStateClientTls({
    ca: pick('ca', config.ca, 'POLYCHROME_STATE_CA'),
    cert: pick('cert', config.cert, 'POLYCHROME_STATE_CERT'),
    key: pick('key', config.key, 'POLYCHROME_STATE_KEY'),
  });
  const timeoutText = stringValue(values['timeout-ms']);
  const timeoutMs = timeoutText === undefined ? config.timeoutMs : Number(timeoutText);
  if (!Number.isSafeInteger(timeoutMs) || timeoutMs <= 0) {
    throw new UsageError(
      `--timeout-ms must be a positive whole number, got ${JSON.stringify(timeoutText)}`,
    );
  }
  const serverName = stringValue(values['server-name']) ?? config.serverName;
  return new StateClient({
    address: stringValue(values.address) ?? config.address,
    tls,
    callTimeoutMs: timeoutMs,
    ...(serverName === undefined ? {} : { serverName }),
  });
}

function failureLines(failure: {
  position: number;
  reason: string;
  expected: string;
  found: string;
  message: string;
}): string {
  return (
    `  ${failure.message}\n` +
    (failure.expected === '' ? '' : `  expected: ${failure.expected}\n`) +
    (failure.found === '' ? '' : `  found:    ${failure.found}\n`)
  );
}

async function stateVerify(
  args: readonly string[],
  env: Env | undefined,
  io: CliIo,
): Promise<ExitCode> {
  const { values, positionals } = parse(args, {
    ...connectionOptions,
    ...formatOptions,
    ...checkpointOption,
  });
  const format = parseFormat(values);
  const partition = onePartition(positionals, 'state verify');
  const checkpoint = checkpointOf(values);
  const client = await connect(values, env);
  try {
    const result = await client.verify(partition, checkpoint === undefined ? {} : { checkpoint });
    // Events no root covers cannot be verified; the state plane never acknowledges them.
    const ok = result.ok && result.unsealed === 0;
    if (format === Format.Json) {
      await write(
        io.stdout,
        `${JSON.stringify({
          partition,
          ok,
          events: result.events,
          signedRoots: result.signedRoots,
          unsealed: result.unsealed,
          failure: result.failure ?? null,
          excised: result.excised,
          checkpointChecked: result.checkpointChecked,
        })}\n`,
      );
    } else if (result.failure !== undefined) {
      await write(
        io.stdout,
        `${partition}: FAILED at position ${String(result.failure.position)} (${result.failure.reason})\n` +
          failureLines(result.failure),
      );
    } else if (!ok) {
      await write(
        io.stdout,
        `${partition}: FAILED: ${String(result.unsealed)} events after the last signed root are not covered by any root\n`,
      );
    } else {
      await write(
        io.stdout,
        `${partition}: OK: ${String(result.events)} events, ${String(result.signedRoots)} signed roots verified\n` +
          checkpointNote(result.checkpointChecked, result.excised),
      );
    }
    return ok ? ExitCode.Ok : ExitCode.VerifyFailed;
  } finally {
    client.close();
  }
}

async function stateExport(
  args: readonly string[],
  env: Env | undefined,
  io: CliIo,
): Promise<ExitCode> {
  const { values, positionals } = parse(args, {
    ...connectionOptions,
    output: { type: 'string', short: 'o' },
  });
  const partition = onePartition(positionals, 'state export');
  const client = await connect(values, env);
  // The state plane's own checkpoint, taken before the export starts, so the export holds
  // at least it; a refused partition has none and still exports.
  let checkpoint: ExportCheckpoint | undefined;
  try {
    const head = await client.head(partition);
    if (head.signedRoot !== undefined) {
      checkpoint = { head: head.head, root: head.signedRoot.root, keyId: head.signedRoot.keyId };
    }
  } catch (error) {
    if (!(error instanceof StateCallError) || !error.fromServer) {
      client.close();
      throw error;
    }
  }
  const file = stringValue(values.output);
  const out =
    file === undefined || file === '-' ? io.stdout : createWriteStream(file, { flags: 'w' });
  let events = 0;
  try {
    for await (const line of exportFileLines(partition, client.export(partition), { checkpoint })) {
      await write(out, line);
      events += 1;
    }
    // The header is one of the lines.
    events -= 1;
  } finally {
    client.close();
    if (out !== io.stdout) {
      out.end();
      await once(out, 'close');
    }
  }
  if (file !== undefined && file !== '-') {
    await write(io.stderr, `${partition}: exported ${String(events)} events to ${file}\n`);
  }
  return ExitCode.Ok;
}

async function journalVerify(args: readonly string[], io: CliIo): Promise<ExitCode> {
  const { values, positionals } = parse(args, {
    ...formatOptions,
    ...checkpointOption,
    ...publicKeyOption,
  });
  const format = parseFormat(values);
  const [file, ...extra] = positionals;
  if (file === undefined) throw new UsageError('journal verify needs an export FILE');
  if (extra.length > 0)
    throw new UsageError(`journal verify takes one FILE, got extra ${extra.join(' ')}`);
  const keys = parsePublicKeyFlags(values);
  const checkpoint = checkpointOf(values);
  const result = await verifyExportFile(file, keys, checkpoint);
  if (format === Format.Json) {
    await write(io.stdout, `${JSON.stringify({ ...result, failure: result.failure ?? null })}\n`);
  } else if (result.failure !== undefined) {
    await write(
      io.stdout,
      `${file} (${result.partition}): FAILED at position ${String(result.failure.position)} (${result.failure.reason})\n` +
        failureLines(result.failure),
    );
  } else {
    await write(
      io.stdout,
      `${file} (${result.partition}): OK: ${String(result.events)} events, ${String(result.signedRoots)} signed roots ` +
        `verified against ${result.trust === 'pinned' ? 'the pinned key(s)' : "the file header's key(s) (pin one with --public-key)"} ` +
        `${result.trustedKeyIds.join(', ')}\n` +
        checkpointNote(result.checkpoint !== null, result.excised),
    );
  }
  return result.ok && result.unsealed === 0 ? ExitCode.Ok : ExitCode.VerifyFailed;
}

async function journalReplay(
  args: readonly string[],
  env: Env | undefined,
  io: CliIo,
): Promise<ExitCode> {
  const { values, positionals } = parse(args, {
    ...formatOptions,
    ...publicKeyOption,
    'approval-key': { type: 'string' },
    'what-if': { type: 'string' },
    live: { type: 'boolean' },
  });
  const format = parseFormat(values);
  const [file, ...extra] = positionals;
  if (file === undefined) throw new UsageError('journal replay needs an export FILE');
  if (extra.length > 0)
    throw new UsageError(`journal replay takes one FILE, got extra ${extra.join(' ')}`);
  const keys = parsePublicKeyFlags(values);
  const approvalText = stringValue(values['approval-key']);
  const approvalKey =
    approvalText === undefined ? undefined : parsePublicKey(approvalText, '--approval-key');
  const spec = stringValue(values['what-if']);
  const live = values.live === true;
  if (live && spec === undefined) throw new UsageError(LIVE_NEEDS_WHAT_IF);
  if (spec !== undefined) {
    const change = { spec, change: await parseWhatIf(spec) };
    const setup = live ? await liveSetup(io.signal, env) : undefined;
    const run = await whatIfParsed(file, change, keys, approvalKey, setup);
    await write(io.stdout, format === Format.Json ? formatWhatIfJson(run) : formatWhatIfText(run));
    return run.report.divergence === undefined ? ExitCode.Ok : ExitCode.VerifyFailed;
  }
  const report = await replayExportFile(file, keys, approvalKey);
  await write(
    io.stdout,
    format === Format.Json ? formatReplayJson(report) : formatReplayText(report),
  );
  return report.replay.ok ? ExitCode.Ok : ExitCode.VerifyFailed;
}

/**
 * Runs one CLI invocation. Never throws and never exits: returns the exit code, having
 * written results to stdout and problems to stderr.
 *
 * @param args the arguments after the program name.
 * @param env @default process.env (through common/config.ts)
 */
export async function runCli(args: readonly string[], io: CliIo, env?: Env): Promise<ExitCode> {
  const [group, command, ...rest] = args;
  try {
    if (group === undefined) throw new UsageError('no command given');
    if (group === 'help' || group === '--help' || group === '-h') {
      await write(io.stdout, USAGE);
      return ExitCode.Ok;
    }
    if (isConversationCommand(group)) {
      return await conversationCommands[group](args.slice(1), env, io);
    }
    if (group === 'conversation') return await conversationGroup(args.slice(1), env, io);
    if (group === 'dashboard') return await dashboardCommand(args.slice(1), io, env);
    if (group === 'state' && command === 'verify') return await stateVerify(rest, env, io);
    if (group === 'state' && command === 'export') return await stateExport(rest, env, io);
    if (group === 'journal' && command === 'verify') return await journalVerify(rest, io);
    if (group === 'journal' && command === 'replay') return await journalReplay(rest, env, io);
    throw new UsageError(
      `unknown command ${JSON.stringify([group, command].filter((p) => p !== undefined).join(' '))}`,
    );
  } catch (error) {
    return reportFailure(error, io, { program: 'polychrome', usage: USAGE });
  }
}
