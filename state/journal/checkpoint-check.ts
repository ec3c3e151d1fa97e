import { decodePayload, EventKind } from '../../common/event-kinds';
import { bytesEqual, toHex } from './hex';
import {
  VerifyFailureReason,
  type FailedStep,
  type JournalCheckpoint,
  type JournalEvent,
  type VerifyFailure,
} from './verification-types';

/*
 * A journal against a trusted checkpoint kept outside it (docs/state-plane.md,
 * "Checkpoints"): truncation and rollback, which signed roots alone cannot show.
 */

/**
 * Checks the entry at `checkpoint.head − 1`: it must be a `signed_root` (by the
 * checkpoint's key, when it names one), and the leaves before it must hash to the
 * checkpoint's root. `found` is the root replay recomputed over those leaves.
 */
export function checkpointFailure(
  event: JournalEvent,
  checkpoint: JournalCheckpoint,
  found: Uint8Array,
): VerifyFailure | undefined {
  let keyId: string | undefined;
  if (event.kind === EventKind.SignedRoot && event.excisedLeaf === undefined) {
    try {
      keyId = decodePayload(EventKind.SignedRoot, event.payload).keyId;
    } catch {
      keyId = undefined;
    }
  }
  const rootMatches = bytesEqual(found, checkpoint.root);
  const keyMatches = checkpoint.keyId === undefined || checkpoint.keyId === keyId;
  if (event.kind === EventKind.SignedRoot && rootMatches && keyMatches) return undefined;
  const position = event.position;
  return {
    position,
    kind: event.kind,
    reason: VerifyFailureReason.RolledBack,
    expected: toHex(checkpoint.root),
    found: toHex(found),
    message:
      `truncated or rolled back: the checkpoint says the journal had ${String(checkpoint.head)} entries, ` +
      `the last a signed_root over root ${toHex(checkpoint.root)}` +
      (checkpoint.keyId === undefined ? '' : ` by key ${checkpoint.keyId}`) +
      `; this journal's first ${String(position)} leaves hash to ${toHex(found)}` +
      (event.kind === EventKind.SignedRoot
        ? keyMatches
          ? ''
          : ` and its root there is signed by ${keyId ?? 'an unreadable key id'}`
        : ` and entry ${String(position)} is a ${event.kind || 'damaged entry'}, not a signed_root`) +
      ': the journal was rewritten or rolled back after the checkpoint was taken (or the checkpoint ' +
      'is wrong: N is the head, the number of entries, and ROOT the last signed root)',
  };
}

/** The failure of a journal of `leafCount` entries, fewer than the checkpoint's head. */
export function truncatedBeforeCheckpoint(
  checkpoint: JournalCheckpoint,
  leafCount: number,
): FailedStep {
  return {
    type: 'failed',
    failure: {
      position: leafCount,
      kind: '',
      reason: VerifyFailureReason.RolledBack,
      expected: toHex(checkpoint.root),
      found: '',
      message:
        `truncated or rolled back: the checkpoint says the journal had ${String(checkpoint.head)} ` +
        `entries (last signed root ${toHex(checkpoint.root)}), but it has ${String(leafCount)}; ` +
        `entries from ${String(leafCount)} on were cut off or rolled back: restore them from a backup`,
    },
  };
}
