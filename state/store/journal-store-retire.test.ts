import { randomBytes } from 'node:crypto';
import { readdir, stat } from 'node:fs/promises';
import { join } from 'node:path';

import { afterEach, beforeEach, describe, expect, it } from '@jest/globals';

import { AppError } from '../../common/errors';
import { EventKind } from '../../common/event-kinds';
import { ExportVerifier } from '../journal/export-verify';
import { JournalReplayer } from '../journal/journal-replayer';
import { createNodeEd25519Verifier } from '../journal/node-ed25519';
import { nodeSha256 } from '../journal/node-sha256';
import { retirementMessage, type SignedRetirement } from '../journal/retirement-record';
import { JournalStore } from './journal-store';
import { RetirePolicy } from './retirement-types';
import { headKey, partitionRange, retiredKey } from './store-keys';
import { collect, editRaw, message, tempDir, testSigner } from './testdata/fixtures';

/*
 * Journal retention (docs/state-plane.md, "Retirement") against the real LevelDB: a
 * partition retired under `checkpoint` or `delete` loses every record in one batch, its
 * space is compacted away, every later call names the retirement, and an export taken
 * before checks against the signed record (a truncated or changed one does not).
 */

const key = testSigner(0);
const P = 'conv-retire';
const OTHER = 'conv-kept';
const verifier = createNodeEd25519Verifier();
const utf8 = new TextDecoder();

let dir: { path: string; remove: () => Promise<void> };
let store: JournalStore;
let head: number;

/** `batches` batches of 8 events of 4 KiB each (plus each batch's signed root). */
async function fill(partition: string, batches: number): Promise<number> {
  let at = store.head(partition).head;
  for (let b = 0; b < batches; b++) {
    const events = [
      message(`${partition} ${String(b)}`),
      // Random bytes: LevelDB compresses its tables, and a freed range must be measured as
      // such, not as compression.
      ...Array.from({ length: 7 }, () => ({
        kind: EventKind.ToolResult,
        payload: new Uint8Array(randomBytes(4096)),
      })),
    ];
    at = (await store.append(partition, at, events)).head;
  }
  return at;
}

async function exportLines(partition: string): Promise<string[]> {
  const chunks = await collect(store.export(partition));
  return utf8
    .decode(Buffer.concat(chunks))
    .split('\n')
    .filter((l) => l !== '');
}

async function bytesOnDisk(path: string): Promise<number> {
  let total = 0;
  for (const name of await readdir(path)) total += (await stat(join(path, name))).size;
  return total;
}

function verifyAgainst(lines: readonly string[], retirement: SignedRetirement): ExportVerifier {
  const check = new ExportVerifier({
    hash: nodeSha256,
    pinnedKeys: [key.publicKey],
    source: 'the export',
    retirement,
  });
  for (const line of lines) check.addLine(line);
  return check;
}

const retire = (policy: RetirePolicy, partition = P, now = () => 1_700_000_000_000) =>
  store.retire(partition, { policy, actor: 'test:admin', reason: 'conversation deleted', now });

beforeEach(async () => {
  dir = await tempDir();
  store = new JournalStore({ location: dir.path, signer: key });
  await store.open();
  head = await fill(P, 40);
  await fill(OTHER, 2);
});

afterEach(async () => {
  await store.close();
  await dir.remove();
});

async function reopen(): Promise<void> {
  await store.close();
  store = new JournalStore({ location: dir.path, signer: key });
  await store.open();
}

async function rawKeysOf(partition: string): Promise<number> {
  await store.close();
  let count = 0;
  await editRaw(dir.path, async (db) => {
    for await (const k of db.keys(partitionRange(partition))) if (k.length > 0) count += 1;
  });
  await reopen();
  return count;
}

describe('retire with checkpoint', () => {
  it('removes every record in one batch, keeps a signed record of the final head and root, and reclaims the space', async () => {
    const before = await bytesOnDisk(dir.path);
    const replay = new JournalReplayer({ hash: nodeSha256, trustedPublicKeys: [key.publicKey] });
    for (const event of await collect(store.read(P))) replay.add(event);
    const { root } = replay.plan();
    const result = await retire(RetirePolicy.Checkpoint);
    expect(result).toMatchObject({ retiredNow: true, eventsRemoved: head });
    expect(result.retirement).toMatchObject({
      partition: P,
      policy: 'checkpoint',
      retiredAtMs: 1_700_000_000_000,
      actor: 'test:admin',
      reason: 'conversation deleted',
    });
    const signed = result.retirement.signed;
    expect(signed).toMatchObject({ partition: P, head, keyId: store.signingKeyId });
    // The root over every entry, the one replay computes.
    expect(Buffer.from(signed?.root ?? []).toString('hex')).toBe(Buffer.from(root).toString('hex'));
    expect(verifier.verify(key.publicKey, retirementMessage(signed!), signed!.signature)).toBe(
      true,
    );
    // About 1.3 MB of events went; LevelDB compacted their range away.
    const after = await bytesOnDisk(dir.path);
    expect(before - after).toBeGreaterThan(900_000);
    expect(await rawKeysOf(P)).toBe(0);
    expect(store.retirement(P)).toEqual(result.retirement);
  });

  it('keeps what an export taken before can be checked against; a truncated or changed export, or a forged record, fails', async () => {
    const lines = await exportLines(P);
    const { retirement } = await retire(RetirePolicy.Checkpoint);
    const record = retirement.signed!;
    const ok = verifyAgainst(lines, record).finish(verifier);
    expect(ok).toMatchObject({ ok: true, events: head, retirement: { head } });

    // Cut off the last batch: every root still verifies, the record does not.
    const truncated = verifyAgainst(lines.slice(0, -9), record).finish(verifier);
    expect(truncated.failure).toMatchObject({ reason: 'retirement_mismatch', position: head - 9 });
    expect(truncated.failure?.message).toContain(`ended with ${String(head)} entries`);

    const forged = { ...record, head: record.head - 9 };
    expect(verifyAgainst(lines.slice(0, -9), forged).finish(verifier).failure).toMatchObject({
      reason: 'retirement_invalid',
    });
    const elsewhere = { ...record, partition: OTHER };
    expect(verifyAgainst(lines, elsewhere).finish(verifier).failure?.message).toContain(
      `the retirement record is for ${OTHER}`,
    );
    const otherKey = testSigner(1);
    const strange = new ExportVerifier({
      hash: nodeSha256,
      pinnedKeys: [otherKey.publicKey],
      source: 'x',
      retirement: record,
    });
    for (const line of lines.slice(0, 1)) strange.addLine(line);
    expect(strange.finish(verifier).failure?.reason).toBe('retirement_invalid');
  });

  it('refuses a partition whose tail open() refused, and changes nothing', async () => {
    await store.close();
    await editRaw(dir.path, (db) => db.del(headKey(P)));
    store = new JournalStore({ location: dir.path, signer: key });
    await store.open();
    const error = await retire(RetirePolicy.Checkpoint).catch((e: unknown) => e);
    expect(error).toMatchObject({ code: 'data_loss' });
    expect((error as AppError).message).toContain('retire it with policy delete');
    expect(store.listPartitions().map((p) => p.partition)).toContain(P);
    // Delete still works: nothing of a damaged partition needs to be signed.
    expect((await retire(RetirePolicy.Delete)).retiredNow).toBe(true);
    expect(await rawKeysOf(P)).toBe(0);
  });
});

describe('retire with delete', () => {
  it('keeps only a tombstone, and reclaims the space', async () => {
    const before = await bytesOnDisk(dir.path);
    const result = await retire(RetirePolicy.Delete);
    expect(result).toMatchObject({ retiredNow: true, eventsRemoved: head });
    expect(result.retirement.signed).toBeUndefined();
    expect(before - (await bytesOnDisk(dir.path))).toBeGreaterThan(900_000);
    expect(await rawKeysOf(P)).toBe(0);
  });
});

describe('a retired partition', () => {
  it.each([RetirePolicy.Checkpoint, RetirePolicy.Delete])(
    'under %s refuses every call, naming the retirement, also after a restart; other partitions are untouched',
    async (policy) => {
      await retire(policy);
      for (const round of ['before', 'after'] as const) {
        if (round === 'after') await reopen();
        const calls: [string, () => Promise<unknown>][] = [
          ['append', () => store.append(P, 0, [message('again')])],
          ['append at the old head', () => store.append(P, head, [message('again')])],
          ['head', () => Promise.resolve().then(() => store.head(P))],
          ['read', () => collect(store.read(P))],
          ['verify', () => store.verify(P)],
          ['export', () => collect(store.export(P))],
          ['proof', () => store.proof(P, 0)],
          ['repair', () => store.repair(P, { actor: 'a', reason: 'r' })],
          ['rotate', () => store.rotateKey(P, testSigner(1))],
        ];
        for (const [what, call] of calls) {
          const error = await call().catch((e: unknown) => e);
          expect([what, error]).toEqual([what, expect.any(AppError)]);
          expect([what, (error as AppError).code]).toEqual([what, 'failed_precondition']);
          expect((error as AppError).message).toContain(
            `${P} was retired at 2023-11-14T22:13:20.000Z by test:admin (policy ${policy})`,
          );
          expect((error as AppError).details).toMatchObject({ reason: 'retired' });
        }
        expect(store.listPartitions().map((p) => p.partition)).toEqual([OTHER]);
        expect((await store.verify(OTHER)).ok).toBe(true);
        expect(store.retirement(P).policy).toBe(policy);
      }
    },
  );

  it('is retired again with nothing changed, and says so', async () => {
    const first = await retire(RetirePolicy.Checkpoint);
    const again = await retire(RetirePolicy.Delete, P, () => 1_800_000_000_000);
    expect(again).toMatchObject({ retiredNow: false, eventsRemoved: 0 });
    expect(again.retirement).toEqual(first.retirement);
    expect(again.message).toContain('was already retired at 2023-11-14T22:13:20.000Z');
  });

  it('can be one that never held an event: it is never created afterwards', async () => {
    const result = await retire(RetirePolicy.Checkpoint, 'conv-never');
    expect(result).toMatchObject({ retiredNow: true, eventsRemoved: 0 });
    expect(result.retirement.signed).toMatchObject({ head: 0 });
    const error = await store.append('conv-never', 0, [message('x')]).catch((e: unknown) => e);
    expect(error).toMatchObject({ code: 'failed_precondition' });
    expect(store.listPartitions().map((p) => p.partition)).not.toContain('conv-never');
  });

  it('is not retired by a writer that lost the lease: a lower fencing token is fenced, nothing changes', async () => {
    await store.append(P, head, [message('newer holder')], { fencingToken: 4 });
    const error = await store
      .retire(P, { policy: RetirePolicy.Delete, actor: 'a', reason: 'r', fencingToken: 3 })
      .catch((e: unknown) => e);
    expect(error).toMatchObject({ code: 'fenced' });
    expect(store.head(P).head).toBe(head + 2);
    expect(await rawKeysOf(P)).toBeGreaterThan(0);
    const ok = await store.retire(P, {
      policy: RetirePolicy.Delete,
      actor: 'a',
      reason: 'r',
      fencingToken: 4,
    });
    expect(ok.retiredNow).toBe(true);
  });

  it('needs a policy, an actor and a reason', async () => {
    const bad = [
      { policy: 'keep' as RetirePolicy, actor: 'a', reason: 'r' },
      { policy: RetirePolicy.Delete, actor: ' ', reason: 'r' },
      { policy: RetirePolicy.Delete, actor: 'a', reason: '' },
    ];
    for (const options of bad) {
      expect(await store.retire(P, options).catch((e: unknown) => e)).toMatchObject({
        code: 'invalid_argument',
      });
    }
    expect(store.head(P).head).toBe(head);
    await store.close();
    let retired = 0;
    await editRaw(dir.path, async (db) => {
      if ((await db.get(retiredKey(P))) !== undefined) retired += 1;
    });
    expect(retired).toBe(0);
    await reopen();
  });
});
