import { AppError } from '../common/errors';
import { parseCheckpoint } from '../common/journal-export-parse';
import { missingCheckpoint } from '../state/journal/export-verify';
import type { ApiClient } from './api-client';
import { ExitCode, Format, write, type CliIo } from './cli-support';
import { statusKeysOfObject, withExport, type KeyOptions } from './conversation-export';
import type { ForensicRequest } from './forensic-request';
import {
  journalKeyJson,
  journalKeyLine,
  noPinnedKey,
  pinJournalKeys,
  StatusKeysFrom,
  type JournalKeyJson,
} from './journal-key-pin';
import { verifyExportFile, type OfflineVerification } from './journal-verify';
import { excisionLines, failureLines } from './verification-lines';

/*
 * `conversation verify` (`kubectl polychrome verify`): the export through the control
 * plane, verified on this machine with the code of `journal verify`, against the checkpoint
 * and the journal keys the Conversation's status keeps outside the journal (docs/replay.md).
 */

/** What `conversation verify` found. */
export interface ConversationVerification extends OfflineVerification {
  /** The checkpoint the control plane keeps outside the journal, as it sent it. */
  readonly statusCheckpoint: string | null;
  /** The journal keys pinned and where from; null when none could be (then it fails). */
  readonly journalKey: JournalKeyJson | null;
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
          failureLines(failure) +
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
          excisionLines(result.excised, result.erased) +
          `  checkpoint: checked against the Conversation status (head ${String(checkpoint?.head ?? 0)})\n`,
      );
    }
    return ok ? ExitCode.Ok : ExitCode.VerifyFailed;
  });
}
