/**
 * A status that lags an accepted rollback: the journal records `rollback_accepted` for the
 * checkpoint `status.journal` still names (the status write after the decision was lost with
 * the replica that made it, or this replica's cache predates it). The real coordinator, a
 * real store and the real harness with the scripted model (test/support/real-turns.ts).
 */
import { afterEach, describe, expect, it } from '@jest/globals';
import pino from 'pino';
import { EventKind, encodePayload } from '../../common/event-kinds';
import { readyStatus } from '../../test/support/in-memory-conversations';
import {
  startRealTurns,
  TEST_OWNER as OWNER,
  textReply,
  waitFor,
  type RealTurns,
} from '../../test/support/real-turns';
import type { ConversationStatus } from '../api/v1alpha1/conversation-status';
import { partitionOf } from '../../common/partition-name';
const LOST = { head: 96, root: 'ab'.repeat(32), keyId: 'k-lost' };

let turns: RealTurns | undefined;
afterEach(async () => {
  await turns?.close();
  turns = undefined;
});

/** A conversation whose status names `LOST`, rolled back, over a journal that holds `accepted`. */
async function lagging(accepted: { head: number; root: string }): Promise<string> {
  turns = await startRealTurns({
    replies: [textReply('on we go')],
    logger: pino({ level: 'silent' }),
  });
  const ready = readyStatus(turns.harness.endpoint);
  const status: ConversationStatus = {
    ...ready,
    journal: {
      head: LOST.head,
      lastSignedRoot: LOST.root,
      keyId: LOST.keyId,
      rollback: {
        checkpointHead: LOST.head,
        checkpointRoot: LOST.root,
        journalHead: 0,
        since: '2026-12-01T00:00:00Z',
      },
    },
  };
  const conversation = turns.conversations.add({ owner: OWNER.identity }, { status });
  const uid = conversation.metadata.uid ?? '';
  // The decision as the replica that made it committed it, before its status write was lost.
  await turns.journal.store.append(partitionOf(uid), 0, [
    {
      kind: EventKind.RollbackAccepted,
      payload: encodePayload(EventKind.RollbackAccepted, {
        checkpointHead: accepted.head,
        checkpointRoot: Buffer.from(accepted.root, 'hex'),
        checkpointKeyId: LOST.keyId,
        journalHead: 0,
        journalRoot: Buffer.alloc(0),
        actor: 'web:admin',
        caller: 'web:admin',
        session: 's-admin',
        reason: 'restored from the nightly copy',
        acceptedAtMs: 1,
      }),
    },
  ]);
  return uid;
}

const post = (uid: string) =>
  turns!.coordinator.postMessage(
    OWNER,
    { conversationId: uid, text: 'still there?', idempotencyKey: 'k1' },
    AbortSignal.timeout(20_000),
  );

describe('a status that lags an accepted rollback', () => {
  it('goes on from the journal, and the status catches up: checkpoint moved, rollback gone', async () => {
    const uid = await lagging(LOST);
    const reply = await post(uid);
    expect(reply).toMatchObject({ status: 'complete', reply: 'on we go' });
    const entries = await turns!.journal.entries(partitionOf(uid));
    const status = await waitFor(() => {
      const journal = turns!.conversations.byUid(uid)?.status?.journal;
      return journal?.head === entries.length ? journal : undefined;
    });
    expect(status.rollback).toBeUndefined();
    const degraded = turns!.conversations
      .byUid(uid)
      ?.status?.conditions?.find((c) => c.type === 'Degraded');
    expect(degraded?.reason).not.toBe('JournalRolledBack');
  });

  it('still refuses when the journal accepted another checkpoint as lost', async () => {
    const uid = await lagging({ head: LOST.head, root: 'cd'.repeat(32) });
    await expect(post(uid)).rejects.toMatchObject({
      code: 'failed_precondition',
      details: { reason: 'journal_rolled_back', checkpointHead: LOST.head },
    });
    expect(await turns!.journal.entries(partitionOf(uid))).toHaveLength(2);
  });
});
