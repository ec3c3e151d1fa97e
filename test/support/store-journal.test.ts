import { afterEach, describe, expect, it } from '@jest/globals';
import { encodePayload, EventKind } from '../../common/event-kinds';
import { JournalConflictError } from '../../common/state-call-errors';
import type { NewJournalEvent } from '../../common/state-journal';
import { StoreJournal } from './store-journal';

const P = 'conv-store-journal';
let journal: StoreJournal | undefined;

afterEach(async () => {
  await journal?.close();
  journal = undefined;
});

function results(count: number): NewJournalEvent[] {
  return Array.from({ length: count }, (_, i) => ({
    kind: EventKind.ToolResult,
    payload: encodePayload(EventKind.ToolResult, {
      turnId: 't',
      toolCallId: `c-${String(i)}`,
      content: 'ok',
      isError: false,
      denied: false,
      thread: '',
      delegate: '',
    }),
  }));
}

describe('StoreJournal (the real store behind the StateJournal port)', () => {
  it('appends at the expected head and answers with the signed root, as StateClient does', async () => {
    const j = (journal = await StoreJournal.open());
    const outcome = await j.append(P, 0, results(2));
    expect(outcome).toMatchObject({ firstPosition: 0, head: 3 });
    expect(outcome.signedRoot).toMatchObject({ position: 2, leafCount: 2 });
    expect(outcome.signedRoot.keyId).toBe(j.store.signingKeyId);
    expect(await j.head(P)).toMatchObject({ head: 3, signedRoot: { position: 2 } });
    expect((await j.entries(P)).map((e) => e.kind)).toEqual([
      'tool_result',
      'tool_result',
      'signed_root',
    ]);
  });

  it('reports a lost compare-and-swap as the JournalConflictError the coordinator catches', async () => {
    const j = (journal = await StoreJournal.open());
    await j.append(P, 0, results(1));
    const stale = j.append(P, 0, results(1));
    await expect(stale).rejects.toBeInstanceOf(JournalConflictError);
    await expect(stale).rejects.toMatchObject({ code: 'conflict', head: 2 });
    expect((await j.head(P)).head).toBe(2);
  });

  it('follows: what is there, then each batch as it commits, until the signal aborts', async () => {
    const j = (journal = await StoreJournal.open());
    await j.append(P, 0, results(1));
    const controller = new AbortController();
    const seen: number[] = [];
    const following = (async () => {
      try {
        for await (const entry of j.read(P, 1, 0, { follow: true, signal: controller.signal })) {
          seen.push(entry.position);
          if (entry.position === 4) controller.abort();
        }
      } catch (error) {
        if (!controller.signal.aborted) throw error;
      }
    })();
    await j.append(P, 2, results(2));
    await following;
    expect(seen).toEqual([1, 2, 3, 4]);
    expect(j.store.commitListenerCount(P)).toBe(0);
  });
});
