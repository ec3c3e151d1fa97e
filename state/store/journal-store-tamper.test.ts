import { afterEach, beforeEach, describe, expect, it } from '@jest/globals';

import { AppError } from '../../common/errors';
import { decodePayload, encodePayload, EventKind } from '../../common/event-kinds';
import { CompactMmr } from '../journal/compact-mmr';
import type { Ed25519Signer } from '../journal/ed25519';
import { toHex } from '../journal/hex';
import { LeafHasher } from '../journal/leaf-digest';
import { leafNodePosition } from '../journal/mmr-layout';
import { createNodeEd25519Verifier } from '../journal/node-ed25519';
import { nodeSha256 } from '../journal/node-sha256';
import { signedRootPayload, signRoot } from '../journal/signed-root';
import { encodeU64 } from '../journal/u64';
import { JournalStore } from './journal-store';
import { decodeHeadRecord, encodeHeadRecord } from './head-record';
import { decodeEventValue, encodeEventValue, eventKey, headKey, nodeKey } from './store-keys';
import { editRaw, filler, message, tempDir, testSigner } from './testdata/fixtures';

/*
 * Tampering with the stored bytes, as someone with access to the state volume could, must
 * make verify fail at the right position for the right reason (docs/journal-format.md,
 * "Verification"). The journal: 6 batches of 3 events, each closed by a signed_root, so
 * roots sit at 3, 7, 11, 15, 19, 23 and the head is 24. Edits stay out of the last batch
 * unless a test says otherwise, so the partition still opens and verify does the finding.
 */

const key = testSigner(0);
const stranger = testSigner(9);
const P = 'conv-tamper';
const utf8 = new TextEncoder();

let dir: { path: string; remove: () => Promise<void> };
let store: JournalStore;

beforeEach(async () => {
  dir = await tempDir();
  store = new JournalStore({ location: dir.path, signer: key });
  await store.open();
  let head = 0;
  for (let b = 0; b < 6; b++) {
    head = (
      await store.append(P, head, [
        message(`batch ${String(b)}`),
        filler(EventKind.ToolCall, 100 + b, b),
        filler(EventKind.ToolResult, 2000 + b, b),
      ])
    ).head;
  }
  expect(head).toBe(24);
  expect((await store.verify(P)).ok).toBe(true);
  await store.close();
});

afterEach(async () => {
  await store.close();
  await dir.remove();
});

async function tamperThenVerify(
  edit: Parameters<typeof editRaw>[1],
): Promise<Awaited<ReturnType<JournalStore['verify']>>> {
  await editRaw(dir.path, edit);
  store = new JournalStore({ location: dir.path, signer: key });
  await store.open();
  return store.verify(P);
}

function resignedRoot(signer: Ed25519Signer, leafCount: number, root: Uint8Array): Uint8Array {
  const fields = signRoot(nodeSha256, signer, leafCount, root, P);
  return encodeEventValue(
    utf8.encode(EventKind.SignedRoot),
    encodePayload(EventKind.SignedRoot, signedRootPayload(fields)),
  );
}

async function storedRoot(
  db: Parameters<Parameters<typeof editRaw>[1]>[0],
  position: number,
): Promise<{ leafCount: number; root: Uint8Array }> {
  const value = await db.get(eventKey(P, position));
  const { payload } = decodeEventValue(value!, P, position);
  const fields = decodePayload(EventKind.SignedRoot, payload);
  return { leafCount: fields.leafCount, root: new Uint8Array(fields.root) };
}

describe('verify after tampering with stored events', () => {
  it('names event_changed at the next root when one payload byte flips', async () => {
    const result = await tamperThenVerify(async (db) => {
      const value = (await db.get(eventKey(P, 9)))!.slice();
      value[value.length - 1]! ^= 0x01;
      await db.put(eventKey(P, 9), value);
    });
    expect(result.ok).toBe(false);
    expect(result.failure).toMatchObject({
      position: 11,
      kind: EventKind.SignedRoot,
      reason: 'event_changed',
    });
    expect(result.verifiedLeafCount).toBe(7);
  });

  it('names a gap at a deleted event', async () => {
    const result = await tamperThenVerify((db) => db.del(eventKey(P, 5)));
    expect(result.failure).toMatchObject({
      position: 5,
      reason: 'gap',
      expected: toHex(encodeU64(5)),
      found: toHex(encodeU64(6)),
    });
  });

  it('names event_changed at the first root after two swapped events', async () => {
    const result = await tamperThenVerify(async (db) => {
      const a = (await db.get(eventKey(P, 4)))!;
      const b = (await db.get(eventKey(P, 13)))!;
      await db.batch([
        { type: 'put', key: eventKey(P, 4), value: b },
        { type: 'put', key: eventKey(P, 13), value: a },
      ]);
    });
    expect(result.failure).toMatchObject({ position: 7, reason: 'event_changed' });
  });

  it('names bad_signature at a root whose bytes were replaced', async () => {
    const result = await tamperThenVerify(async (db) => {
      const value = (await db.get(eventKey(P, 11)))!;
      const { payload } = decodeEventValue(value, P, 11);
      const fields = decodePayload(EventKind.SignedRoot, payload);
      const root = Buffer.from(fields.root);
      root[0]! ^= 0xff;
      await db.put(
        eventKey(P, 11),
        encodeEventValue(
          utf8.encode(EventKind.SignedRoot),
          encodePayload(EventKind.SignedRoot, { ...fields, root }),
        ),
      );
    });
    expect(result.failure).toMatchObject({
      position: 11,
      kind: EventKind.SignedRoot,
      reason: 'bad_signature',
    });
  });

  it('names event_changed at a root replaced by a false one signed with the right key', async () => {
    const result = await tamperThenVerify(async (db) => {
      const { leafCount } = await storedRoot(db, 15);
      await db.put(eventKey(P, 15), resignedRoot(key, leafCount, new Uint8Array(32).fill(0xab)));
    });
    // The next root (19) was signed over the original event 15, so it does not vouch for
    // the stored one: the change shows at 15 itself.
    expect(result.failure).toMatchObject({ position: 15, reason: 'event_changed' });
  });

  it('names root_forged when the key holder signs a false root and a later root vouches', async () => {
    // Only a key holder can do this: a false root at 3, then every later root re-signed
    // honestly over the stored events (which now include the false root), with nodes and
    // head record to match so the partition still opens.
    const result = await tamperThenVerify(async (db) => {
      const ops: { type: 'put'; key: Uint8Array; value: Uint8Array }[] = [];
      const mmr = new CompactMmr(nodeSha256);
      const leaves = new LeafHasher(nodeSha256);
      for (let position = 0; position < 24; position++) {
        let value = (await db.get(eventKey(P, position)))!;
        if (position === 3) value = resignedRoot(key, 3, new Uint8Array(32).fill(1));
        else if (position % 4 === 3) value = resignedRoot(key, position, mmr.root());
        ops.push({ type: 'put', key: eventKey(P, position), value });
        const { kind, payload } = decodeEventValue(value, P, position);
        mmr.append(leaves.digest(position, kind, payload), (n, digest) => {
          ops.push({ type: 'put', key: nodeKey(P, n), value: digest });
        });
      }
      const record = decodeHeadRecord((await db.get(headKey(P)))!, P);
      ops.push({
        type: 'put',
        key: headKey(P),
        value: encodeHeadRecord({ ...record, peaks: mmr.peaks() }),
      });
      await db.batch(ops);
    });
    expect(store.listPartitions()[0]).toMatchObject({ status: 'ok', head: 24 });
    expect(result.failure).toMatchObject({ position: 3, reason: 'root_forged' });
  });

  it('names wrong_key at a root re-signed with another key', async () => {
    const result = await tamperThenVerify(async (db) => {
      const { leafCount, root } = await storedRoot(db, 7);
      await db.put(eventKey(P, 7), resignedRoot(stranger, leafCount, root));
    });
    expect(result.failure).toMatchObject({
      position: 7,
      kind: EventKind.SignedRoot,
      reason: 'wrong_key',
    });
  });

  it('refuses the partition on open when the last root is altered, and verify still names it', async () => {
    const result = await tamperThenVerify(async (db) => {
      const { leafCount, root } = await storedRoot(db, 23);
      await db.put(eventKey(P, 23), resignedRoot(stranger, leafCount, root));
    });
    expect(store.listPartitions()[0]).toMatchObject({ partition: P, status: 'refused' });
    expect(result.failure).toMatchObject({ position: 23, reason: 'wrong_key' });
  });

  it('refuses to serve a proof over a tampered MMR node', async () => {
    await tamperThenVerify((db) =>
      db.put(nodeKey(P, leafNodePosition(1)), new Uint8Array(32).fill(9)),
    );
    let error: unknown;
    try {
      await store.proof(P, 0);
    } catch (caught) {
      error = caught;
    }
    expect(error).toBeInstanceOf(AppError);
    expect(error instanceof AppError && error.code).toBe('data_loss');
    // Other events' proofs do not touch that node.
    await expect(store.proof(P, 20)).resolves.toMatchObject({ event: { position: 20 } });
  });
});

describe('verify with signature checks streamed while it reads', () => {
  const LONG = 'conv-tamper-long';

  /** 300 batches of one event and a root: roots at 1, 3, 5, ... */
  async function appendLong(): Promise<void> {
    store = new JournalStore({ location: dir.path, signer: key });
    await store.open();
    let head = 0;
    for (let b = 0; b < 300; b++) {
      head = (await store.append(LONG, head, [filler(EventKind.ToolCall, 40, b)])).head;
    }
  }

  it('stops when its signal fires, and the store goes on serving', async () => {
    await appendLong();
    const controller = new AbortController();
    const verifier = createNodeEd25519Verifier();
    const run = store.verify(LONG, {
      signal: controller.signal,
      checkSignatures: (checks) => {
        controller.abort(new Error('caller left'));
        return Promise.resolve(
          checks.map((c) => verifier.verify(c.publicKey, c.message, c.signature)),
        );
      },
    });
    await expect(run).rejects.toMatchObject({
      code: 'cancelled',
      message: `verifying ${LONG} was cancelled`,
    });
    await expect(store.verify(LONG)).resolves.toMatchObject({ ok: true, leafCount: 600 });
  });

  it('names the first bad signature though the chunk holding it finishes last', async () => {
    await appendLong();
    await store.close();
    // Flip one signature bit in the roots of batches 40 and 250.
    const result = await tamperThenVerify(async (db) => {
      for (const position of [81, 501]) {
        const value = (await db.get(eventKey(LONG, position)))!;
        const fields = decodePayload(
          EventKind.SignedRoot,
          decodeEventValue(value, LONG, position).payload,
        );
        const signature = Buffer.from(fields.signature);
        signature[3]! ^= 0x20;
        await db.put(
          eventKey(LONG, position),
          encodeEventValue(
            utf8.encode(EventKind.SignedRoot),
            encodePayload(EventKind.SignedRoot, { ...fields, signature }),
          ),
        );
      }
    });
    expect(result.ok).toBe(true); // tamperThenVerify reopened the store and verified P, untouched
    const verifier = createNodeEd25519Verifier();
    const calls: number[] = [];
    const finished: number[] = [];
    // The first chunk finishes only after every other one has (not after a fixed delay,
    // which a loaded machine can outrun): chunks go out as replay reads, without waiting.
    let othersChecked = 0;
    let releaseFirst = (): void => undefined;
    const othersFinished = new Promise<void>((resolve) => {
      releaseFirst = resolve;
    });
    const streamed = await store.verify(LONG, {
      checkSignatures: async (checks) => {
        const call = calls.push(checks.length) - 1;
        if (call === 0) await othersFinished;
        const results = checks.map((c) => verifier.verify(c.publicKey, c.message, c.signature));
        finished.push(call);
        if (call !== 0) {
          othersChecked += checks.length;
          if (othersChecked === 300 - (calls[0] ?? 0)) releaseFirst();
        }
        return results;
      },
    });
    expect(calls.length).toBeGreaterThan(1);
    expect(calls.reduce((a, b) => a + b)).toBe(300);
    expect(finished.at(-1)).toBe(0);
    expect(streamed.failure).toMatchObject({
      position: 81,
      kind: EventKind.SignedRoot,
      reason: 'bad_signature',
    });
    expect(streamed.verifiedLeafCount).toBe(79);
    expect(streamed).toEqual(await store.verify(LONG));
  });
});
