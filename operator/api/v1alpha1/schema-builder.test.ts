import { describe, expect, it } from '@jest/globals';
import type { Infer } from './schema-builder';
import { enumOf, integer, list, object, quantity, required, string } from './schema-builder';

/** Compile-time equality: `Expect<Equal<A, B>>` fails to type-check unless A and B match. */
type Equal<A, B> =
  (<T>() => T extends A ? 1 : 2) extends <T>() => T extends B ? 1 : 2 ? true : false;
type Expect<T extends true> = T;

const Color = { Red: 'red', Blue: 'blue' } as const;

const thing = object(
  {
    id: required(string({ description: 'id', maxLength: 8 })),
    color: enumOf(Color, { description: 'color', default: 'red' }),
    count: integer({ description: 'count', format: 'int32', minimum: 0 }),
    size: quantity({ description: 'size' }),
    tags: list(string({ description: 'tag', maxLength: 8 }), {
      description: 'tags',
      maxItems: 4,
      listType: 'set',
    }),
  },
  { description: 'a thing', rules: [{ rule: 'true', message: 'never fails' }] },
);

export type ThingTypeMatches = Expect<
  Equal<
    Infer<typeof thing>,
    {
      id: string;
      color?: 'red' | 'blue';
      count?: number;
      size?: string | number;
      tags?: string[];
    }
  >
>;

describe('schema builder', () => {
  it('emits one typed node per field and lists required properties', () => {
    expect(thing.schema).toEqual({
      type: 'object',
      description: 'a thing',
      'x-kubernetes-validations': [{ rule: 'true', message: 'never fails' }],
      required: ['id'],
      properties: {
        id: { type: 'string', description: 'id', maxLength: 8 },
        color: { type: 'string', description: 'color', default: 'red', enum: ['red', 'blue'] },
        count: { type: 'integer', description: 'count', format: 'int32', minimum: 0 },
        size: expect.objectContaining({
          anyOf: [{ type: 'integer' }, { type: 'string' }],
          'x-kubernetes-int-or-string': true,
        }),
        tags: {
          type: 'array',
          description: 'tags',
          maxItems: 4,
          items: { type: 'string', description: 'tag', maxLength: 8 },
          'x-kubernetes-list-type': 'set',
        },
      },
    });
  });

  it('leaves required out when no property is required, and omits empty rule lists', () => {
    const field = object(
      { a: string({ description: 'a', maxLength: 1 }) },
      { description: 'x', rules: [] },
    );
    expect(field.schema).not.toHaveProperty('required');
    expect(field.schema).not.toHaveProperty('x-kubernetes-validations');
    expect(field.isRequired).toBe(false);
    expect(required(field).isRequired).toBe(true);
  });

  it('emits list-map keys for a map list keyed by required properties', () => {
    const item = object(
      { name: required(string({ description: 'n', maxLength: 4 })) },
      { description: 'i' },
    );
    const field = list(item, {
      description: 'l',
      maxItems: 2,
      listType: 'map',
      listMapKeys: ['name'],
    });
    expect(field.schema['x-kubernetes-list-type']).toBe('map');
    expect(field.schema['x-kubernetes-list-map-keys']).toEqual(['name']);
  });

  it('refuses a map list whose key is optional in the item', () => {
    const item = object({ name: string({ description: 'n', maxLength: 4 }) }, { description: 'i' });
    expect(() =>
      list(item, { description: 'l', maxItems: 2, listType: 'map', listMapKeys: ['name'] }),
    ).toThrow('list: map key name must be a required property of the item');
  });

  it('refuses a map list without keys', () => {
    const item = object(
      { name: required(string({ description: 'n', maxLength: 4 })) },
      {
        description: 'i',
      },
    );
    expect(() => list(item, { description: 'l', maxItems: 2, listType: 'map' })).toThrow(
      'list: listType map needs listMapKeys',
    );
  });
});
