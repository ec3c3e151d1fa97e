/**
 * A local check of a value against a structural schema: the OpenAPI keywords the builder
 * emits (type, required, enum, pattern, lengths, bounds, item counts, list uniqueness,
 * unknown fields). CEL rules (`x-kubernetes-validations`) are NOT evaluated: only a real
 * API server does that, in the integration tests. Messages follow the API server's
 * wording (`<path>: <what>`) so the same expectations serve both.
 *
 * Meant for tests and tools (samples, invalid cases); the API server remains the judge.
 */
import type { JsonSchema } from './schema-builder';

/** Plain-object guard for parsed JSON or YAML. */
export function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function show(value: unknown): string {
  return typeof value === 'string' ? JSON.stringify(value) : String(JSON.stringify(value));
}

function typeOf(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'array';
  if (typeof value === 'number') return Number.isInteger(value) ? 'integer' : 'number';
  return typeof value;
}

/**
 * Returns every violation of `schema` by `value`, as `<path>: <reason>` lines; empty when
 * the value passes.
 *
 * @param path - the field path of `value`, e.g. `spec`.
 */
export function checkAgainstSchema(schema: JsonSchema, value: unknown, path: string): string[] {
  const errors: string[] = [];

  if (schema['x-kubernetes-int-or-string'] === true) {
    if (typeof value === 'string') {
      checkString(schema, value, path, errors);
    } else if (typeOf(value) !== 'integer') {
      errors.push(`${path}: Invalid value: ${show(value)}: must be an integer or a string`);
    }
    return errors;
  }

  switch (schema.type) {
    case 'string':
      if (typeof value !== 'string') {
        errors.push(`${path}: Invalid value: ${show(value)}: must be of type string`);
      } else {
        checkString(schema, value, path, errors);
      }
      break;
    case 'integer':
      if (typeOf(value) !== 'integer' || typeof value !== 'number') {
        errors.push(`${path}: Invalid value: ${show(value)}: must be of type integer`);
      } else {
        if (schema.minimum !== undefined && value < schema.minimum) {
          errors.push(
            `${path}: Invalid value: ${value}: ${path} in body should be greater than or equal to ${schema.minimum}`,
          );
        }
        if (schema.maximum !== undefined && value > schema.maximum) {
          errors.push(
            `${path}: Invalid value: ${value}: ${path} in body should be less than or equal to ${schema.maximum}`,
          );
        }
      }
      break;
    case 'boolean':
      if (typeof value !== 'boolean') {
        errors.push(`${path}: Invalid value: ${show(value)}: must be of type boolean`);
      }
      break;
    case 'array':
      if (!Array.isArray(value)) {
        errors.push(`${path}: Invalid value: ${show(value)}: must be of type array`);
      } else {
        checkArray(schema, value, path, errors);
      }
      break;
    case 'object':
      if (!isPlainObject(value)) {
        errors.push(`${path}: Invalid value: ${show(value)}: must be of type object`);
      } else {
        checkObject(schema, value, path, errors);
      }
      break;
    case undefined:
      errors.push(`${path}: schema node has no type`);
      break;
  }
  return errors;
}

function checkString(schema: JsonSchema, value: string, path: string, errors: string[]): void {
  if (schema.enum !== undefined && !schema.enum.includes(value)) {
    const supported = schema.enum.map((v) => JSON.stringify(v)).join(', ');
    errors.push(`${path}: Unsupported value: ${show(value)}: supported values: ${supported}`);
  }
  if (schema.minLength !== undefined && value.length < schema.minLength) {
    errors.push(
      `${path}: Invalid value: ${show(value)}: ${path} in body should be at least ${schema.minLength} chars long`,
    );
  }
  if (schema.maxLength !== undefined && value.length > schema.maxLength) {
    errors.push(`${path}: Too long: may not be more than ${schema.maxLength} bytes`);
  }
  if (schema.pattern !== undefined && !new RegExp(schema.pattern).test(value)) {
    errors.push(
      `${path}: Invalid value: ${show(value)}: ${path} in body should match '${schema.pattern}'`,
    );
  }
  if (schema.format === 'date-time' && Number.isNaN(Date.parse(value))) {
    errors.push(`${path}: Invalid value: ${show(value)}: must be a date-time`);
  }
}

function checkArray(schema: JsonSchema, value: unknown[], path: string, errors: string[]): void {
  if (schema.maxItems !== undefined && value.length > schema.maxItems) {
    errors.push(`${path}: Too many: ${value.length}: must have at most ${schema.maxItems} items`);
  }
  if (schema.minItems !== undefined && value.length < schema.minItems) {
    errors.push(`${path}: Invalid value: ${value.length}: should have at least ${schema.minItems}`);
  }
  const seen = new Set<string>();
  const keys = schema['x-kubernetes-list-map-keys'] ?? [];
  value.forEach((item, i) => {
    const itemPath = `${path}[${i}]`;
    if (schema.items !== undefined)
      errors.push(...checkAgainstSchema(schema.items, item, itemPath));
    let identity: string | undefined;
    if (schema['x-kubernetes-list-type'] === 'set') identity = JSON.stringify(item);
    if (schema['x-kubernetes-list-type'] === 'map' && isPlainObject(item)) {
      identity = JSON.stringify(keys.map((k) => item[k]));
    }
    if (identity !== undefined) {
      if (seen.has(identity)) errors.push(`${itemPath}: Duplicate value: ${show(item)}`);
      seen.add(identity);
    }
  });
}

function checkObject(
  schema: JsonSchema,
  value: Record<string, unknown>,
  path: string,
  errors: string[],
): void {
  // An object without declared properties is opaque here; only `metadata` is declared so,
  // and the API server validates metadata itself.
  const properties = schema.properties;
  if (properties === undefined) return;
  for (const name of schema.required ?? []) {
    if (!(name in value)) errors.push(`${path}.${name}: Required value`);
  }
  for (const [name, child] of Object.entries(value)) {
    const childSchema = properties[name];
    if (childSchema === undefined) {
      errors.push(`${path}.${name}: unknown field`);
    } else {
      errors.push(...checkAgainstSchema(childSchema, child, `${path}.${name}`));
    }
  }
}
