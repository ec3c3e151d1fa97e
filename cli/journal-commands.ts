import type { Env } from '../common/config';
import { checkpointOf, checkpointOption } from './checkpoint-flag';
import { retirementOf, retirementOption } from './retirement-flag';
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
import { LIVE_NEEDS_WHAT_IF, liveSetup } from './journal-live';
import { formatReplayJson, formatReplayText, replayExportFile } from './journal-replay';
import { verifyExportFile } from './journal-verify';
import { formatWhatIfJson, formatWhatIfText, parseWhatIf, whatIfParsed } from './journal-what-if';
import { parsePublicKey, parsePublicKeyFlags, publicKeyOption } from './public-key-flags';
import { checkpointNote, failureLines } from './verification-lines';

/*
 * `polychrome journal verify FILE` and `journal replay FILE`: an export checked offline,
 * with no server (docs/replay.md).
 */

/** `journal verify FILE`: the export verified against the pinned keys (or its header's). */
export async function journalVerify(args: readonly string[], io: CliIo): Promise<ExitCode> {
  const { values, positionals } = parse(args, {
    ...formatOptions,
    ...checkpointOption,
    ...publicKeyOption,
    ...retirementOption,
  });
  const format = parseFormat(values);
  const [file, ...extra] = positionals;
  if (file === undefined) throw new UsageError('journal verify needs an export FILE');
  if (extra.length > 0)
    throw new UsageError(`journal verify takes one FILE, got extra ${extra.join(' ')}`);
  const keys = parsePublicKeyFlags(values);
  const checkpoint = checkpointOf(values);
  const retirement = await retirementOf(values);
  const result = await verifyExportFile(file, keys, checkpoint, retirement);
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
        checkpointNote(result.checkpoint !== null, result.excised, result.erased) +
        (result.retirement === null
          ? ''
          : `  retirement record: checked (final head ${String(result.retirement.head)})\n`),
    );
  }
  return result.ok && result.unsealed === 0 ? ExitCode.Ok : ExitCode.VerifyFailed;
}

/** `journal replay FILE`: verified, then replayed, or changed with `--what-if`. */
export async function journalReplay(
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
