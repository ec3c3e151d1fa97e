import { describe, expect, it } from '@jest/globals';
import type { JournalEntry } from '../../common/state-journal';
import { stateJournalFollower, type FollowingJournalReader } from './journal-follower';

describe('stateJournalFollower', () => {
  it('reads the partition from the position with follow: true, no limit and the signal', async () => {
    const calls: unknown[][] = [];
    const entries: JournalEntry[] = [
      { position: 4, kind: 'signed_root', payload: new Uint8Array() },
    ];
    const reader: FollowingJournalReader = {
      read(...args) {
        calls.push(args);
        return (async function* () {
          yield* await Promise.resolve(entries);
        })();
      },
    };
    const signal = new AbortController().signal;
    const got: JournalEntry[] = [];
    for await (const entry of stateJournalFollower(reader)('conv-1', 4, signal)) got.push(entry);
    expect(got).toEqual(entries);
    expect(calls).toEqual([['conv-1', 4, 0, { signal, follow: true }]]);
  });

  it('with a limit (a catch-up), reads at most that many without follow', async () => {
    const calls: unknown[][] = [];
    const reader: FollowingJournalReader = {
      read(...args) {
        calls.push(args);
        return (async function* () {
          yield* await Promise.resolve([]);
        })();
      },
    };
    const signal = new AbortController().signal;
    for await (const entry of stateJournalFollower(reader)('conv-1', 2, signal, { limit: 7 })) {
      expect(entry).toBeUndefined();
    }
    expect(calls).toEqual([['conv-1', 2, 7, { signal, follow: false }]]);
  });
});
