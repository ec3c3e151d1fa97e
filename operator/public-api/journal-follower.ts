import type { JournalEntry } from '../../common/state-client';
import type { FollowJournal } from './event-stream';

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
 * the signal or the server's.
 */
export function stateJournalFollower(state: FollowingJournalReader): FollowJournal {
  return (partition, fromPosition, signal) =>
    state.read(partition, fromPosition, 0, { signal, follow: true });
}
