import { AppError } from '../../common/errors';
import { writeU64 } from '../journal/u64';

/*
 * Key layout. One LevelDB database holds every partition; keys are raw bytes compared
 * bytewise, so big-endian positions make a range read return events in position order.
 *
 *   'M' "format"                           → UTF-8 STORE_FORMAT (checked on open)
 *   'P' ‖ name ‖ 0x00 ‖ 'e' ‖ u64 position → event: u8 len(kind) ‖ kind ‖ payload, or,
 *                                            once repair excised it, 0x00 ‖ the kept
 *                                            32-byte leaf digest (no kind is empty)
 *   'P' ‖ name ‖ 0x00 ‖ 'f'                → u64: the highest fencing token an append to
 *                                            the partition was accepted with (absent: 0),
 *                                            written in the batch that raised it
 *   'P' ‖ name ‖ 0x00 ‖ 'h'                → head record (head-record.ts)
 *   'P' ‖ name ‖ 0x00 ‖ 'n' ‖ u64 node     → 32-byte MMR node digest, as CompactMmr's
 *                                            visitor reported it (serves inclusion proofs)
 *   'R' ‖ name                             → a retired partition's retirement
 *                                            (retired-partitions.ts): written in the one
 *                                            batch that deletes every 'P' ‖ name ‖ 0x00 key
 *
 * A partition name never holds 0x00 (common/partition-name.ts), so `'P' ‖ name ‖ 0x00` is a
 * prefix of that partition's keys only ("conv-a" and "conv-ab" cannot overlap), and
 * `'P' ‖ name ‖ 0x01` is the first key after the partition: open() skips from one
 * partition to the next with a single seek. Tags sort 'e' < 'f' < 'h' < 'n'; the event
 * range ends before `'P' ‖ name ‖ 0x00 ‖ 'f'` (exclusive), so it never holds the fence.
 */

/** Written once into an empty database and checked on every open. */
export const STORE_FORMAT = 'polychrome-journal-store/v1';

const utf8 = new TextEncoder();
const utf8Decoder = new TextDecoder('utf-8', { fatal: true });
const TWO_32 = 2 ** 32;

const PARTITION_TAG = 0x50; // 'P'
const META_TAG = 0x4d; // 'M'
const RETIRED_TAG = 0x52; // 'R'
const END_OF_NAME = 0x00;
/** Per-partition record tags. */
export const RecordTag = {
  Event: 0x65, // 'e'
  Fence: 0x66, // 'f'
  Head: 0x68, // 'h'
  Node: 0x6e, // 'n'
} as const;
export type RecordTag = (typeof RecordTag)[keyof typeof RecordTag];

/** The key of the store's format marker. */
export const FORMAT_KEY: Uint8Array = Uint8Array.from([META_TAG, ...utf8.encode('format')]);

/** First key of the partition section, and the first key after it. */
export const ALL_PARTITIONS = {
  gte: Uint8Array.of(PARTITION_TAG),
  lt: Uint8Array.of(PARTITION_TAG + 1),
} as const;

/** First key of the retired-partitions section, and the first key after it. */
export const ALL_RETIRED = {
  gte: Uint8Array.of(RETIRED_TAG),
  lt: Uint8Array.of(RETIRED_TAG + 1),
} as const;

/** Key of a retired partition's retirement. */
export function retiredKey(partition: string): Uint8Array {
  return Uint8Array.from([RETIRED_TAG, ...utf8.encode(partition)]);
}

/** The partition a retirement key names, or `undefined` for another key. */
export function partitionOfRetiredKey(key: Uint8Array): string | undefined {
  if (key[0] !== RETIRED_TAG || key.length < 2) return undefined;
  try {
    return utf8Decoder.decode(key.subarray(1));
  } catch {
    return undefined;
  }
}

function prefix(partition: string, extra: number): Uint8Array {
  const name = utf8.encode(partition);
  const out = new Uint8Array(2 + name.length + extra);
  out[0] = PARTITION_TAG;
  out.set(name, 1);
  out[1 + name.length] = END_OF_NAME;
  return out;
}

function tagged(partition: string, tag: number, position?: number): Uint8Array {
  const out = prefix(partition, position === undefined ? 1 : 9);
  const at = out.length - (position === undefined ? 1 : 9);
  out[at] = tag;
  if (position !== undefined) writeU64(out, at + 1, position);
  return out;
}

/** Key of the event at `position`. */
export function eventKey(partition: string, position: number): Uint8Array {
  return tagged(partition, RecordTag.Event, position);
}

/** Key of the MMR node at node position `position`. */
export function nodeKey(partition: string, position: number): Uint8Array {
  return tagged(partition, RecordTag.Node, position);
}

/** Key of the partition's head record. */
export function headKey(partition: string): Uint8Array {
  return tagged(partition, RecordTag.Head);
}

/** Key of the partition's fencing mark (the highest fencing token accepted). */
export function fenceKey(partition: string): Uint8Array {
  return tagged(partition, RecordTag.Fence);
}

/** The stored form of a fencing mark: u64 big-endian. */
export function encodeFence(token: number): Uint8Array {
  const out = new Uint8Array(8);
  writeU64(out, 0, token);
  return out;
}

/**
 * Parses a stored fencing mark.
 *
 * @throws AppError `data_loss` when the value is not exactly one u64.
 */
export function decodeFence(value: Uint8Array, partition: string): number {
  if (value.length !== 8) {
    throw new AppError(
      'data_loss',
      `${partition}: the stored fencing mark is ${String(value.length)} bytes, not 8; the partition ` +
        'is refused until it is restored from a backup',
      { details: { partition } },
    );
  }
  return readU64(value, 0);
}

/** Key range of the events (or nodes) at positions `[from, to)`; `to` omitted = to the end. */
export function positionRange(
  partition: string,
  tag: typeof RecordTag.Event | typeof RecordTag.Node,
  from = 0,
  to?: number,
): { gte: Uint8Array; lt: Uint8Array } {
  return {
    gte: tagged(partition, tag, from),
    lt: to === undefined ? tagged(partition, tag + 1) : tagged(partition, tag, to),
  };
}

/** Every key of one partition. */
export function partitionRange(partition: string): { gte: Uint8Array; lt: Uint8Array } {
  const gte = prefix(partition, 0);
  const lt = gte.slice();
  lt[lt.length - 1] = END_OF_NAME + 1;
  return { gte, lt };
}

/**
 * The partition name a key belongs to, or `undefined` for a key outside the partition
 * section or without the end-of-name byte.
 */
export function partitionOfKey(key: Uint8Array): string | undefined {
  if (key[0] !== PARTITION_TAG) return undefined;
  const end = key.indexOf(END_OF_NAME, 1);
  if (end < 0) return undefined;
  try {
    return utf8Decoder.decode(key.subarray(1, end));
  } catch {
    return undefined;
  }
}

/** The u64 big-endian position at the end of an event or node key. */
export function positionOfKey(key: Uint8Array): number {
  return readU64(key, key.length - 8);
}

/**
 * Reads 8 bytes at `offset` as an unsigned big-endian integer.
 *
 * @throws AppError `data_loss` when the bytes are missing or the value is 2^53 or more
 *   (no journal this store wrote holds such a value).
 */
export function readU64(bytes: Uint8Array, offset: number): number {
  if (offset < 0 || bytes.length < offset + 8) {
    throw new AppError(
      'data_loss',
      `a stored record is truncated: no u64 at byte ${String(offset)}`,
    );
  }
  let hi = 0;
  let lo = 0;
  for (let i = 0; i < 4; i++) {
    hi = hi * 256 + (bytes[offset + i] ?? 0);
    lo = lo * 256 + (bytes[offset + 4 + i] ?? 0);
  }
  const value = hi * TWO_32 + lo;
  if (!Number.isSafeInteger(value)) {
    throw new AppError('data_loss', `a stored u64 at byte ${String(offset)} is 2^53 or more`);
  }
  return value;
}

/** Length of an excised entry's stored value: 0x00 ‖ 32-byte leaf digest. */
const EXCISED_VALUE_BYTES = 1 + 32;

/**
 * The stored form of an excised entry: 0x00 (an empty kind, which no event has) ‖ the
 * leaf digest it keeps, so every root over it still verifies.
 */
export function encodeExcisedValue(leaf: Uint8Array): Uint8Array {
  const out = new Uint8Array(EXCISED_VALUE_BYTES);
  out.set(leaf, 1);
  return out;
}

/** The stored form of an event: u8 len(kind) ‖ kind (UTF-8) ‖ payload. */
export function encodeEventValue(kindBytes: Uint8Array, payload: Uint8Array): Uint8Array {
  const out = new Uint8Array(1 + kindBytes.length + payload.length);
  out[0] = kindBytes.length;
  out.set(kindBytes, 1);
  out.set(payload, 1 + kindBytes.length);
  return out;
}

/**
 * Splits a stored event value into kind and payload (the payload is a view, not a copy).
 * An excised entry comes back with an empty kind and payload and its kept `excisedLeaf`.
 *
 * @throws AppError `data_loss` when the value is shorter than its kind length says.
 */
export function decodeEventValue(
  value: Uint8Array,
  partition: string,
  position: number,
): { kind: string; payload: Uint8Array; excisedLeaf?: Uint8Array } {
  const kindLength = value[0];
  if (kindLength === 0 && value.length === EXCISED_VALUE_BYTES) {
    return { kind: '', payload: new Uint8Array(0), excisedLeaf: value.subarray(1) };
  }
  if (kindLength === undefined || value.length < 1 + kindLength) {
    throw new AppError(
      'data_loss',
      `${partition}: the stored event at ${String(position)} is truncated (${String(value.length)} bytes); ` +
        'run verify and restore the partition from a backup',
      { details: { partition, position } },
    );
  }
  let kind: string;
  try {
    kind = utf8Decoder.decode(value.subarray(1, 1 + kindLength));
  } catch (cause) {
    throw new AppError(
      'data_loss',
      `${partition}: the stored event at ${String(position)} has a kind that is not UTF-8`,
      { details: { partition, position }, cause },
    );
  }
  return { kind, payload: value.subarray(1 + kindLength) };
}
