/**
 * A tiny builder for Kubernetes structural OpenAPI v3 schemas (apiextensions.k8s.io/v1
 * `JSONSchemaProps`). Each field is declared once; its JSON schema is the `schema` value and
 * its TypeScript type is inferred with {@link Infer}, so the CRD and the types the operator
 * reads cannot drift apart.
 *
 * Only the keywords Polychrome needs are supported, and every builder emits a typed node
 * (`type`, or the `x-kubernetes-int-or-string` form) so the result is always structural.
 */

/** A JSON value, as allowed in `default` and `enum`. */
export type JsonValue =
  string | number | boolean | null | readonly JsonValue[] | { readonly [key: string]: JsonValue };

/** Reasons a CEL rule may report (apiextensions.k8s.io/v1 `ValidationRule.reason`). */
export const CelReason = {
  FieldValueInvalid: 'FieldValueInvalid',
  FieldValueForbidden: 'FieldValueForbidden',
  FieldValueRequired: 'FieldValueRequired',
  FieldValueDuplicate: 'FieldValueDuplicate',
} as const;
export type CelReason = (typeof CelReason)[keyof typeof CelReason];

/** One `x-kubernetes-validations` entry. */
export interface CelRule {
  /** CEL expression; `self` is the value of the node that carries the rule. */
  readonly rule: string;
  /** Shown to the user by the API server; say which field is wrong and why. */
  readonly message: string;
  /** JSONPath relative to the node, so the error names the offending child field. */
  readonly fieldPath?: string;
  /** Error type the API server reports. @default FieldValueInvalid */
  readonly reason?: CelReason;
}

/** The subset of `JSONSchemaProps` the builders produce. */
export interface JsonSchema {
  readonly type?: 'object' | 'array' | 'string' | 'integer' | 'boolean';
  readonly description?: string;
  readonly format?: string;
  readonly default?: JsonValue;
  readonly enum?: readonly string[];
  readonly pattern?: string;
  readonly minLength?: number;
  readonly maxLength?: number;
  readonly minimum?: number;
  readonly maximum?: number;
  readonly minItems?: number;
  readonly maxItems?: number;
  readonly properties?: Readonly<Record<string, JsonSchema>>;
  readonly required?: readonly string[];
  readonly items?: JsonSchema;
  readonly anyOf?: readonly JsonSchema[];
  readonly 'x-kubernetes-int-or-string'?: true;
  readonly 'x-kubernetes-list-type'?: 'atomic' | 'set' | 'map';
  readonly 'x-kubernetes-list-map-keys'?: readonly string[];
  readonly 'x-kubernetes-validations'?: readonly CelRule[];
}

/**
 * A declared field: its schema, whether its parent object requires it, and (type-level
 * only) the TypeScript type of its value.
 */
export interface Field<T, R extends boolean = boolean> {
  readonly schema: JsonSchema;
  readonly isRequired: R;
  /** Never set at run time: carries `T` for {@link Infer}. */
  readonly __type?: T;
}

/** The TypeScript type of a field's value. */
export type Infer<F> = F extends Field<infer T> ? T : never;

/** Fields of an object, by property name. */
export type Props = Readonly<Record<string, Field<unknown>>>;

type RequiredKeys<P extends Props> = {
  [K in keyof P]: P[K] extends Field<unknown, true> ? K : never;
}[keyof P];
type OptionalKeys<P extends Props> = Exclude<keyof P, RequiredKeys<P>>;
type Flatten<T> = { [K in keyof T]: T[K] };

/** The TypeScript type of an object with these fields (optional unless `required`). */
export type InferObject<P extends Props> = Flatten<
  { [K in RequiredKeys<P>]: Infer<P[K]> } & { [K in OptionalKeys<P>]?: Infer<P[K]> }
>;

/** Options every builder takes. */
export interface CommonOptions {
  /** Shown by `kubectl explain`; write it for the person filling in the object. */
  readonly description: string;
  readonly rules?: readonly CelRule[];
}

function common(opts: CommonOptions): JsonSchema {
  return {
    description: opts.description,
    ...(opts.rules && opts.rules.length > 0 ? { 'x-kubernetes-validations': opts.rules } : {}),
  };
}

/** Marks a field as required by its parent object. */
export function required<T>(field: Field<T>): Field<T, true> {
  return { schema: field.schema, isRequired: true };
}

/** Options for {@link string}. */
export interface StringOptions extends CommonOptions {
  /** Every string needs a bound: CEL cost estimation and etcd object size depend on it. */
  readonly maxLength: number;
  readonly minLength?: number;
  /** RE2 syntax (the API server's); keep it also valid as a JavaScript RegExp. */
  readonly pattern?: string;
  readonly format?: 'date-time';
  readonly default?: string;
}

/** A string field. */
export function string(opts: StringOptions): Field<string, false> {
  return {
    schema: {
      type: 'string',
      ...common(opts),
      ...(opts.format !== undefined ? { format: opts.format } : {}),
      ...(opts.default !== undefined ? { default: opts.default } : {}),
      ...(opts.minLength !== undefined ? { minLength: opts.minLength } : {}),
      maxLength: opts.maxLength,
      ...(opts.pattern !== undefined ? { pattern: opts.pattern } : {}),
    },
    isRequired: false,
  };
}

/** Options for {@link enumOf}. */
export interface EnumOptions<V extends string> extends CommonOptions {
  readonly default?: V;
}

/**
 * A string field whose value is one of a closed set, given as the `as const` object that
 * declares the set (so adding a value to the set adds it to the schema).
 */
export function enumOf<O extends Readonly<Record<string, string>>>(
  values: O,
  opts: EnumOptions<O[keyof O]>,
): Field<O[keyof O], false> {
  return {
    schema: {
      type: 'string',
      ...common(opts),
      ...(opts.default !== undefined ? { default: opts.default } : {}),
      enum: Object.values(values),
    },
    isRequired: false,
  };
}

/** Options for {@link integer}. */
export interface IntegerOptions extends CommonOptions {
  readonly format: 'int32' | 'int64';
  readonly minimum?: number;
  readonly maximum?: number;
  readonly default?: number;
}

/** An integer field. */
export function integer(opts: IntegerOptions): Field<number, false> {
  return {
    schema: {
      type: 'integer',
      ...common(opts),
      format: opts.format,
      ...(opts.default !== undefined ? { default: opts.default } : {}),
      ...(opts.minimum !== undefined ? { minimum: opts.minimum } : {}),
      ...(opts.maximum !== undefined ? { maximum: opts.maximum } : {}),
    },
    isRequired: false,
  };
}

/**
 * A Kubernetes resource quantity (`500m`, `1Gi`, `2`): an int-or-string node with the
 * pattern `resource.Quantity` uses, as controller-gen emits it.
 */
export function quantity(opts: CommonOptions): Field<string | number, false> {
  return {
    schema: {
      ...common(opts),
      anyOf: [{ type: 'integer' }, { type: 'string' }],
      pattern: QUANTITY_PATTERN,
      'x-kubernetes-int-or-string': true,
    },
    isRequired: false,
  };
}

/** The pattern of `resource.Quantity` (k8s.io/apimachinery). */
export const QUANTITY_PATTERN =
  '^(\\+|-)?(([0-9]+(\\.[0-9]*)?)|(\\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\\+|-)?(([0-9]+(\\.[0-9]*)?)|(\\.[0-9]+))))?$';

/** Options for {@link list}. */
export interface ListOptions<K extends string> extends CommonOptions {
  /** Every list needs a bound, for the same reasons as strings. */
  readonly maxItems: number;
  readonly minItems?: number;
  /**
   * `set`: items are unique scalars; `map`: items are objects unique by `listMapKeys`
   * (duplicates are rejected and server-side apply merges by key). @default atomic
   */
  readonly listType?: 'atomic' | 'set' | 'map';
  readonly listMapKeys?: readonly K[];
}

/** Property names of the object an item field describes (for `listMapKeys`). */
type ItemKeys<F> = F extends Field<infer T> ? (T extends object ? keyof T & string : never) : never;

/**
 * A list field.
 *
 * @throws Error when `listType` is `map` and a map key is not a required scalar property
 *   of the item (the API server refuses such a CRD).
 */
export function list<F extends Field<unknown>>(
  item: F,
  opts: ListOptions<ItemKeys<F>>,
): Field<Infer<F>[], false> {
  const listType = opts.listType ?? 'atomic';
  if (listType === 'map') {
    const keys: readonly string[] = opts.listMapKeys ?? [];
    if (keys.length === 0) throw new Error('list: listType map needs listMapKeys');
    for (const key of keys) {
      if (!(item.schema.required ?? []).includes(key)) {
        throw new Error(`list: map key ${key} must be a required property of the item`);
      }
    }
  }
  return {
    schema: {
      type: 'array',
      ...common(opts),
      ...(opts.minItems !== undefined ? { minItems: opts.minItems } : {}),
      maxItems: opts.maxItems,
      items: item.schema,
      'x-kubernetes-list-type': listType,
      ...(listType === 'map' && opts.listMapKeys
        ? { 'x-kubernetes-list-map-keys': opts.listMapKeys }
        : {}),
    },
    isRequired: false,
  };
}

/** Options for {@link object}. */
export interface ObjectOptions extends CommonOptions {
  /**
   * Only `{}` is useful: it makes the API server create the object when it is missing so
   * the defaults of its fields apply too.
   */
  readonly default?: Readonly<Record<string, never>>;
}

/** An object field with a fixed set of properties; unknown properties are pruned. */
export function object<P extends Props>(
  props: P,
  opts: ObjectOptions,
): Field<InferObject<P>, false> {
  const requiredNames = Object.keys(props).filter((name) => props[name]?.isRequired === true);
  const properties: Record<string, JsonSchema> = {};
  for (const [name, field] of Object.entries(props)) properties[name] = field.schema;
  return {
    schema: {
      type: 'object',
      ...common(opts),
      ...(opts.default !== undefined ? { default: opts.default } : {}),
      ...(requiredNames.length > 0 ? { required: requiredNames } : {}),
      properties,
    },
    isRequired: false,
  };
}
