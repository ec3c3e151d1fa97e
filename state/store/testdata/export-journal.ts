import { encodePayload, EventKind } from '../../../common/event-kinds';
import { JournalStore } from '../journal-store';
import { eventKey, headKey } from '../store-keys';
import { editRaw, message, testSigner } from './fixtures';

/**
 * A fixed journal for the export golden files (journal-export-golden.test.ts): every kind
 * of line an export can hold, built the same way on every run (ed25519 signatures are
 * deterministic; the repair's clock is fixed).
 *
 * - `conv-golden`: batches under key 0 with a fencing token, a lazy hand-over to key 1
 *   (`key_rotated` in a caller's batch), an immediate one to key 2 (`rotateKey`), a tool
 *   call, a repair that excises a damaged entry (an excised line and an `excision`
 *   event), and a batch after the repair.
 * - `conv-refused`: one batch whose head record was deleted, so open() refuses it and its
 *   export has no head and no checkpoint.
 */
export const GOLDEN_PARTITION = 'conv-golden';
export const REFUSED_PARTITION = 'conv-refused';

function toolCall(n: number): { kind: string; payload: Uint8Array } {
  return {
    kind: EventKind.ToolCall,
    payload: encodePayload(EventKind.ToolCall, {
      turnId: 't',
      step: n,
      toolCallId: `call-${String(n)}`,
      toolName: 'calculator',
      argsJson: `{"expression":"${String(n)} + ${String(n)}", "note": "quotes \\" and ünïcode"}`,
      effect: 0,
      approvalRequestId: '',
      agent: '',
      thread: '',
      depth: 0,
    }),
  };
}

async function writeBatches(location: string): Promise<void> {
  const store = new JournalStore({ location, signer: testSigner(0) });
  await store.open();
  try {
    const P = GOLDEN_PARTITION;
    let { head } = await store.append(P, 0, [message('a'), message('b')], { fencingToken: 1 });
    ({ head } = await store.append(P, head, [message('c'), toolCall(1)], { fencingToken: 1 }));
    store.useSigningKey(testSigner(1));
    ({ head } = await store.append(P, head, [message('d')], { fencingToken: 2 }));
    await store.rotateKey(P, testSigner(2));
    await store.append(P, head + 2, [message('e'), toolCall(2)], { fencingToken: 2 });
    await store.append(REFUSED_PARTITION, 0, [message('x')]);
  } finally {
    await store.close();
  }
}

/** Damages `conv-golden`'s entry 3 (its payload no longer decodes) and refuses `conv-refused`. */
async function damage(location: string): Promise<void> {
  await editRaw(location, async (db) => {
    const value = await db.get(eventKey(GOLDEN_PARTITION, 3));
    if (value === undefined) throw new Error('the golden journal has no entry 3');
    await db.put(eventKey(GOLDEN_PARTITION, 3), value.slice(0, value.length - 3));
    await db.del(headKey(REFUSED_PARTITION));
  });
}

/**
 * Builds the fixed journal in the empty directory `location` and returns the store, open,
 * signing with key 2 (keys 0 and 1 held as previous keys).
 */
export async function buildExportJournal(location: string): Promise<JournalStore> {
  await writeBatches(location);
  await damage(location);
  const store = new JournalStore({
    location,
    signer: testSigner(2),
    previousSigners: [testSigner(0), testSigner(1)],
  });
  await store.open();
  const repaired = await store.repair(GOLDEN_PARTITION, {
    actor: 'admin@example.com',
    reason: 'golden export: disk corruption',
    fencingToken: 2,
    now: () => 1_700_000_000_000,
  });
  await store.append(GOLDEN_PARTITION, repaired.head, [message('f')], { fencingToken: 3 });
  return store;
}

/** The bytes `store.export(partition)` writes. */
export async function exportBytes(store: JournalStore, partition: string): Promise<Buffer> {
  const chunks: Uint8Array[] = [];
  for await (const chunk of store.export(partition)) chunks.push(chunk);
  return Buffer.concat(chunks);
}
