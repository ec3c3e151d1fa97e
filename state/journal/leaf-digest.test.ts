import { describe, expect, it } from '@jest/globals';

import { AppError } from '../../common/errors';
import { toHex } from './hex';
import { LeafHasher, leafDigest } from './leaf-digest';
import { nodeSha256 } from './node-sha256';

// Known answers computed outside this code base. Recompute any of them with, e.g.
//   python3 -c "import hashlib,struct;u=lambda n:struct.pack('>Q',n);k=b'message_received';p=b'';
//   print(hashlib.sha256(u(0)+u(len(k))+k+u(len(p))+p).hexdigest())"
// i.e. SHA-256( u64be position ‖ u64be len(kind) ‖ kind ‖ u64be len(payload) ‖ payload ).
const knownAnswers: { position: number; kind: string; payload: Uint8Array; leafHex: string }[] = [
  {
    // 00..00 | 00..10 "message_received" | 00..00 (no payload)
    position: 0,
    kind: 'message_received',
    payload: new Uint8Array(),
    leafHex: '736efea107b2962495869e7f701fa64c71e89e10067baa1ada81324f583533ba',
  },
  {
    // 00..01 | 00..0b "signed_root" | 00..03 "abc"
    position: 1,
    kind: 'signed_root',
    payload: new TextEncoder().encode('abc'),
    leafHex: '8d923cf01608a093ef515f677f3308ad5fa9d59475149d2348c124ca687607f1',
  },
  {
    // position 2^32+5 = 00 00 00 01 00 00 00 05: the high word must be written too.
    position: 2 ** 32 + 5,
    kind: 'tool_result',
    payload: new Uint8Array(100).fill(0x61),
    leafHex: 'c0b6d684f72a8e9d2ac3f7dc116846998428508999947c634a31d8e0e6914ffe',
  },
  {
    // len(kind) counts UTF-8 bytes: "é" is c3 a9, length 2, not 1.
    position: 7,
    kind: 'é',
    payload: Uint8Array.of(0),
    leafHex: '1457fd64e377d717b7bfc27cec0b673bfb57b6473ee94c1eb8acbd40a50b2b00',
  },
];

describe('leafDigest', () => {
  it.each(knownAnswers)('matches the known answer at position $position ($kind)', (c) => {
    expect(toHex(leafDigest(nodeSha256, c.position, c.kind, c.payload))).toBe(c.leafHex);
  });

  it('gives the same digests when one hasher is reused across sizes and kinds', () => {
    const hasher = new LeafHasher(nodeSha256);
    const big = new Uint8Array(5000).fill(7);
    const first = toHex(hasher.digest(3, 'tool_result', big));
    for (const c of knownAnswers) {
      expect(toHex(hasher.digest(c.position, c.kind, c.payload))).toBe(c.leafHex);
    }
    expect(toHex(hasher.digest(3, 'tool_result', big))).toBe(first);
  });

  it('binds position, kind and the kind/payload split', () => {
    const base = toHex(leafDigest(nodeSha256, 0, 'ab', Uint8Array.of(0x63)));
    expect(toHex(leafDigest(nodeSha256, 1, 'ab', Uint8Array.of(0x63)))).not.toBe(base);
    expect(toHex(leafDigest(nodeSha256, 0, 'abc', new Uint8Array()))).not.toBe(base);
    expect(toHex(leafDigest(nodeSha256, 0, 'a', Uint8Array.of(0x62, 0x63)))).not.toBe(base);
  });

  it.each([-1, 1.5, 2 ** 53, Number.NaN])(
    'rejects position %p with invalid_argument',
    (position) => {
      const run = (): Uint8Array =>
        leafDigest(nodeSha256, position, 'model_call', new Uint8Array());
      expect(run).toThrow(AppError);
      expect(run).toThrow(/^event position must be a non-negative integer below 2\^53, got /);
    },
  );
});
