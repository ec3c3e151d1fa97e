/**
 * Reads a range of a partition's acknowledged events from the store's LevelDB handle, in
 * order, in small chunks (a slow consumer is backpressure).
 */
import { AppError } from '../../common/errors';
import type { JournalEvent } from '../journal/verification-types';
import type { KvStore } from './level-kv';
import { decodeEventValue, positionOfKey, positionRange, RecordTag } from './store-keys';

/**
 * The events of `partition` at `[fromPosition, fromPosition + limit)`, stopping at `head`
 * (the head as the read started).
 *
 * @throws AppError `failed_precondition` when `fromPosition` is beyond `head`; `data_loss`
 *   for a missing or damaged event; `cancelled` when `signal` fires.
 */
export async function* readEvents(
  kv: KvStore,
  partition: string,
  head: number,
  fromPosition: number,
  limit: number,
  signal: AbortSignal | undefined,
): AsyncGenerator<JournalEvent> {
  if (fromPosition > head) {
    throw new AppError(
      'failed_precondition',
      `${partition}: position ${String(fromPosition)} is beyond the head ${String(head)}`,
      { details: { partition, fromPosition, head } },
    );
  }
  const to = Math.min(head, fromPosition + limit);
  if (to <= fromPosition) return;
  let expected = fromPosition;
  for await (const [key, value] of kv.entries(
    positionRange(partition, RecordTag.Event, fromPosition, to),
  )) {
    if (signal?.aborted === true) {
      throw new AppError('cancelled', `reading ${partition} was cancelled`, {
        cause: signal.reason,
      });
    }
    const position = positionOfKey(key);
    if (position !== expected) break;
    yield { position, ...decodeEventValue(value, partition, position) };
    expected += 1;
  }
  if (expected !== to) {
    throw new AppError(
      'data_loss',
      `${partition}: acknowledged event ${String(expected)} is missing from the store; run verify ` +
        'and restore the partition from a backup',
      { details: { partition, position: expected } },
    );
  }
}
