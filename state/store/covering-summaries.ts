/**
 * The summaries an erasure takes with it (docs/turns.md, "Summaries"; docs/state-plane.md,
 * "Erasure"): a `summary` holds what the turns it covers said, so erasing a message or an
 * answer (journal-erase.ts names the kinds) also erases every summary that may hold it. A summary covers the entries from its
 * `from_position` up to itself (a summary that extends another keeps that one's
 * `from_position`, so every summary built on one that covers an entry covers it too). That
 * is a superset of the turns it summarized: a summary erased too many is made again from
 * what remains.
 */
import { decodePayload, EventKind } from '../../common/event-kinds';
import type { KvStore } from './level-kv';
import { readAhead } from './read-ahead';
import { decodeEventValue, positionOfKey, positionRange, RecordTag } from './store-keys';

/**
 * The positions of the readable summaries in `[0, head)` of `partition` that cover one of
 * `positions` and are not among them, ascending. A summary that does not decode is left to
 * the erasure's own checks (it cannot cover anything it can show).
 */
export async function coveringSummaries(
  kv: KvStore,
  partition: string,
  head: number,
  positions: readonly number[],
): Promise<number[]> {
  const named = new Set(positions);
  const first = Math.min(...positions);
  const found: number[] = [];
  const range = positionRange(partition, RecordTag.Event, first + 1, head);
  for await (const entries of readAhead(kv.entries(range))) {
    for (const [key, value] of entries) {
      const position = positionOfKey(key);
      if (named.has(position)) continue;
      const entry = decodeEventValue(value, partition, position);
      if (entry.excisedLeaf !== undefined || entry.kind !== EventKind.Summary) continue;
      let from: number;
      try {
        from = decodePayload(EventKind.Summary, entry.payload).fromPosition;
      } catch {
        continue;
      }
      if (positions.some((p) => p >= from && p < position)) found.push(position);
    }
  }
  return found;
}
