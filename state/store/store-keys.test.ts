import { describe, expect, it } from '@jest/globals';

import { AppError } from '../../common/errors';
import { toHex } from '../journal/hex';
import { decodeHeadRecord, encodeHeadRecord } from './head-record';
import { KeyedMutex } from './keyed-mutex';
import { assertPartitionName, isPartitionName } from '../../common/partition-name';
import {
  decodeEventValue,
  decodeFence,
  encodeEventValue,
  encodeFence,
  eventKey,
  fenceKey,
  headKey,
  nodeKey,
  partitionOfKey,
  partitionRange,
  positionOfKey,
  positionRange,
  RecordTag,
} from './store-keys';

function compare(a: Uint8Array, b: Uint8Array): number {
  return Buffer.compare(a, b);
}

describe('key layout', () => {
  it('orders events by position, big-endian, across byte boundaries', () => {
    const positions = [0, 1, 255, 256, 65_535, 65_536, 2 ** 32 - 1, 2 ** 32, 2 ** 53 - 1];
    const keys = positions.map((p) => eventKey('conv-a', p));
    const sorted = [...keys].sort(compare);
    expect(sorted.map(positionOfKey)).toEqual(positions);
  });

  it('keeps one partition range free of a longer name that shares its prefix', () => {
    const range = partitionRange('conv-a');
    const inside = [eventKey('conv-a', 9), headKey('conv-a'), nodeKey('conv-a', 2 ** 40)];
    const outside = [
      eventKey('conv-ab', 0),
      headKey('conv-a-b'),
      nodeKey('conv-', 0),
      headKey('conv-b'),
    ];
    for (const key of inside)
      expect(compare(key, range.gte) >= 0 && compare(key, range.lt) < 0).toBe(true);
    for (const key of outside)
      expect(compare(key, range.gte) >= 0 && compare(key, range.lt) < 0).toBe(false);
  });

  it('separates events, head and nodes, and names the partition of a key', () => {
    const events = positionRange('conv-a', RecordTag.Event);
    expect(compare(eventKey('conv-a', 2 ** 53 - 1), events.lt)).toBeLessThan(0);
    expect(compare(headKey('conv-a'), events.lt)).toBeGreaterThanOrEqual(0);
    expect(compare(headKey('conv-a'), nodeKey('conv-a', 0))).toBeLessThan(0);
    const window = positionRange('conv-a', RecordTag.Node, 3, 5);
    expect(toHex(window.gte)).toBe(toHex(nodeKey('conv-a', 3)));
    expect(toHex(window.lt)).toBe(toHex(nodeKey('conv-a', 5)));
    expect(partitionOfKey(nodeKey('conv-xyz', 4))).toBe('conv-xyz');
    expect(partitionOfKey(Uint8Array.of(0x4d, 1))).toBeUndefined();
  });

  it('keeps the fencing mark inside its partition and out of the event and node ranges', () => {
    const fence = fenceKey('conv-a');
    const inRange = (range: { gte: Uint8Array; lt: Uint8Array }): boolean =>
      compare(fence, range.gte) >= 0 && compare(fence, range.lt) < 0;
    expect(inRange(partitionRange('conv-a'))).toBe(true);
    expect(inRange(positionRange('conv-a', RecordTag.Event))).toBe(false);
    expect(inRange(positionRange('conv-a', RecordTag.Node))).toBe(false);
    expect(inRange(partitionRange('conv-ab'))).toBe(false);
    expect(partitionOfKey(fence)).toBe('conv-a');
    expect(decodeFence(encodeFence(2 ** 40 + 3), 'conv-a')).toBe(2 ** 40 + 3);
    expect(() => decodeFence(new Uint8Array(7), 'conv-a')).toThrow(/fencing mark is 7 bytes/);
  });

  it('round-trips an event value and reports a truncated one as data_loss', () => {
    const value = encodeEventValue(new TextEncoder().encode('tool_call'), Uint8Array.of(1, 2, 3));
    expect(decodeEventValue(value, 'conv-a', 4)).toEqual({
      kind: 'tool_call',
      payload: Uint8Array.of(1, 2, 3),
    });
    expect(() => decodeEventValue(value.subarray(0, 5), 'conv-a', 4)).toThrow(
      'conv-a: the stored event at 4 is truncated (5 bytes)',
    );
  });
});

describe('head record', () => {
  const peaks = [new Uint8Array(32).fill(1), new Uint8Array(32).fill(2)];
  it('round-trips', () => {
    const record = { head: 5, genesisKeyId: 'ab'.repeat(16), peaks };
    expect(decodeHeadRecord(encodeHeadRecord(record), 'conv-a')).toEqual(record);
  });

  it.each([
    ['a wrong version', (b: Uint8Array) => b.fill(9, 0, 1)],
    ['a peak count that does not match the head', (b: Uint8Array) => b.fill(3, 25, 26)],
    ['a missing peak byte', (b: Uint8Array) => b.subarray(0, b.length - 1)],
  ])('reports %s as data_loss', (_name, damage) => {
    const bytes = damage(encodeHeadRecord({ head: 5, genesisKeyId: 'ab'.repeat(16), peaks }));
    let error: unknown;
    try {
      decodeHeadRecord(bytes, 'conv-a');
    } catch (caught) {
      error = caught;
    }
    expect(error instanceof AppError && error.code).toBe('data_loss');
    expect(error instanceof AppError && error.message).toContain(
      'conv-a: the head record is damaged',
    );
  });
});

describe('partition names', () => {
  it.each([
    'conv-a',
    'conv-0',
    `conv-${'a'.repeat(63)}`,
    'conv-3f2a9c1e-8b4d-4e0a-9c6f-2d7e5b1a0c93',
  ])('accepts %s', (name) => {
    expect(isPartitionName(name)).toBe(true);
  });
  it.each([
    'conv-',
    'conv-A',
    'conv-_a',
    'conv--a',
    `conv-${'a'.repeat(64)}`,
    'conv-a b',
    'Conv-a',
    'x',
    '',
  ])('rejects %j with the expected shape in the message', (name) => {
    expect(isPartitionName(name)).toBe(false);
    expect(() => assertPartitionName(name)).toThrow(
      'expected "conv-" followed by a Kubernetes uid',
    );
  });
  it('rejects a value that is not a string', () => {
    expect(() => assertPartitionName(42)).toThrow('partition name number is not valid');
  });
});

describe('KeyedMutex', () => {
  it('runs tasks of one key in order, of different keys concurrently, and frees idle keys', async () => {
    const mutex = new KeyedMutex();
    const log: string[] = [];
    let releaseA: () => void = () => undefined;
    const blockA = new Promise<void>((resolve) => {
      releaseA = resolve;
    });
    const a1 = mutex.run('a', async () => {
      log.push('a1 start');
      await blockA;
      log.push('a1 end');
    });
    const a2 = mutex.run('a', () => {
      log.push('a2');
      return Promise.reject(new Error('a2 fails'));
    });
    const a3 = mutex.run('a', () => {
      log.push('a3');
      return Promise.resolve(3);
    });
    const b1 = mutex.run('b', () => {
      log.push('b1');
      return Promise.resolve(1);
    });
    await b1;
    expect(log).toEqual(['a1 start', 'b1']);
    releaseA();
    await a1;
    await expect(a2).rejects.toThrow('a2 fails');
    expect(await a3).toBe(3);
    expect(log).toEqual(['a1 start', 'b1', 'a1 end', 'a2', 'a3']);
    expect(mutex.activeKeys).toBe(0);
  });
});
