import type {
  ExportItem as ExportItemProto,
  JournalEvent as JournalEventProto,
} from '../proto/gen/polychrome/state/v1/state';
import type { SignedRoot as SignedRootProto } from '../proto/gen/polychrome/events/v1/events';
import type { ExportEntry, JournalEntry, SignedRootInfo } from './state-journal';

/* The Journal service's proto messages as the values of common/state-journal.ts. */

/** A signed root and its event's position; `undefined` when the answer carries none. */
export function signedRootFromProto(
  proto: SignedRootProto | undefined,
  position: number,
): SignedRootInfo | undefined {
  if (proto === undefined) return undefined;
  return {
    position,
    leafCount: proto.leafCount,
    root: new Uint8Array(proto.root),
    keyId: proto.keyId,
    signature: new Uint8Array(proto.signature),
    version: proto.version === 2 ? 2 : 1,
    partition: proto.partition,
  };
}

/** One stored event; an excised entry keeps only its leaf digest. */
export function entryFromProto(proto: JournalEventProto): JournalEntry {
  const entry = {
    position: proto.position,
    kind: proto.kind,
    payload: new Uint8Array(proto.payload),
  };
  return proto.excised
    ? { ...entry, excised: true, leafDigest: new Uint8Array(proto.leafDigest) }
    : entry;
}

/** One export item; `undefined` for an empty item (skipped). */
export function exportEntryFromProto(proto: ExportItemProto): ExportEntry | undefined {
  const item = proto.item;
  if (item === undefined) return undefined;
  switch (item.$case) {
    case 'publicKey':
      return {
        type: 'public_key',
        keyId: item.value.keyId,
        publicKey: new Uint8Array(item.value.publicKey),
      };
    case 'event':
      return { type: 'event', event: entryFromProto(item.value) };
  }
}
