import { decodePayload, EventKind } from '../../common/event-kinds';
import { bytesEqual, toHex } from './hex';
import { DIGEST_BYTES } from './sha256';
import {
  unparsableFailure,
  VerifyFailureReason,
  type FailedStep,
  type JournalEvent,
  type VerifyFailure,
} from './verification-types';

/*
 * Excised entries (docs/journal-format.md, "Excision"): each must be recorded, with the
 * leaf digest it keeps, by a sealed `excision` event.
 */

/** An `excision` event's record: the entry it excised, where it stands, the kept digest. */
export interface ExcisionRecord {
  readonly position: number;
  /** The position of the `excision` event. */
  readonly at: number;
  readonly leaf: Uint8Array;
  /** An erasure (an admin asked), not a repair of an unreadable entry. */
  readonly erased: boolean;
}

/** Reads an `excision` event: its record, or the failure of a payload that does not parse. */
export function readExcisionRecord(event: JournalEvent): ExcisionRecord | VerifyFailure {
  let fields: { position: number; leafDigest: Uint8Array; erased: boolean };
  try {
    fields = decodePayload(EventKind.Excision, event.payload);
  } catch {
    return unparsableFailure(event.position, EventKind.Excision, '');
  }
  if (fields.leafDigest.length !== DIGEST_BYTES || fields.position >= event.position) {
    return unparsableFailure(event.position, EventKind.Excision, '');
  }
  return {
    position: fields.position,
    at: event.position,
    leaf: new Uint8Array(fields.leafDigest),
    erased: fields.erased,
  };
}

/**
 * The first excised entry no record counts for. An excision counts only when an
 * `excision` event after it, before the last `signed_root` (so a root covers the record),
 * names it with the same kept digest.
 *
 * @param excised excised positions, in order, with their kept digests in `excisedLeaves`.
 */
export function firstUnrecordedExcision(
  excised: readonly number[],
  excisedLeaves: ReadonlyMap<number, Uint8Array>,
  records: ReadonlyMap<number, { readonly at: number; readonly leaf: Uint8Array }>,
  lastSignedRoot: number,
): FailedStep | undefined {
  for (const position of excised) {
    const leaf = excisedLeaves.get(position);
    const record = records.get(position);
    if (
      leaf !== undefined &&
      record !== undefined &&
      record.at < lastSignedRoot &&
      bytesEqual(record.leaf, leaf)
    ) {
      continue;
    }
    return {
      type: 'failed',
      failure: {
        position,
        kind: '',
        reason: VerifyFailureReason.UnrecordedExcision,
        expected: leaf === undefined ? '' : toHex(leaf),
        found: record === undefined ? '' : toHex(record.leaf),
        message:
          `the entry at ${String(position)} is excised, but no sealed excision event records it ` +
          (record === undefined
            ? ''
            : `with that leaf digest (the record at ${String(record.at)} names ${toHex(record.leaf)}) `) +
          "before a signed_root; only the state plane's repair and erasure excise entries, so the journal was " +
          'edited: restore it from a backup',
      },
    };
  }
  return undefined;
}
