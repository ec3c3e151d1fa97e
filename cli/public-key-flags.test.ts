import { describe, expect, it } from '@jest/globals';

import { UsageError } from './cli-support';
import { parsePublicKey, parsePublicKeyFlags } from './public-key-flags';

const KEY = new Uint8Array(32).map((_, i) => i + 1);
const HEX = Buffer.from(KEY).toString('hex');
const BASE64 = Buffer.from(KEY).toString('base64');

describe('parsePublicKey', () => {
  it.each([
    ['64 hex digits', HEX],
    ['upper-case hex', HEX.toUpperCase()],
    ['base64', BASE64],
    ['base64 with blanks around it', ` ${BASE64}\n`],
  ])('reads %s', (_, text) => {
    expect(parsePublicKey(text)).toEqual(KEY);
  });

  it.each([
    ['63 hex digits', HEX.slice(1)],
    ['the base64 of 31 bytes', Buffer.from(KEY.subarray(1)).toString('base64')],
    ['base64 without its padding', BASE64.replace(/=+$/u, '')],
    ['a PEM file', '-----BEGIN PUBLIC KEY-----'],
  ])('refuses %s, naming the flag and the form', (_, text) => {
    expect(() => parsePublicKey(text, '--approval-key')).toThrow(UsageError);
    expect(() => parsePublicKey(text, '--approval-key')).toThrow(
      /^--approval-key ".*" is not a raw ed25519 public key: give 64 hex digits or the base64 of 32 bytes$/u,
    );
  });
});

describe('parsePublicKeyFlags', () => {
  it('reads every --public-key in order, and none as none', () => {
    const other = new Uint8Array(32).fill(9);
    expect(
      parsePublicKeyFlags({ 'public-key': [HEX, Buffer.from(other).toString('base64')] }),
    ).toEqual([KEY, other]);
    expect(parsePublicKeyFlags({})).toEqual([]);
  });

  it('refuses the whole list when one key does not read', () => {
    expect(() => parsePublicKeyFlags({ 'public-key': [HEX, 'nope'] })).toThrow(
      '--public-key "nope" is not a raw ed25519 public key',
    );
  });
});
