import { describe, expect, it } from '@jest/globals';

import { toHex } from './hex';
import { nodeSha256 } from './node-sha256';

describe('nodeSha256', () => {
  it('gives the FIPS 180-2 digests', () => {
    expect(toHex(nodeSha256(new Uint8Array()))).toBe(
      'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855',
    );
    expect(toHex(nodeSha256(new TextEncoder().encode('abc')))).toBe(
      'ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad',
    );
  });

  it('returns a fresh 32-byte array per call that later calls do not touch', () => {
    const digests = Array.from({ length: 600 }, (_, i) =>
      nodeSha256(Uint8Array.of(i & 0xff, i >> 8)),
    );
    const hex = digests.map(toHex);
    digests[0]!.fill(0);
    expect(digests.every((d) => d.length === 32)).toBe(true);
    expect(digests.slice(1).map(toHex)).toEqual(hex.slice(1));
    expect(toHex(nodeSha256(Uint8Array.of(0, 0)))).toBe(hex[0]);
    expect(new Set(hex).size).toBe(600);
  });
});
