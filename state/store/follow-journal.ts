import type { JournalEvent } from '../journal/verification-types';
import type { JournalStore } from './journal-store';

/**
 * Most events one store read of a follower takes before it starts a new one: a follower
 * that keeps up holds no LevelDB snapshot for long, whatever the stream's length.
 */
export const FOLLOW_CHUNK_EVENTS = 256;

/**
 * A live tail of `partition`: its events from `fromPosition` to the head, then each batch
 * as it becomes durable, until `limit` events were yielded (0: no limit) or `signal`
 * aborts (then it throws the signal's reason). Nothing is buffered: the follower remembers
 * only `next`, the position to yield next, and reads `[next, head)` from the store by
 * position range, so one that falls behind (its consumer is slow) costs no memory and
 * catches up from the store. Subscribing before the first read is what rules out a gap:
 * a batch committed before a read started is within that read's head, and one committed
 * later is reported to the listener.
 *
 * @throws AppError as {@link JournalStore.read} does; the signal's reason once it aborts.
 */
export async function* followJournal(
  store: Pick<JournalStore, 'read' | 'subscribe'>,
  partition: string,
  fromPosition: number,
  limit: number,
  signal: AbortSignal,
): AsyncGenerator<JournalEvent> {
  let next = fromPosition;
  let remaining = limit === 0 ? Number.POSITIVE_INFINITY : limit;
  /** The highest head a commit reported; the listener never touches events. */
  let reportedHead = 0;
  let wake: (() => void) | undefined;
  const rouse = (): void => {
    const resolve = wake;
    wake = undefined;
    resolve?.();
  };
  const unsubscribe = store.subscribe(partition, (head) => {
    reportedHead = Math.max(reportedHead, head);
    rouse();
  });
  signal.addEventListener('abort', rouse);
  try {
    for (;;) {
      const chunk = Math.min(remaining, FOLLOW_CHUNK_EVENTS);
      let read = 0;
      for await (const event of store.read(partition, next, chunk, { signal })) {
        // Positions are dense and the range starts at `next`; never yield one twice.
        if (event.position < next) continue;
        yield event;
        next = event.position + 1;
        read += 1;
        remaining -= 1;
      }
      if (remaining === 0) return;
      // A short read stopped at the head as of its start: wait for a later head. A full
      // chunk may have stopped below the head: read on at once.
      if (read < chunk) {
        while (reportedHead <= next && !signal.aborted) {
          await new Promise<void>((resolve) => {
            wake = resolve;
          });
        }
      }
      if (signal.aborted) throw signal.reason;
    }
  } finally {
    signal.removeEventListener('abort', rouse);
    unsubscribe();
  }
}
