/*
 * Learning the journal keys a Conversation's status records, over the real store
 * (test/support/store-journal.ts: LevelDB in a temporary directory, real ed25519 keys):
 * trust on first use of the first root's key, then only keys a recorded key hands over to.
 */
import { afterEach, describe, expect, it } from '@jest/globals';

import { EventKind } from '../../common/event-kinds';
import { journalKeyId, type JournalPublicKey } from '../../common/journal-keys';
import { createRootLogger } from '../../common/log';
import type { NewJournalEvent } from '../../common/state-journal';
import { StoreJournal } from '../../test/support/store-journal';
import { JournalKeyRecorder } from './journal-keys';

const PARTITION = 'conv-keys';
const open: StoreJournal[] = [];
afterEach(async () => {
  await Promise.all(open.splice(0).map((j) => j.close()));
});

async function journal(seed: string): Promise<StoreJournal> {
  const opened = await StoreJournal.open(seed);
  open.push(opened);
  return opened;
}

function keyOf(publicKey: Uint8Array): JournalPublicKey {
  return { keyId: journalKeyId(publicKey), publicKey };
}

const batch = (n: number): NewJournalEvent[] => [
  { kind: EventKind.ToolCall, payload: new Uint8Array([n]) },
  { kind: EventKind.ToolResult, payload: new Uint8Array([n, n]) },
];

async function appendBatch(to: StoreJournal, n: number): Promise<{ head: number; keyId: string }> {
  const head = to.store.head(PARTITION).head;
  const outcome = await to.append(PARTITION, head, batch(n));
  return { head: outcome.head, keyId: outcome.signedRoot.keyId };
}

function recorder(state: StoreJournal): { keys: JournalKeyRecorder; logs: string[] } {
  const logs: string[] = [];
  const logger = createRootLogger({
    service: 'journal-keys-test',
    level: 'debug',
    destination: { write: (line: string) => void logs.push(line) },
  });
  return { keys: new JournalKeyRecorder({ state, logger }), logs };
}

describe('JournalKeyRecorder', () => {
  it("records the first root's key on first use, then reads nothing while that key signs", async () => {
    const honest = await journal('polychrome/test-only/journal-key/1');
    const first = await appendBatch(honest, 1);
    const { keys } = recorder(honest);
    const learned = await keys.keysAfter({
      partition: PARTITION,
      recorded: [],
      recordedHead: 0,
      ...first,
    });
    expect(learned).toEqual([keyOf(honest.publicKey)]);
    const next = await appendBatch(honest, 2);
    // The same array back: nothing was read (a closed store would have thrown).
    await honest.store.close();
    const again = await keys.keysAfter({
      partition: PARTITION,
      recorded: learned,
      recordedHead: first.head,
      ...next,
    });
    expect(again).toBe(learned);
  });

  it('adds the key a key_rotated by a recorded key hands over to, also for a status that recorded none yet', async () => {
    const honest = await journal('polychrome/test-only/journal-key/1');
    const first = await appendBatch(honest, 1);
    const k2 = honest.rotateTo('polychrome/test-only/journal-key/2');
    const rotated = await appendBatch(honest, 2);
    expect(rotated.keyId).toBe(journalKeyId(k2));
    const { keys, logs } = recorder(honest);
    const k1 = keyOf(honest.publicKey);
    await expect(
      keys.keysAfter({
        partition: PARTITION,
        recorded: [k1],
        recordedHead: first.head,
        ...rotated,
      }),
    ).resolves.toEqual([k1, keyOf(k2)]);
    // A status from before keys were recorded: the first root's key, then the chain.
    await expect(
      keys.keysAfter({ partition: PARTITION, recorded: [], recordedHead: 0, ...rotated }),
    ).resolves.toEqual([k1, keyOf(k2)]);
    // A status whose head moved past the hand-over without its key (learning failed then).
    const later = await appendBatch(honest, 3);
    await expect(
      keys.keysAfter({
        partition: PARTITION,
        recorded: [k1],
        recordedHead: rotated.head,
        ...later,
      }),
    ).resolves.toEqual([k1, keyOf(k2)]);
    expect(logs.filter((l) => l.includes('"level":"error"'))).toEqual([]);
  });

  it('does not record the key of a state plane that re-signed the journal with a key of its own', async () => {
    const honest = await journal('polychrome/test-only/journal-key/1');
    const first = await appendBatch(honest, 1);
    const k1 = keyOf(honest.publicKey);
    // The attacker's copy: the same events, sealed by another key, with no key_rotated.
    const rogue = await journal('polychrome/test-only/attacker-key');
    await appendBatch(rogue, 1);
    const resigned = await appendBatch(rogue, 2);
    const { keys, logs } = recorder(rogue);
    const learned = await keys.keysAfter({
      partition: PARTITION,
      recorded: [k1],
      recordedHead: first.head,
      ...resigned,
    });
    expect(learned).toEqual([k1]);
    const errors = logs.filter((l) => l.includes('"level":"error"'));
    expect(errors).toHaveLength(1);
    expect(errors[0]).toContain('the journal is signed by a key no recorded key handed over to');
    expect(errors[0]).toContain(resigned.keyId);
  });
});
