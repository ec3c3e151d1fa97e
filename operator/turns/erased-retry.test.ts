/**
 * A retry after its message was erased (docs/turns.md, "Erased entries"): the idempotency
 * key still deduplicates. The turn id is derived from the conversation and the key
 * (turn-ids.ts), and the erasure record keeps the turn id, so the retry finds the turn;
 * the text it could be compared with is gone. Real coordinator, real harness over gRPC,
 * real journal store (test/support/real-turns.ts).
 */
import { afterEach, describe, expect, it } from '@jest/globals';
import pino from 'pino';
import { isAppError } from '../../common/errors';
import { readyStatus } from '../../test/support/in-memory-conversations';
import {
  startRealTurns,
  TEST_OWNER,
  textReply,
  type RealTurns,
} from '../../test/support/real-turns';

let turns: RealTurns | undefined;

afterEach(async () => {
  await turns?.close();
  turns = undefined;
});

/** One answered message `hello` (key k1), whose message_received is then erased. */
async function erasedMessage(): Promise<{
  real: RealTurns;
  conversationId: string;
  partition: string;
  turnId: string;
  head: number;
}> {
  const real = await startRealTurns({
    replies: [textReply('Hi.'), textReply('Second answer.')],
    logger: pino({ level: 'silent' }),
  });
  turns = real;
  const conversation = real.conversations.add(
    { owner: TEST_OWNER.identity },
    { status: readyStatus(real.harness.endpoint) },
  );
  const conversationId = conversation.metadata.uid ?? '';
  const partition = `conv-${conversationId}`;
  const signal = AbortSignal.timeout(20_000);
  const first = await real.coordinator.postMessage(
    TEST_OWNER,
    { conversationId, text: 'hello', idempotencyKey: 'k1' },
    signal,
  );
  expect(first).toMatchObject({ status: 'complete', reply: 'Hi.' });
  const message = (await real.journal.entries(partition)).find(
    (e) => e.kind === 'message_received',
  );
  // As the control plane erases: holding the conversation, under its lease.
  await real.coordinator.exclusive(conversation, signal, (lease) =>
    real.journal.erase(partition, {
      positions: [message!.position],
      actor: 'email:admin@example.com',
      reason: 'erasure request 3',
      fencingToken: lease.fencingToken,
    }),
  );
  const head = (await real.journal.entries(partition)).length;
  return { real, conversationId, partition, turnId: first.turnId, head };
}

describe('a retry whose message was erased', () => {
  it('with the same key and text gets the same turn, and opens no second one', async () => {
    const { real, conversationId, partition, turnId, head } = await erasedMessage();
    const calls = real.harness.model.callCount;
    const retry = await real.coordinator.postMessage(
      TEST_OWNER,
      { conversationId, text: 'hello', idempotencyKey: 'k1' },
      AbortSignal.timeout(20_000),
    );
    expect(retry).toMatchObject({ turnId, status: 'complete', reply: 'Hi.' });
    expect(await real.journal.entries(partition)).toHaveLength(head);
    expect(real.harness.model.callCount).toBe(calls);
  }, 60_000);

  it('with the same key and other text also gets that turn: the text to compare is gone', async () => {
    const { real, conversationId, partition, turnId, head } = await erasedMessage();
    const retry = await real.coordinator.postMessage(
      TEST_OWNER,
      { conversationId, text: 'something else', idempotencyKey: 'k1' },
      AbortSignal.timeout(20_000),
    );
    expect(retry).toMatchObject({ turnId, status: 'complete' });
    expect(await real.journal.entries(partition)).toHaveLength(head);
  }, 60_000);

  it('a new key still opens a new turn', async () => {
    const { real, conversationId, partition, turnId, head } = await erasedMessage();
    const next = await real.coordinator.postMessage(
      TEST_OWNER,
      { conversationId, text: 'hello', idempotencyKey: 'k2' },
      AbortSignal.timeout(20_000),
    );
    expect(next.turnId).not.toBe(turnId);
    expect(next).toMatchObject({ status: 'complete', reply: 'Second answer.' });
    expect((await real.journal.entries(partition)).length).toBeGreaterThan(head);
  }, 60_000);

  it('a key reused for other text on a message not erased is still a conflict', async () => {
    const { real, conversationId } = await erasedMessage();
    await real.coordinator.postMessage(
      TEST_OWNER,
      { conversationId, text: 'hello', idempotencyKey: 'k2' },
      AbortSignal.timeout(20_000),
    );
    const refused = await real.coordinator
      .postMessage(
        TEST_OWNER,
        { conversationId, text: 'other', idempotencyKey: 'k2' },
        AbortSignal.timeout(20_000),
      )
      .catch((error: unknown) => error);
    expect(isAppError(refused) && refused.code).toBe('conflict');
    expect(String((refused as Error).message)).toContain('idempotency key k2');
  }, 60_000);
});
