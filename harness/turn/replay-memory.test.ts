/**
 * Memory replays (docs/replay.md, "Memory"): a journal the real stack wrote, where the
 * agent kept a fact, a later turn's request carried it, a person cleared it (which erased
 * the fact's memory_set) and the next request no longer did. Replay folds the memory each
 * attempt started from out of the journal and must rebuild every recorded request digest;
 * a turn whose memory a clear erased is replayed in the weak mode.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import pino from 'pino';
import { decodePayload, encodePayload } from '../../common/event-kinds';
import type { JournalEntry } from '../../common/state-journal';
import { requestIds } from '../../common/request-ids';
import { readyStatus } from '../../test/support/in-memory-conversations';
import {
  memoryReply,
  startRealTurns,
  TEST_OWNER,
  textReply,
  type RealTurns,
} from '../../test/support/real-turns';
import { nodeEd25519Verifier } from '../crypto/node-ed25519';
import type { ReplayEntry } from './journal-turns';
import { replayJournal } from './replay';
import type { JournalReplay } from './replay-verdict';

let turns: RealTurns;
let entries: JournalEntry[];
/** The journal before the clear (its memory_set still readable). */
let beforeClear: JournalEntry[];

beforeAll(async () => {
  turns = await startRealTurns({
    replies: [
      memoryReply({ action: 'set', key: 'city', value: 'Lisbon' }),
      textReply('noted'),
      textReply('you live in Lisbon'),
      textReply('I do not know where you live'),
    ],
    logger: pino({ level: 'silent' }),
    spec: { tools: { builtin: ['memory'] } },
  });
  const conversation = turns.conversations.add(
    { owner: TEST_OWNER.identity },
    { status: readyStatus(turns.harness.endpoint) },
  );
  const conversationId = conversation.metadata.uid ?? '';
  const signal = AbortSignal.timeout(20_000);
  const post = (text: string, key: string) =>
    turns.coordinator.postMessage(
      TEST_OWNER,
      { conversationId, text, idempotencyKey: key },
      signal,
    );
  await post('I live in Lisbon', 'k1');
  await post('where do I live?', 'k2');
  beforeClear = await turns.journal.entries(`conv-${conversationId}`);
  await turns.coordinator.clearMemory(TEST_OWNER, { conversationId }, signal);
  await post('where do I live now?', 'k3');
  entries = await turns.journal.entries(`conv-${conversationId}`);
}, 60_000);

afterAll(async () => {
  await turns.close();
});

function replay(journal: readonly ReplayEntry[]): JournalReplay {
  return replayJournal(journal, {
    ids: requestIds,
    verifier: nodeEd25519Verifier,
    approvalPublicKey: turns.approvals.publicKey,
  });
}

describe('replay with memory', () => {
  it('recorded the memory budget in the configuration, and memory reached turn two only', () => {
    const config = entries.find((e) => e.kind === 'agent_config');
    const json = config && decodePayload('agent_config', config.payload).configJson;
    expect(JSON.parse(json ?? '{}')).toMatchObject({ memory_budget_bytes: 8192 });
    const systems = turns.harness.model.requests.map((r) => r.system ?? '');
    expect(systems.map((s) => s.includes('"Lisbon"'))).toEqual([false, false, true, false]);
  });

  it('before the clear, replays every turn ok in full mode', () => {
    const result = replay(beforeClear);
    expect(result.divergence).toBeUndefined();
    expect(result.turns.map((t) => [t.status, t.mode, t.ok])).toEqual([
      ['complete', 'full', true],
      ['complete', 'full', true],
    ]);
  });

  it('after the clear, the fact is gone from the journal; the turn that started with it replays weak, the others full', () => {
    const clear = entries.find((e) => e.kind === 'memory_cleared');
    const setPositions = clear ? decodePayload('memory_cleared', clear.payload).setPositions : [];
    expect(setPositions).toHaveLength(1);
    const erased = entries[setPositions[0]!];
    expect(erased).toMatchObject({ kind: '', excised: true });
    // No memory_set is left to read (the model's own tool call still names the value: the
    // clear erases what memory held, an admin's erasure the rest).
    expect(entries.filter((e) => e.kind === 'memory_set')).toEqual([]);
    expect(beforeClear.filter((e) => e.kind === 'memory_set')).toHaveLength(1);
    const result = replay(entries);
    expect(result.divergence).toBeUndefined();
    expect(result.turns.map((t) => [t.mode, t.ok, t.erasedMemoryBy])).toEqual([
      ['full', true, undefined],
      ['weak', true, clear?.position],
      ['full', true, undefined],
    ]);
  });

  it('finds a changed memory value at the next request, whose digest no longer follows', () => {
    const changed = beforeClear.map((entry) => {
      if (entry.kind !== 'memory_set') return entry;
      const payload = decodePayload('memory_set', entry.payload);
      payload.value = 'Porto';
      return { ...entry, payload: encodePayload('memory_set', payload) };
    });
    const result = replay(changed);
    expect(result.turns[0]?.ok).toBe(true);
    expect(result.divergence).toMatchObject({ turnId: result.turns[1]?.turnId, step: 1 });
    expect(result.divergence?.expected).toContain('request_sha256');
  });

  it('finds a clear taken out of the journal: the turn whose memory it erased no longer follows', () => {
    const withoutClear = entries.filter((e) => e.kind !== 'memory_cleared');
    const result = replay(withoutClear.map((e, position) => ({ ...e, position })));
    expect(result.turns[0]?.ok).toBe(true);
    expect(result.turns[1]?.ok).toBe(false);
  });
});
