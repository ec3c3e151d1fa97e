import { AppError } from '../common/errors';
import type { ApiClient } from './api-client';
import { ExitCode, Format, write, type CliIo } from './cli-support';
import { statusKeysOfObject, withExport, type KeyOptions } from './conversation-export';
import type { ForensicRequest } from './forensic-request';
import type { LiveSetup } from './journal-live';
import {
  journalKeyJson,
  journalKeyLine,
  NO_PINNED_KEY_HELP,
  pinJournalKeys,
  StatusKeysFrom,
} from './journal-key-pin';
import { formatReplayJson, formatReplayText, replayExportFile } from './journal-replay';
import {
  formatWhatIfJson,
  formatWhatIfText,
  whatIfParsed,
  type ParsedWhatIf,
} from './journal-what-if';

/*
 * `conversation replay` (`kubectl polychrome replay`): the export through the control
 * plane, replayed on this machine with the code of `journal replay` (docs/replay.md).
 */

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
