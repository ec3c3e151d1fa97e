import { AppError } from '../common/errors';
import { journalKeyId } from '../common/journal-keys';
import type { ExportFailure } from '../state/journal/export-verify';
import { parsePublicKey } from './public-key-flags';

/*
 * Which state-plane journal keys `conversation verify` and `conversation replay` trust
 * (docs/replay.md, "Which journal key is trusted"): never the keys the export's own header
 * presents, since whoever rewrote the journal wrote that header too. The keys given with
 * `--public-key` win; else the keys the Conversation's status recorded
 * (`status.journal.publicKeys`: read from the Conversation object where the door can, else
 * as the control plane sends them in `X-Polychrome-Public-Keys`); else none, and the command
 * fails rather than trusting the header.
 */

/** Where the pinned journal keys came from. */
export const JournalKeySource = {
  /** `--public-key`: the user's own word. */
  Flag: 'flag',
  /** The Conversation's `status.journal.publicKeys`, recorded by the control plane. */
  Status: 'status',
} as const;
export type JournalKeySource = (typeof JournalKeySource)[keyof typeof JournalKeySource];

/** How the status's keys reached the CLI. */
export const StatusKeysFrom = {
  /** Read from the Conversation object (the Kubernetes door: the CRD API). */
  Object: 'conversation-object',
  /** Sent by the control plane beside the export (`X-Polychrome-Public-Keys`). */
  ExportAnswer: 'export-answer',
} as const;
export type StatusKeysFrom = (typeof StatusKeysFrom)[keyof typeof StatusKeysFrom];

/** The status's keys as the CLI got them: base64 keys, comma-separated (or absent). */
export interface StatusKeys {
  readonly keys: string | undefined;
  readonly from: StatusKeysFrom;
}

/** The journal keys a command pins, and where they came from. */
export interface JournalKeyPin {
  readonly source: JournalKeySource;
  /** How the status's keys were read. */
  readonly statusFrom: StatusKeysFrom;
  readonly keys: readonly Uint8Array[];
  readonly keyIds: readonly string[];
  /** The keys the status recorded, when `--public-key` was given instead (for comparison). */
  readonly statusKeyIds: readonly string[];
}

/**
 * The pin decision: `--public-key` keys when given, else the status's keys, else none.
 *
 * @param status the status's keys: read from the Conversation object, or the
 *   `X-Polychrome-Public-Keys` value of the export answer (base64 keys, comma-separated).
 * @param sender names who sent them, for the error.
 * @returns the pin, or undefined when there is nothing to pin.
 * @throws AppError `internal` when the header does not read (a control plane newer than
 *   this CLI, or a damaged answer).
 */
export function pinJournalKeys(
  flagKeys: readonly Uint8Array[],
  status: StatusKeys,
  sender: string,
): JournalKeyPin | undefined {
  const statusKeys = status.keys === undefined ? [] : parseStatusKeys(status.keys, sender);
  const statusKeyIds = statusKeys.map(journalKeyId);
  const statusFrom = status.from;
  if (flagKeys.length > 0) {
    return {
      source: JournalKeySource.Flag,
      statusFrom,
      keys: flagKeys,
      keyIds: flagKeys.map(journalKeyId),
      statusKeyIds,
    };
  }
  if (statusKeys.length > 0) {
    return {
      source: JournalKeySource.Status,
      statusFrom,
      keys: statusKeys,
      keyIds: statusKeyIds,
      statusKeyIds,
    };
  }
  return undefined;
}

function parseStatusKeys(header: string, sender: string): Uint8Array[] {
  const parts = header.split(',').map((p) => p.trim());
  try {
    return parts.filter((p) => p !== '').map((p) => parsePublicKey(p, 'a recorded journal key'));
  } catch (error) {
    throw new AppError(
      'internal',
      `${sender} sent journal keys that do not read (${JSON.stringify(header.slice(0, 120))}): ` +
        `${error instanceof Error ? error.message : String(error)}; is the CLI older than the control plane?`,
      { cause: error },
    );
  }
}

/** What `conversation verify` and `replay` say when there is no key to pin. */
export const NO_PINNED_KEY_HELP =
  "the Conversation status records no journal key yet and no --public-key was given, so the export's own header keys would be trusted, and whoever rewrote the journal wrote that header too; " +
  "pass the state plane's key with --public-key (64 hex digits or base64), or retry after the conversation's next turn records its key";

/** The failure of a verification with nothing pinned (the header's keys were used to go on). */
export function noPinnedKey(): ExportFailure {
  return {
    position: 0,
    reason: 'no_pinned_key',
    expected: 'a journal key pinned with --public-key or recorded in status.journal.publicKeys',
    found: 'none',
    message: NO_PINNED_KEY_HELP,
  };
}

/** One line saying which journal keys were trusted and why. */
export function journalKeyLine(pin: JournalKeyPin): string {
  const ids = pin.keyIds.join(', ');
  switch (pin.source) {
    case JournalKeySource.Status:
      return (
        `journal key(s): ${ids}, pinned from the Conversation status ` +
        (pin.statusFrom === StatusKeysFrom.Object
          ? '(read from the Conversation object'
          : '(sent by the control plane with the export') +
        "; the export header's keys are not trusted)"
      );
    case JournalKeySource.Flag: {
      const differs =
        pin.statusKeyIds.length > 0 && !pin.statusKeyIds.every((id) => pin.keyIds.includes(id));
      return (
        `journal key(s): ${ids}, pinned with --public-key` +
        (pin.statusKeyIds.length === 0
          ? ''
          : differs
            ? `; NOTE: the Conversation status records ${pin.statusKeyIds.join(', ')}`
            : ' (the Conversation status records the same)')
      );
    }
  }
}

/** The JSON form of a {@link JournalKeyPin}. */
export interface JournalKeyJson {
  readonly source: JournalKeySource;
  readonly statusFrom: StatusKeysFrom;
  readonly keyIds: readonly string[];
  readonly statusKeyIds: readonly string[];
}

export function journalKeyJson(pin: JournalKeyPin): JournalKeyJson {
  return {
    source: pin.source,
    statusFrom: pin.statusFrom,
    keyIds: pin.keyIds,
    statusKeyIds: pin.statusKeyIds,
  };
}
