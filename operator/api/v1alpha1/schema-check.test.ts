import { describe, expect, it } from '@jest/globals';
import { integer, list, object, quantity, required, string } from './schema-builder';
import { checkAgainstSchema, isPlainObject } from './schema-check';

const schema = object(
  {
    name: required(string({ description: 'n', maxLength: 5, pattern: '^[a-z]+$' })),
    count: integer({ description: 'c', format: 'int32', minimum: 1, maximum: 3 }),
    size: quantity({ description: 's' }),
    tags: list(string({ description: 't', maxLength: 3 }), {
      description: 'ts',
      maxItems: 2,
      listType: 'set',
    }),
  },
  { description: 'x' },
).schema;

describe('isPlainObject', () => {
  it('accepts mappings only', () => {
    expect(isPlainObject({})).toBe(true);
    expect(isPlainObject([])).toBe(false);
    expect(isPlainObject(null)).toBe(false);
    expect(isPlainObject('a')).toBe(false);
  });
});

describe('checkAgainstSchema', () => {
  it('passes a valid value', () => {
    expect(
      checkAgainstSchema(schema, { name: 'abc', count: 2, size: '1Gi', tags: ['a'] }, 'x'),
    ).toEqual([]);
    expect(checkAgainstSchema(schema, { name: 'abc', size: 2 }, 'x')).toEqual([]);
  });

  it('reports each violation with its path, in the API server wording', () => {
    expect(
      checkAgainstSchema(
        schema,
        { count: 0, size: 'lots', tags: ['a', 'a', 'b'], extra: true },
        'x',
      ),
    ).toEqual([
      'x.name: Required value',
      'x.count: Invalid value: 0: x.count in body should be greater than or equal to 1',
      expect.stringMatching(/^x\.size: Invalid value: "lots": x\.size in body should match/),
      'x.tags: Too many: 3: must have at most 2 items',
      'x.tags[1]: Duplicate value: "a"',
      'x.extra: unknown field',
    ]);
    expect(checkAgainstSchema(schema, { name: 'ABCDEF', count: 1.5 }, 'x')).toEqual([
      'x.name: Too long: may not be more than 5 bytes',
      `x.name: Invalid value: "ABCDEF": x.name in body should match '^[a-z]+$'`,
      'x.count: Invalid value: 1.5: must be of type integer',
    ]);
    expect(checkAgainstSchema(schema, [], 'x')).toEqual([
      'x: Invalid value: []: must be of type object',
    ]);
  });
});
