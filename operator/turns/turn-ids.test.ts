import { describe, expect, it } from '@jest/globals';
import { AppError } from '../../common/errors';
import { turnIdFor } from './turn-ids';

describe('turnIdFor', () => {
  // Known answers, recomputed with coreutils (bash):
  //   printf '%s\0%s\0%s' 'polychrome/turn/v1' "$conversation" "$key" | sha256sum | cut -c1-32
  it.each([
    ['conv-1', 'key-1', 'turn_cd203d884052f0dca9e7c3bda4b2c8c2'],
    ['c2f9a3f6-0d4e-4b8a-9a51-3b0f1f9a7c11', 'k-é', 'turn_fbaedcfbbeb6b91770bf0af058618acc'],
    ['ab', 'c', 'turn_186d2e4950954ad35f4064381336c8a0'],
    ['a', 'bc', 'turn_fc65ca7188d55ee5221931f58afdc4ba'],
  ])('(%j, %j) -> %s', (conversationId, key, expected) => {
    expect(turnIdFor(conversationId, key)).toBe(expected);
  });

  it('is stable for an exact retry and differs when the key or the conversation differs', () => {
    const id = turnIdFor('conv-1', 'key-1');
    expect(turnIdFor('conv-1', 'key-1')).toBe(id);
    const others = [
      turnIdFor('conv-1', 'key-2'),
      turnIdFor('conv-2', 'key-1'),
      turnIdFor('conv-1', 'key-1 '),
      turnIdFor('conv-1', 'KEY-1'),
    ];
    expect(new Set([id, ...others]).size).toBe(5);
  });

  it('separates the parts: ("ab","c") and ("a","bc") do not collide', () => {
    // Without the separators both would hash "polychrome/turn/v1abc".
    expect(turnIdFor('ab', 'c')).not.toBe(turnIdFor('a', 'bc'));
    expect(turnIdFor('abc', 'x')).not.toBe(turnIdFor('ab', 'cx'));
  });

  it('accepts a NUL in the key (it is the last part)', () => {
    expect(turnIdFor('a', 'b\u0000c')).toMatch(/^turn_[0-9a-f]{32}$/);
    expect(turnIdFor('a', 'b\u0000c')).not.toBe(turnIdFor('a', 'b'));
  });

  it.each([
    ['', 'k', 'turn id: the conversation id must be non-empty and hold no NUL character'],
    // ("a\0b", "c") would hash the same bytes as ("a", "b\0c").
    ['a\u0000b', 'c', 'turn id: the conversation id must be non-empty and hold no NUL character'],
    [
      'conv-1',
      '',
      'turn id for conversation conv-1: the idempotency key is empty; send a non-empty key',
    ],
  ])('rejects (%j, %j)', (conversationId, key, message) => {
    let caught: unknown;
    try {
      turnIdFor(conversationId, key);
    } catch (error) {
      caught = error;
    }
    expect(caught).toBeInstanceOf(AppError);
    expect(caught).toMatchObject({ code: 'invalid_argument', message });
  });
});
