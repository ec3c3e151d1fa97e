/**
 * The rollback rule (docs/turns.md, "A rolled-back journal"): before the control plane
 * appends to a journal it has not read under its current lease, the state plane's journal
 * must still hold the checkpoint the Conversation's status recorded (`status.journal`: a
 * head and the signed root that ended it). A journal that is shorter, or whose entry at
 * `head - 1` is not that signed root, was rolled back or rewritten (a state volume restored
 * from an older copy, say): appending to it would overwrite the lost turns' positions and
 * move the checkpoint past the evidence. Pure: the caller reads the journal.
 */
import { AppError } from '../../common/errors';
import type { Conversation } from '../api/v1alpha1/conversation-types';
import type { JournalRollback } from '../api/v1alpha1/conversation-status';
import { rollbackMessage } from '../controller/conversation-conditions';
import type { LostCheckpoint } from './journal-view-types';

/** `status.journal` as the check reads it. */
export interface JournalCheckpoint {
  /** Entries the journal had: [0, head). */
  readonly head: number;
  /** The signed root the entry at `head - 1` carries, lowercase hex. */
  readonly lastSignedRoot: string;
  readonly keyId: string;
}

/** The checkpoint `status.journal` records, if it records one. */
export function checkpointOf(conversation: Conversation): JournalCheckpoint | undefined {
  const journal = conversation.status?.journal;
  if (journal?.head === undefined || journal.lastSignedRoot === undefined) return undefined;
  return { head: journal.head, lastSignedRoot: journal.lastSignedRoot, keyId: journal.keyId ?? '' };
}

/**
 * True when the journal records that an admin accepted `checkpoint` as lost (a sealed
 * `rollback_accepted` naming its head and root, in `losses`): the status that still names
 * it lags the journal, because the status write after the decision was lost with the
 * replica that made it, or this replica's cache predates it. Such a checkpoint is not held
 * against the journal; the status catches up instead. Only the exact head and root count,
 * so an older decision never excuses a later loss.
 */
export function acceptedAsLost(
  checkpoint: JournalCheckpoint | undefined,
  losses: readonly LostCheckpoint[],
): boolean {
  return (
    checkpoint !== undefined &&
    losses.some((lost) => lost.head === checkpoint.head && lost.root === checkpoint.lastSignedRoot)
  );
}

/** The journal's entry at `checkpoint.head - 1`, as far as the check needs it. */
export type EntryAtCheckpoint =
  | { readonly kind: 'signed_root'; readonly root: string; readonly keyId: string }
  /** Another kind, or an entry repair excised (its root cannot be read). */
  | { readonly kind: 'other'; readonly eventKind: string };

/** What {@link checkJournal} found. */
export type CheckpointVerdict =
  | { readonly kind: 'holds' }
  | { readonly kind: 'rolled_back'; readonly rollback: Omit<JournalRollback, 'since'> };

/**
 * Whether a journal of `journalHead` entries, whose entry at `checkpoint.head - 1` is
 * `entry` (undefined when the journal is shorter than the checkpoint), still holds the
 * checkpoint. No checkpoint, or one at head 0 (an empty journal), always holds.
 */
export function checkJournal(
  checkpoint: JournalCheckpoint | undefined,
  journalHead: number,
  entry: EntryAtCheckpoint | undefined,
): CheckpointVerdict {
  if (checkpoint === undefined || checkpoint.head === 0) return { kind: 'holds' };
  const recorded = {
    checkpointHead: checkpoint.head,
    checkpointRoot: checkpoint.lastSignedRoot,
    journalHead,
  };
  if (journalHead < checkpoint.head || entry === undefined) {
    return { kind: 'rolled_back', rollback: recorded };
  }
  if (entry.kind !== 'signed_root') return { kind: 'rolled_back', rollback: recorded };
  const keyMatches = checkpoint.keyId === '' || entry.keyId === checkpoint.keyId;
  if (entry.root === checkpoint.lastSignedRoot && keyMatches) return { kind: 'holds' };
  return { kind: 'rolled_back', rollback: { ...recorded, journalRoot: entry.root } };
}

/**
 * What an append to a rolled-back journal is refused with: `failed_precondition` (HTTP
 * 412), naming both heads and what to do. Nothing was appended.
 */
export class JournalRolledBackError extends AppError {
  override readonly name: string = 'JournalRolledBackError';

  constructor(
    readonly conversationId: string,
    readonly rollback: Omit<JournalRollback, 'since'>,
  ) {
    super('failed_precondition', rollbackMessage(conversationId, rollback), {
      details: {
        reason: 'journal_rolled_back',
        conversationId,
        checkpointHead: rollback.checkpointHead,
        journalHead: rollback.journalHead,
      },
    });
  }
}
