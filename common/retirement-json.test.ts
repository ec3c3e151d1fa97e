import { describe, expect, it } from '@jest/globals';

import { formatRetirementJson, parseRetirementJson, RETIREMENT_FORMAT } from './retirement-json';

const signed = {
  partition: 'conv-1',
  policy: 'checkpoint',
  retiredAtMs: 1_700_000_000_000,
  actor: 'cp-0',
  reason: 'deleted',
  signed: {
    head: 12,
    root: new Uint8Array(32).fill(7),
    keyId: 'ab'.repeat(16),
    signature: new Uint8Array(64).fill(9),
  },
} as const;

describe('the retirement record file', () => {
  it('reads back what it wrote', () => {
    const text = formatRetirementJson(signed);
    expect(JSON.parse(text)).toMatchObject({ format: RETIREMENT_FORMAT, head: 12 });
    expect(parseRetirementJson(text)).toEqual({
      partition: 'conv-1',
      head: 12,
      retiredAtMs: 1_700_000_000_000,
      keyId: 'ab'.repeat(16),
      root: signed.signed.root,
      signature: signed.signed.signature,
    });
  });

  const valid = JSON.parse(formatRetirementJson(signed)) as Record<string, unknown>;
  it.each([
    ['not JSON', '{', 'it is not JSON'],
    ['an array', '[]', 'it is not a JSON object'],
    ['another format', JSON.stringify({ ...valid, format: 'x' }), 'its format is not'],
    [
      'a delete tombstone',
      formatRetirementJson({ ...signed, policy: 'delete', signed: undefined }),
      'policy delete keeps nothing signed',
    ],
    ['no partition', JSON.stringify({ ...valid, partition: '' }), 'names no partition'],
    ['a fractional head', JSON.stringify({ ...valid, head: 1.5 }), 'head is not a whole number'],
    ['a short key id', JSON.stringify({ ...valid, keyId: 'ab' }), 'keyId is not 32 hex digits'],
    ['a short root', JSON.stringify({ ...valid, rootHex: 'aa' }), 'rootHex is not 64 hex'],
    [
      'a signature that is not hex',
      JSON.stringify({ ...valid, signatureHex: 'zz'.repeat(64) }),
      'signatureHex is not 128 hex',
    ],
  ])('refuses %s, saying what is wrong', (_, text, message) => {
    const parsed = parseRetirementJson(text);
    expect(typeof parsed).toBe('string');
    expect(parsed).toContain(message);
  });
});
