import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';

import { createLevelKv, type KvStore } from './level-kv';
import { StorageFaultReason, StorageGuard, storageFaultOf } from './storage-guard';

const key = new Uint8Array([1]);
const value = new Uint8Array([2]);

describe('storageFaultOf', () => {
  const coded = (message: string, code: string): Error =>
    Object.assign(new Error(message), { code });

  it.each([
    [
      'LevelDB ENOSPC',
      coded('IO error: /v/000005.log: No space left on device', 'LEVEL_IO_ERROR'),
      StorageFaultReason.NoSpace,
    ],
    [
      'Node ENOSPC',
      coded('ENOSPC: no space left on device, write', 'ENOSPC'),
      StorageFaultReason.NoSpace,
    ],
    [
      'LevelDB EDQUOT',
      coded('IO error: /v/MANIFEST-000002: Disk quota exceeded', 'LEVEL_IO_ERROR'),
      StorageFaultReason.Quota,
    ],
    [
      'Node EROFS',
      coded('EROFS: read-only file system, open', 'EROFS'),
      StorageFaultReason.ReadOnly,
    ],
    [
      'LevelDB EIO',
      coded('IO error: /v/000007.ldb: Input/output error', 'LEVEL_IO_ERROR'),
      StorageFaultReason.IoError,
    ],
    [
      'another LevelDB I/O error',
      coded('IO error: /v/LOCK: Stale file handle', 'LEVEL_IO_ERROR'),
      StorageFaultReason.IoError,
    ],
  ])('classifies %s', (_label, error, reason) => {
    expect(storageFaultOf(error)?.reason).toBe(reason);
  });

  it.each([
    ['corruption', coded('Corruption: bad block', 'LEVEL_CORRUPTION')],
    ['a closed database', coded('Database is not open', 'LEVEL_DATABASE_NOT_OPEN')],
    ['a non-error', 'ENOSPC'],
  ])('leaves %s alone', (_label, error) => {
    expect(storageFaultOf(error)).toBeUndefined();
  });
});

describe('StorageGuard over LevelDB', () => {
  let dir: string;
  let inner: KvStore;
  let guard: StorageGuard;

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'storage-guard-'));
    inner = createLevelKv(join(dir, 'db'));
    guard = new StorageGuard(inner);
    await guard.open();
  });

  afterAll(async () => {
    await guard.close();
    await rm(dir, { recursive: true, force: true });
  });

  it('refuses writes while space is short, naming what is full and what to do; reads go on', async () => {
    await guard.write([{ type: 'put', key, value }], true);
    guard.setLowSpace({ reason: StorageFaultReason.LowSpace, message: '5 bytes free' });
    const refused = guard.write([{ type: 'del', key }], true);
    await expect(refused).rejects.toMatchObject({
      code: 'resource_exhausted',
      details: { reason: 'low_space' },
    });
    await expect(refused).rejects.toThrow(
      /the journal volume is full \(5 bytes free\); nothing was written\. Free space on the state plane's volume or grow it/u,
    );
    await expect(guard.compactRange({ gte: key, lt: new Uint8Array([9]) })).rejects.toMatchObject({
      code: 'resource_exhausted',
    });
    expect(await inner.get(key)).toEqual(value);
    expect(guard.needsReopen()).toBe(false);

    guard.setLowSpace(undefined);
    expect(guard.fault()).toBeUndefined();
    await guard.write([{ type: 'del', key }], true);
    expect(await guard.get(key)).toBeUndefined();
  });

  it('fails a read that a reopen cut short with unavailable, never as a short read', async () => {
    const many = Array.from({ length: 500 }, (_, i) => ({
      type: 'put' as const,
      key: new Uint8Array([7, i >> 8, i & 0xff]),
      value,
    }));
    await guard.write(many, true);
    const seen: Uint8Array[] = [];
    const read = (async () => {
      for await (const k of guard.keys({ gte: new Uint8Array([7]), lt: new Uint8Array([8]) })) {
        seen.push(k);
        if (seen.length === 1) await guard.reopen();
      }
    })();
    await expect(read).rejects.toMatchObject({ code: 'unavailable' });
    expect(seen.length).toBeLessThan(500);
    // After the reopen a read sees every key.
    let count = 0;
    for await (const k of guard.keys({ gte: new Uint8Array([7]), lt: new Uint8Array([8]) })) {
      void k;
      count += 1;
    }
    expect(count).toBe(500);
  });

  it('reopens the database in place', async () => {
    await guard.write([{ type: 'put', key, value }], true);
    await guard.reopen();
    expect(await guard.get(key)).toEqual(value);
  });
});
