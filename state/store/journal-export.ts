/**
 * A partition's export (state/store/README.md, "Export"): everything stored, as typed
 * records (a header with what the store claims, then each stored event in order), and
 * the store's NDJSON file format, which serializes those records once, at the edge. The
 * state server sends the typed records as gRPC messages; nothing parses the NDJSON back.
 */
import { AppError } from '../../common/errors';
import { toHex } from '../journal/hex';
import type { JournalEvent } from '../journal/verification-types';
import type { KvStore } from './level-kv';
import type { PartitionState } from './recover-partition';
import { decodeEventValue, positionOfKey, positionRange, RecordTag } from './store-keys';

/** First line of the store's NDJSON export. */
export const EXPORT_FORMAT = 'polychrome-journal-export/v1';

/** The first record of an export: what the store claims about the partition. */
export interface StoreExportHeader {
  readonly type: 'header';
  readonly partition: string;
  /** The head; `undefined` for a refused partition. */
  readonly head: number | undefined;
  /** The last signed root; a verifier checks it against a checkpoint kept elsewhere. */
  readonly checkpoint:
    { readonly head: number; readonly root: Uint8Array; readonly keyId: string } | undefined;
}

/** A stored event, in position order; an excised entry has `excisedLeaf`. */
export interface StoreExportEvent {
  readonly type: 'event';
  readonly event: JournalEvent;
}

/** One record of an export: the header first, then the events. */
export type StoreExportRecord = StoreExportHeader | StoreExportEvent;

/**
 * The export of `partition` as typed records: the header (`state` undefined: a refused
 * partition, so no head and no checkpoint), then every stored event below the head (every
 * stored event for a refused partition).
 *
 * @throws AppError `cancelled` when `signal` fires; `data_loss` for a damaged record.
 */
export async function* exportRecords(
  kv: KvStore,
  partition: string,
  state: PartitionState | undefined,
  signal: AbortSignal | undefined,
): AsyncGenerator<StoreExportRecord> {
  yield {
    type: 'header',
    partition,
    head: state?.head,
    checkpoint:
      state === undefined
        ? undefined
        : { head: state.head, root: state.lastRoot.root, keyId: state.lastRoot.keyId },
  };
  for await (const [key, value] of kv.entries(
    positionRange(partition, RecordTag.Event, 0, state?.head),
  )) {
    if (signal?.aborted === true) {
      throw new AppError('cancelled', `exporting ${partition} was cancelled`, {
        cause: signal.reason,
      });
    }
    const position = positionOfKey(key);
    yield { type: 'event', event: { position, ...decodeEventValue(value, partition, position) } };
  }
}

/**
 * One line of the store's NDJSON export (with its newline): the header
 * `{"format":"polychrome-journal-export/v1","partition":…,"head":…,"checkpoint":…}`
 * (`head` and `checkpoint` null for a refused partition), an event
 * `{"position":…,"kind":…,"payloadHex":…}`, an excised entry
 * `{"position":…,"excised":true,"leafHex":…}`.
 */
export function formatExportRecord(record: StoreExportRecord): string {
  if (record.type === 'header') {
    const { checkpoint } = record;
    return `${JSON.stringify({
      format: EXPORT_FORMAT,
      partition: record.partition,
      head: record.head ?? null,
      checkpoint:
        checkpoint === undefined
          ? null
          : { head: checkpoint.head, rootHex: toHex(checkpoint.root), keyId: checkpoint.keyId },
    })}\n`;
  }
  const { position, kind, payload, excisedLeaf } = record.event;
  return `${JSON.stringify(
    excisedLeaf === undefined
      ? { position, kind, payloadHex: toHex(payload) }
      : { position, excised: true, leafHex: toHex(excisedLeaf) },
  )}\n`;
}

/** `records` as NDJSON, one UTF-8 chunk per line. */
export async function* exportNdjson(
  records: AsyncIterable<StoreExportRecord>,
): AsyncGenerator<Uint8Array> {
  const utf8 = new TextEncoder();
  for await (const record of records) yield utf8.encode(formatExportRecord(record));
}
