import { describe, expect, it } from '@jest/globals';
import { compareResourceVersions, isAtLeast } from './resource-version';

describe('compareResourceVersions (KEP-5504)', () => {
  it.each([
    ['1', '1', 0],
    ['9', '10', -1],
    ['10', '9', 1],
    ['123', '124', -1],
    ['99999999999999999999999', '100000000000000000000000', -1],
    ['5', '4', 1],
  ] as const)('%s vs %s is %d', (a, b, order) => {
    expect(compareResourceVersions(a, b)).toBe(order);
  });

  it.each([
    ['', '1'],
    ['0', '1'],
    ['01', '1'],
    ['1a', '1'],
    ['-1', '1'],
    [' 1', '1'],
  ])('%j does not compare', (a, b) => {
    expect(compareResourceVersions(a, b)).toBeUndefined();
    expect(compareResourceVersions(b, a)).toBeUndefined();
  });

  it('isAtLeast orders comparable versions and falls back to equality', () => {
    expect(isAtLeast('21', '20')).toBe(true);
    expect(isAtLeast('20', '20')).toBe(true);
    expect(isAtLeast('19', '20')).toBe(false);
    expect(isAtLeast('x', 'x')).toBe(true);
    expect(isAtLeast('y', 'x')).toBe(false);
  });
});
