import type { JournalEntry } from '../../common/state-journal';
import type { FollowJournal } from './journal-feed';

/**
 * What the follower needs of StateClient: `read` with `follow: true`, which keeps the
 * stream open and delivers each newly committed event, and ends with an `unavailable`
 * StateCallError when the state plane shuts down.
 */
export interface FollowingJournalReader {
  read(
    partition: string,
    fromPosition: number,
    limit: number,
    options: { readonly signal?: AbortSignal; readonly follow?: boolean },
  ): AsyncIterable<JournalEntry>;
}

/**
 * The streams' journal follow over the state plane (StateClient). `limit` 0: no end but
 * the signal or the server's. With `options.limit` (a stream catching up): a plain read
 * of at most that many events, ending at the head.
 */
export function stateJournalFollower(state: FollowingJournalReader): FollowJournal {
  return (partition, fromPosition, signal, options) =>
    options?.limit === undefined
      ? state.read(partition, fromPosition, 0, { signal, follow: true })
      : state.read(partition, fromPosition, Math.max(1, options.limit), { signal, follow: false });
}
