import { describe, expect, it } from '@jest/globals';
import { canonicalJson, isJsonObject, isJsonValue } from './canonical-json';

describe('canonicalJson', () => {
  it.each([
    ['null', null, 'null'],
    ['booleans', [true, false], '[true,false]'],
    [
      'sorted keys, no whitespace',
      { b: 1, a: 2, c: { z: null, y: [] } },
      '{"a":2,"b":1,"c":{"y":[],"z":null}}',
    ],
    ['nested arrays keep their order', [[3, 1], [{ b: 1, a: 1 }]], '[[3,1],[{"a":1,"b":1}]]'],
    [
      'keys sorted by UTF-16 code unit, not locale',
      { b: 1, B: 2, é: 3, a: 4, '10': 5, '9': 6 },
      '{"10":5,"9":6,"B":2,"a":4,"b":1,"é":3}',
    ],
    // U+1F600 (surrogates D83D DE00) sorts before U+FF5E: code units, not code points.
    ['astral keys sort by surrogate', { '～': 1, '😀': 2 }, '{"😀":2,"～":1}'],
    [
      'unicode stays literal, controls are escaped',
      { s: 'héllo 😀\n\t"\\\u0001' },
      '{"s":"héllo 😀\\n\\t\\"\\\\\\u0001"}',
    ],
    ['lone surrogate is escaped', '\ud800', '"\\ud800"'],
    ['integers', [0, -0, 1, -1, 9007199254740991], '[0,0,1,-1,9007199254740991]'],
    [
      'fractions and exponents',
      [0.1, 1.5e-7, 1e21, 123456789012345680000, -2.5],
      '[0.1,1.5e-7,1e+21,123456789012345680000,-2.5]',
    ],
    ['undefined members are omitted', { a: undefined, b: 1 }, '{"b":1}'],
    ['empty containers', { a: {}, b: [] }, '{"a":{},"b":[]}'],
    ['null-prototype objects', { __proto__: null, y: 1, x: 2 }, '{"x":2,"y":1}'],
  ])('%s', (_name, input, expected) => {
    expect(canonicalJson(input)).toBe(expected);
  });

  it('is stable under key insertion order', () => {
    const a = { x: 1, y: { p: 1, q: 2 } };
    const b = { y: { q: 2, p: 1 }, x: 1 };
    expect(canonicalJson(a)).toBe(canonicalJson(b));
  });

  it('round-trips through JSON.parse', () => {
    const value = { z: [1, 'two', { three: 3 }], a: 'ü' };
    expect(canonicalJson(JSON.parse(canonicalJson(value)))).toBe(canonicalJson(value));
  });

  it.each([
    ['NaN', { a: Number.NaN }, 'canonical JSON: $.a is NaN'],
    ['Infinity', [1, Number.POSITIVE_INFINITY], 'canonical JSON: $[1] is Infinity'],
    ['bigint', { n: 1n }, 'canonical JSON: $.n is bigint'],
    ['function', { f: () => 1 }, 'canonical JSON: $.f is function'],
    ['undefined in an array', [undefined], 'canonical JSON: $[0] is undefined'],
    ['top-level undefined', undefined, 'canonical JSON: $ is undefined'],
    ['a Date', { d: new Date(0) }, 'canonical JSON: $.d is an object that is not plain'],
    ['a Map', new Map(), 'canonical JSON: $ is an object that is not plain'],
  ])('rejects %s', (_name, input, prefix) => {
    expect(() => canonicalJson(input)).toThrow(prefix);
  });

  it('rejects a cycle but accepts a shared, acyclic object', () => {
    const shared = { k: 1 };
    expect(canonicalJson({ a: shared, b: shared })).toBe('{"a":{"k":1},"b":{"k":1}}');
    const cyclic: Record<string, unknown> = {};
    cyclic.self = cyclic;
    expect(() => canonicalJson(cyclic)).toThrow('canonical JSON: $.self is a cycle');
  });
});

describe('isJsonObject / isJsonValue', () => {
  it.each([
    [{ a: [1, { b: null }] }, true, true],
    [{}, true, true],
    [[1], false, true],
    ['s', false, true],
    [null, false, true],
    [{ a: undefined }, false, false],
    [{ a: { b: Number.NaN } }, false, false],
    [{ d: new Date(0) }, false, false],
    [new Date(0), false, false],
  ])('%j: object %s, value %s', (input, isObject, isValue) => {
    expect(isJsonObject(input)).toBe(isObject);
    expect(isJsonValue(input)).toBe(isValue);
  });
});
