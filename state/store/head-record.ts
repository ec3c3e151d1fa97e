import { AppError } from '../../common/errors';
import { fromHex, toHex } from '../journal/hex';
import { popcount } from '../journal/mmr-layout';
import { DIGEST_BYTES } from '../journal/sha256';
import { writeU64 } from '../journal/u64';
import { readU64 } from './store-keys';

/**
 * A partition's head record, rewritten by every batch in the same atomic write as the
 * events it covers. Bytes:
 *
 *     u8 version (1) ‖ u64 head ‖ 16-byte genesis key id ‖ u8 peak count ‖ peaks (32 each)
 *
 * - `head`: the next position (the number of events, all acknowledged once the write is
 *   durable); the event at head − 1 is always a `signed_root`.
 * - `genesisKeyId`: the key that signed the partition's first root; `verify` trusts it
 *   from position 0 unless the caller names its own keys.
 * - `peaks`: the MMR frontier over `head` leaves, leftmost first (popcount(head) digests).
 *   They duplicate the nodes at the peak positions on purpose: open() checks that both
 *   agree and that they hash to the last signed root.
 */
export interface HeadRecord {
  readonly head: number;
  readonly genesisKeyId: string;
  readonly peaks: readonly Uint8Array[];
}

const VERSION = 1;
const KEY_ID_BYTES = 16;
const FIXED_BYTES = 1 + 8 + KEY_ID_BYTES + 1;

/**
 * The stored bytes of `record`.
 *
 * @throws AppError `invalid_argument` when the genesis key id is not 32 hex digits.
 */
export function encodeHeadRecord(record: HeadRecord): Uint8Array {
  const out = new Uint8Array(FIXED_BYTES + DIGEST_BYTES * record.peaks.length);
  out[0] = VERSION;
  writeU64(out, 1, record.head);
  out.set(fromHex(record.genesisKeyId, 'genesis key id'), 9);
  out[9 + KEY_ID_BYTES] = record.peaks.length;
  record.peaks.forEach((peak, i) => out.set(peak, FIXED_BYTES + DIGEST_BYTES * i));
  return out;
}

/**
 * Parses a stored head record.
 *
 * @throws AppError `data_loss` when the bytes are not a version-1 record whose peak count
 *   matches its head.
 */
export function decodeHeadRecord(bytes: Uint8Array, partition: string): HeadRecord {
  const bad = (why: string): AppError =>
    new AppError(
      'data_loss',
      `${partition}: the head record is damaged (${why}); the partition is refused until it ` +
        'is restored from a backup',
      { details: { partition } },
    );
  if (bytes.length < FIXED_BYTES || bytes[0] !== VERSION) {
    throw bad(`${String(bytes.length)} bytes, version ${String(bytes[0])}`);
  }
  const head = readU64(bytes, 1);
  const count = bytes[9 + KEY_ID_BYTES] ?? 0;
  if (count !== popcount(head) || bytes.length !== FIXED_BYTES + DIGEST_BYTES * count) {
    throw bad(`head ${String(head)} with ${String(count)} peaks in ${String(bytes.length)} bytes`);
  }
  const peaks: Uint8Array[] = [];
  for (let i = 0; i < count; i++) {
    const at = FIXED_BYTES + DIGEST_BYTES * i;
    peaks.push(bytes.slice(at, at + DIGEST_BYTES));
  }
  return { head, genesisKeyId: toHex(bytes.subarray(9, 9 + KEY_ID_BYTES)), peaks };
}
