/**
 * A damaged conversation is made usable again by the state plane's repair, end to end over
 * the real turn coordinator (test/support/real-turns.ts): the real JournalStore, the real
 * harness with the scripted model. state/store/journal-store-repair.test.ts corrupts the
 * LevelDB bytes themselves; here the unreadable entry is written through the store, as a
 * broken writer would, while the coordinator holds the conversation.
 */
import { afterEach, describe, expect, it } from '@jest/globals';
import pino from 'pino';
import { EventKind } from '../../common/event-kinds';
import { readyStatus } from './in-memory-conversations';
import { startRealTurns, type RealTurns } from './real-turns';

let turns: RealTurns | undefined;
afterEach(async () => {
  await turns?.close();
  turns = undefined;
});

const OWNER = {
  identity: 'web:owner',
  identities: ['web:owner'],
  personaId: 'p-owner',
  roles: ['member'],
  sessionId: 's',
};

describe('repair brings a damaged conversation back to taking turns', () => {
  it('refuses turns with data_loss on an unreadable entry, then after repair takes turns and verifies', async () => {
    turns = await startRealTurns({
      replies: [{ text: 'first' }, { text: 'second' }],
      logger: pino({ level: 'silent' }),
    });
    const conversation = turns.conversations.add(
      { owner: OWNER.identity },
      { status: readyStatus(turns.harness.endpoint) },
    );
    const uid = conversation.metadata.uid ?? '';
    const partition = `conv-${uid}`;
    const post = (text: string, key: string): ReturnType<RealTurns['coordinator']['postMessage']> =>
      turns!.coordinator.postMessage(
        OWNER,
        { conversationId: uid, text, idempotencyKey: key },
        AbortSignal.timeout(20_000),
      );
    expect((await post('one', 'k1')).status).toBe('complete');
    const store = turns.journal.store;
    const head = store.head(partition).head;
    // 0xff is no TurnComplete: the entry cannot be decoded by any reader.
    await store.append(
      partition,
      head,
      [{ kind: EventKind.TurnComplete, payload: Uint8Array.of(0xff) }],
      {
        fencingToken: 1,
      },
    );
    // The conversation refuses: its journal no longer folds (no turn, no transcript).
    await expect(
      turns.coordinator.transcript(OWNER, uid, AbortSignal.timeout(5_000)),
    ).rejects.toMatchObject({ code: 'data_loss' });

    const repaired = await store.repair(partition, {
      actor: 'admin@example.com',
      reason: 'unreadable turn_complete',
      fencingToken: 1,
    });
    expect(repaired.excised.map((e) => e.position)).toEqual([head]);

    // This replica's cached view predates the repair: its first append meets the moved head
    // and asks for a retry (docs/turns.md), which reads on from the journal, excision included.
    const second = await post('two', 'k2').catch((error: unknown) => {
      expect(error).toMatchObject({ code: 'conflict' });
      return post('two', 'k2');
    });
    expect(second.status).toBe('complete');
    expect(second.reply).toBe('second');
    const verified = await store.verify(partition);
    expect(verified).toMatchObject({ ok: true, excised: [head] });
    const transcript = await turns.coordinator.transcript(OWNER, uid, AbortSignal.timeout(5_000));
    expect(transcript.turns.map((t) => [t.user.text, t.reply])).toEqual([
      ['one', 'first'],
      ['two', 'second'],
    ]);
  });
});
