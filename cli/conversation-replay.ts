import type { ApiClient } from './api-client';
import { ExitCode, Format, write, type CliIo } from './cli-support';
import type { KeyOptions } from './conversation-export';
import type { ForensicRequest } from './forensic-request';
import type { LiveSetup } from './journal-live';
import { journalKeyJson, journalKeyLine } from './journal-key-pin';
import { formatReplayJson, formatReplayText, replayExportFile } from './journal-replay';
import { withPinnedExport } from './pinned-export';
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
  return withPinnedExport(client, request, options, 'replay', async (file, pin, named) => {
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
