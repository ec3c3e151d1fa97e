import type { Env } from '../common/config';
import { versionText } from './build-info';
import { commandUsage, helpAsked } from './cli-help';
import { ExitCode, reportFailure, UsageError, write, type CliIo } from './cli-support';
import { WHAT_IF_FORMS } from './what-if-forms';

/*
 * `polychrome`: its usage, and which command runs. The conversation commands are
 * conversation-commands.ts and conversation-forensics.ts, `state` is state-commands.ts,
 * `journal` journal-commands.ts, `dashboard` dashboard.ts. Each is imported when it runs
 * (the `.ts` specifiers: see cli/kube-cli.ts), so `help` loads none of them.
 */

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

  polychrome memory ID [list | clear [KEY]] [--format json|text] [api flags]
      Print what the agent keeps across turns, or clear all of it or one key (recorded in
      the journal with who asked).

Forensics, for admins (through the control plane; docs/replay.md). A is the identity you
act as, one of your own: provider:scope:external_id or provider:external_id.

  polychrome conversation replay ID --actor A [--public-key KEY]... [--approval-key KEY] [--what-if CHANGE [--live]] [--format json|text] [api flags]
      Fetch the conversation's export and replay it as journal replay does (verified
      first, under the pinned keys: Journal keys, below; the harness's turn machine; no
      model, no tool). The export carries the control plane's approval key;
      --approval-key pins another (it wins, and a mismatch is reported). Exit 0 when
      every turn replays, 1 on a divergence. --what-if CHANGE runs journal replay's
      what-if (below) over the fetched export; --live goes on from the departure as
      journal replay --live does.

  polychrome conversation verify ID --actor A [--public-key KEY]... [--format json|text] [api flags]
      Fetch the export and verify it as journal verify does, against the checkpoint the
      Conversation's status keeps outside the journal: a journal cut short or rolled back
      fails (rolled_back), and under the pinned keys (Journal keys, below). Exit 0 when it
      verifies, 1 when it does not.

  Journal keys (conversation verify and replay): the export header's keys are never
      trusted. --public-key KEY pins the state plane's keys (as journal verify takes
      them); without it, the keys the Conversation's status recorded are pinned; with
      neither, verify fails (no_pinned_key) and replay is refused. A journal signed by
      another key fails wrong_key, naming both key ids.

  polychrome conversation repair ID --actor A [--dry-run] [--format json|text] [api flags]
  polychrome conversation erase ID POSITION... --actor A --reason R [--dry-run] [--format json|text] [api flags]
      Have the state plane excise unreadable journal entries (recorded with A), holding
      the conversation as a turn does; --dry-run reports them and writes nothing.

  polychrome conversation resolve ID TURN --ran [--result FILE | --transaction HASH] | --did-not-run --actor A [api flags]
      Settle a quarantined turn (recorded with A; docs/turns.md): it ran (FILE holds the
      tool's result; without it the result is unknown) or did not (the turn runs it again).
      The next message, or the retry of the turn's request, runs the turn.

  polychrome conversation accept-rollback ID --head N --reason TEXT --actor A [api flags]
      Go on from a journal the state plane rolled back (Degraded JournalRolledBack;
      docs/turns.md): N is status.journal.rollback.journalHead. Recorded in the journal
      with A and TEXT; until then, or until the state volume is restored, nothing is
      appended.

  polychrome payments link ID --wallet W --limits FILE --reason TEXT --actor A [api flags]
  polychrome payments unlink ID --reason TEXT --actor A [api flags]
  polychrome payments policy ID --actor A [--format json|text] [api flags]
      Link a wallet of the control plane to the conversation with the spend limits in
      FILE (JSON; docs/payments.md, "Linking a wallet"), unlink it, or show the policy in
      force. Admins only; each change is recorded in the journal with A and TEXT.

  polychrome payments ID --actor A [--public-key KEY]... [--approval-key KEY] [--format json|text] [api flags]
      The conversation's payments, one line per charge (when, tool call, protocol,
      amount, network, payee, resource, state, transaction, receipt verified), read from
      its export and audited on this machine as replay audits them (docs/payments.md,
      "Auditing payments"). Admins only. Exit 1 when the audit finds a problem.

  polychrome personas payment-policy set PERSONA --limits FILE [--wallet W] --reason TEXT --actor A [api flags]
  polychrome personas payment-policy clear PERSONA --reason TEXT --actor A [api flags]
  polychrome personas payment-policy get PERSONA --actor A [--format json|text] [api flags]
      Give the persona PERSONA (its id in the records) the spend limits in FILE (JSON),
      which hold every payment of its turns whoever's wallet pays, and with --wallet a
      wallet of the control plane that pays its turns where a conversation links none
      (docs/payments.md, "A persona's wallet and limits"); clear both; or show them with
      every change. Admins only, and never for your own persona; each change is recorded
      in the state plane's records with A and TEXT.

api flags (or environment variables):
  --api URL             POLYCHROME_API_URL         default http://127.0.0.1:8080
  --token T             POLYCHROME_TOKEN           a session token (pcs_...); required

Check a journal (the state plane):

  polychrome state verify conv-<id> [--checkpoint N:ROOTHEX] [--format json|text] [connection flags]
      Ask the state plane to replay the journal and check every root and signature.
      Exit 0 when every root verifies, 1 when one does not (the failing position is named).

  polychrome state verify --all [--format json|text] [connection flags]
      The same for every partition the state plane holds (after a restore); exit 1 when
      any fails.

  polychrome state export conv-<id> [-o FILE] [connection flags]
      Write the journal as JSON lines: a header with the public keys and the state plane's
      checkpoint, then one line per event ({position, kind, payload (base64)}, or
      {position, excised, leafHex} for an entry repair excised). Default: standard output.

  polychrome state retirement conv-<id> [-o FILE] [connection flags]
      Write the retirement record of a partition retired when its Conversation was deleted
      (journalRetention checkpoint: the signed final head, root and key) as JSON.

  polychrome state backup -o FILE [connection flags]
      Take an online backup of the state plane's journals and records into FILE (written
      whole or not at all; never over an existing file), with a certificate holding the
      backup role (polychrome:backup). The state plane keeps serving. Restore with the
      state plane's own program, stopped: main.js restore FILE (docs/operations.md).

  polychrome journal verify FILE [--public-key KEY]... [--checkpoint N:ROOTHEX] [--retirement RECORD] [--format json|text]
      Verify an export offline, with no server. KEY is the raw ed25519 public key, 64 hex
      digits or base64; without it the keys in the file's header are trusted. RECORD is a
      retirement record file (state retirement): the export must be exactly the journal it
      describes, every entry up to its final head, and the record must verify.

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

  polychrome help [COMMAND]   (or polychrome COMMAND --help)
      This usage, or only what COMMAND's lines of it say (help state verify).

  polychrome version
      This program's version, and the commit it was built from.

exit codes: 0 ok, 1 verification failed or turn quarantined, 2 usage error, 3 could not run
(no connection, an error answer: its message is printed)
`;

/** Runs `group command ...rest`, importing its module; an unknown one is a usage error. */
async function runCommand(
  group: string,
  command: string | undefined,
  rest: readonly string[],
  env: Env | undefined,
  io: CliIo,
): Promise<ExitCode> {
  const args = command === undefined ? [] : [command, ...rest];
  if (group === 'memory') {
    const { publicApiDoor } = await import('./public-api-door.ts');
    return (await import('./memory-command.ts')).memoryCommand(publicApiDoor, args, env, io);
  }
  if (group === 'conversation') {
    return (await import('./conversation-forensics.ts')).conversationGroup(args, env, io);
  }
  if (group === 'payments') {
    const { publicApiDoor } = await import('./public-api-door.ts');
    return (await import('./payments-command.ts')).paymentsCommand(publicApiDoor, args, env, io);
  }
  if (group === 'personas') {
    const { publicApiDoor } = await import('./public-api-door.ts');
    return (await import('./persona-policy-command.ts')).personasGroup(
      publicApiDoor,
      args,
      env,
      io,
    );
  }
  if (group === 'dashboard')
    return (await import('./dashboard.ts')).dashboardCommand(args, io, env);
  if (group === 'state' && command === 'verify') {
    return (await import('./state-commands.ts')).stateVerify(rest, env, io);
  }
  if (group === 'state' && command === 'export') {
    return (await import('./state-commands.ts')).stateExport(rest, env, io);
  }
  if (group === 'state' && command === 'retirement') {
    return (await import('./state-commands.ts')).stateRetirement(rest, env, io);
  }
  if (group === 'state' && command === 'backup') {
    return (await import('./state-backup.ts')).stateBackup(rest, env, io);
  }
  if (group === 'journal' && command === 'verify') {
    return (await import('./journal-commands.ts')).journalVerify(rest, io);
  }
  if (group === 'journal' && command === 'replay') {
    return (await import('./journal-commands.ts')).journalReplay(rest, env, io);
  }
  const conversation = await import('./conversation-commands.ts');
  if (conversation.isConversationCommand(group)) {
    return conversation.conversationCommands[group](args, env, io);
  }
  throw new UsageError(
    `unknown command ${JSON.stringify([group, command].filter((p) => p !== undefined).join(' '))}`,
  );
}

/** The help of the command `words` names; a usage error when they name none. */
function helpOf(words: readonly string[], how: 'help' | '--help'): string {
  const text = commandUsage(USAGE, words);
  if (text !== undefined) return text;
  throw new UsageError(
    `no command ${JSON.stringify(words.join(' '))} to give ${how} for: ` +
      '`polychrome help` lists the commands',
  );
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
    const { asked, words } = helpAsked(args);
    if (group === 'help' || asked) {
      // `help COMMAND`, `COMMAND --help`; `help --help` is help's own entry.
      const named =
        group === 'help' ? (words.length > 1 ? words.slice(1) : asked ? words : []) : words;
      await write(
        io.stdout,
        named.length === 0 ? USAGE : helpOf(named, group === 'help' ? 'help' : '--help'),
      );
      return ExitCode.Ok;
    }
    if (group === 'version') {
      if (args.length > 1)
        throw new UsageError(`version takes no argument, got ${args.slice(1).join(' ')}`);
      await write(io.stdout, versionText('polychrome'));
      return ExitCode.Ok;
    }
    return await runCommand(group, command, rest, env, io);
  } catch (error) {
    return reportFailure(error, io, { program: 'polychrome', usage: USAGE });
  }
}
