import { AppError } from '../common/errors';
import type { ApiClient } from './api-client';
import { statusKeysOfObject, withExport, type KeyOptions } from './conversation-export';
import type { ForensicRequest } from './forensic-request';
import {
  NO_PINNED_KEY_HELP,
  pinJournalKeys,
  StatusKeysFrom,
  type JournalKeyPin,
} from './journal-key-pin';

/*
 * The export of a conversation with its journal keys pinned (docs/replay.md, "Which journal
 * key is trusted"), for the commands that read it on this machine: `conversation replay`
 * and `payments NAME`. With no key to pin they are refused.
 */

/** Rewrites the temporary file's path into the conversation's name in an AppError's message. */
export type Named = <T>(run: () => Promise<T>) => Promise<T>;

/**
 * Fetches the export of the conversation `request` names and runs `run` on its file with
 * the journal keys pinned (`--public-key`, else the Conversation's status, else the keys the
 * control plane sent with the export).
 *
 * @throws AppError `failed_precondition` when no key can be pinned: `verb` is refused.
 */
export async function withPinnedExport<T>(
  client: ApiClient,
  request: ForensicRequest,
  options: KeyOptions,
  verb: string,
  run: (file: string, pin: JournalKeyPin, named: Named) => Promise<T>,
): Promise<T> {
  const source = `conversation ${request.conversationId}`;
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
        `${source}: ${verb} is refused: ${NO_PINNED_KEY_HELP}`,
      );
    }
    const named: Named = (step) =>
      step().catch((error: unknown) => {
        throw error instanceof AppError
          ? new AppError(error.code, error.message.split(file).join(source), { cause: error })
          : error;
      });
    return run(file, pin, named);
  });
}
