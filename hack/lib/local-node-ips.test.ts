import { describe, expect, it } from '@jest/globals';
import { readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import {
  listeningIPv4,
  loopbackBlockOf,
  loopbackCidr,
  LoopbackAllocator,
  LoopbackPoolExhaustedError,
  loopbackAddress,
  loopbackIndex,
  loopbackPoolSize,
} from './local-node-ips';

describe('loopbackAddress and loopbackIndex', () => {
  it.each([
    [0, '127.0.1.1'],
    [253, '127.0.1.254'],
    [254, '127.0.2.1'],
    [loopbackPoolSize - 1, '127.0.255.254'],
  ])('index %i is %s and back', (index, ip) => {
    expect(loopbackAddress(index)).toBe(ip);
    expect(loopbackIndex(ip)).toBe(index);
  });

  it.each([
    '127.0.0.1',
    '127.0.1.0',
    '127.0.1.255',
    '127.1.1.1',
    '10.0.1.1',
    'localhost',
    '127.0.256.1',
  ])('%s is not a pod address', (ip) => {
    expect(loopbackIndex(ip)).toBeUndefined();
  });

  it('refuses an index outside the pool and a block outside 127.0.0.0/8', () => {
    expect(() => loopbackAddress(loopbackPoolSize)).toThrow(RangeError);
    expect(() => loopbackAddress(-1)).toThrow('loopback index -1 is outside 0..64769');
    expect(() => loopbackAddress(0, 256)).toThrow('loopback block 256 is outside 0..255');
  });

  it('places other blocks in their own second octet', () => {
    expect(loopbackAddress(0, 7)).toBe('127.7.1.1');
    expect(loopbackIndex('127.7.1.1', 7)).toBe(0);
    expect(loopbackIndex('127.7.1.1', 0)).toBeUndefined();
    expect(loopbackIndex('127.0.1.1', 7)).toBeUndefined();
  });
});

describe('loopbackCidr and loopbackBlockOf', () => {
  it.each([0, 7, 255])('block %i round-trips through its CIDR', (block) => {
    expect(loopbackBlockOf(loopbackCidr(block))).toBe(block);
  });

  it.each(['10.0.0.0/16', '127.0.1.0/24', '127.256.0.0/16', '127.1.0.0/8', ''])(
    '%s is not a loopback block',
    (cidr) => {
      expect(loopbackBlockOf(cidr)).toBeUndefined();
    },
  );

  it('writes the block as a /16', () => {
    expect(loopbackCidr(3)).toBe('127.3.0.0/16');
  });
});

describe('LoopbackAllocator', () => {
  it('hands out addresses from 127.0.1.1 upward, skipping .255 and .0', () => {
    const ips = new LoopbackAllocator();
    const first = Array.from({ length: 256 }, () => ips.allocate());
    expect(first.slice(0, 2)).toEqual(['127.0.1.1', '127.0.1.2']);
    expect(first[253]).toBe('127.0.1.254');
    expect(first[254]).toBe('127.0.2.1');
    expect(new Set(first).size).toBe(256);
    expect(ips.inUse).toBe(256);
  });

  it('does not reuse a released address before the rest of the pool', () => {
    const ips = new LoopbackAllocator();
    const a = ips.allocate();
    ips.allocate();
    ips.release(a);
    expect(ips.allocate()).toBe('127.0.1.3');
    expect(ips.inUse).toBe(2);
  });

  it('claims a given address once, and never a foreign one', () => {
    const ips = new LoopbackAllocator();
    expect(ips.claim('127.0.1.1')).toBe(true);
    expect(ips.claim('127.0.1.1')).toBe(false);
    expect(ips.claim('127.0.0.1')).toBe(false);
    expect(ips.claim('127.1.1.2')).toBe(false);
    expect(ips.allocate()).toBe('127.0.1.2');
  });

  it('hands out addresses of its own block only', () => {
    const ips = new LoopbackAllocator(9);
    expect([ips.allocate(), ips.allocate()]).toEqual(['127.9.1.1', '127.9.1.2']);
    ips.release('127.0.1.1');
    expect(ips.inUse).toBe(2);
  });

  it('says so when the pool is exhausted and recovers after a release', () => {
    const ips = new LoopbackAllocator();
    for (let i = 0; i < loopbackPoolSize; i++) ips.allocate();
    expect(() => ips.allocate()).toThrow(LoopbackPoolExhaustedError);
    ips.release('127.0.9.9');
    expect(ips.allocate()).toBe('127.0.9.9');
  });
});

describe('addresses another process listens on', () => {
  // Two lines as Linux writes them: 127.4.1.1:7070 listening, and an established
  // connection from 127.0.1.2 (state 01) that must not count.
  const procNetTcp = [
    '  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode',
    '   0: 0101047F:1B9E 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1 1 0000000000000000 100 0 0 10 0',
    '   1: 0201007F:9C40 0100007F:1F90 01 00000000:00000000 00:00000000 00000000     0        0 2 1 0000000000000000 20 4 30 10 -1',
  ].join('\n');

  it('reads the listening sockets of /proc/net/tcp, and only those', () => {
    expect([...listeningIPv4(procNetTcp)]).toEqual(['127.4.1.1']);
  });

  it('skips a pod address a process left behind still listens on', () => {
    const allocator = new LoopbackAllocator(4, () => listeningIPv4(procNetTcp));
    expect(allocator.allocate()).toBe('127.4.1.2');
    // Claiming it explicitly (the node's own pod after a restart) is still allowed.
    expect(allocator.claim('127.4.1.1')).toBe(true);
  });

  it('sees a real listener on this machine', async () => {
    const server = createServer();
    await new Promise<void>((resolve) => server.listen(0, '127.9.1.1', resolve));
    try {
      const allocator = new LoopbackAllocator(9, () =>
        listeningIPv4(readFileSync('/proc/net/tcp', 'utf8')),
      );
      expect(allocator.allocate()).toBe('127.9.1.2');
    } finally {
      await new Promise((resolve) => server.close(resolve));
    }
  });
});
