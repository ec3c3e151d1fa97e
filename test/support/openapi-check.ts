/**
 * A small checker of JSON values against the OpenAPI document's schemas, enough to catch
 * drift between what the server answers and what docs/api/openapi.json promises: `$ref`,
 * `type` (one or several), `required`, `properties`, `additionalProperties: false`,
 * `items`, `enum`, `pattern`, `minimum`. Not a full JSON Schema validator.
 */

type Json = unknown;

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** Follows a local `$ref` (`#/components/schemas/X`) in `document`. */
export function resolveRef(document: Json, ref: string): Record<string, unknown> {
  if (!ref.startsWith('#/')) throw new Error(`only local refs are supported, got ${ref}`);
  let node: unknown = document;
  for (const part of ref.slice(2).split('/')) {
    node = isObject(node) ? node[part] : undefined;
  }
  if (!isObject(node)) throw new Error(`unresolved ref ${ref}`);
  return node;
}

function typeOf(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'array';
  if (typeof value === 'number') return Number.isInteger(value) ? 'integer' : 'number';
  return typeof value;
}

function typeMatches(expected: string, actual: string): boolean {
  return expected === actual || (expected === 'number' && actual === 'integer');
}

/**
 * Problems of `value` against `schema` (empty: it fits).
 *
 * @param path where `value` sits, for the messages.
 */
export function checkSchema(
  document: Json,
  schema: Record<string, unknown>,
  value: unknown,
  path = '$',
): string[] {
  if (typeof schema.$ref === 'string') {
    return checkSchema(document, resolveRef(document, schema.$ref), value, path);
  }
  const problems: string[] = [];
  const actual = typeOf(value);
  const types = Array.isArray(schema.type)
    ? schema.type.filter((t): t is string => typeof t === 'string')
    : typeof schema.type === 'string'
      ? [schema.type]
      : [];
  if (types.length > 0 && !types.some((t) => typeMatches(t, actual))) {
    return [`${path}: expected ${types.join('|')}, got ${actual}`];
  }
  if (Array.isArray(schema.enum) && !schema.enum.includes(value)) {
    problems.push(`${path}: ${JSON.stringify(value)} is not one of ${JSON.stringify(schema.enum)}`);
  }
  if (typeof schema.pattern === 'string' && typeof value === 'string') {
    if (!new RegExp(schema.pattern, 'u').test(value)) {
      problems.push(`${path}: ${JSON.stringify(value)} does not match ${schema.pattern}`);
    }
  }
  if (typeof schema.minimum === 'number' && typeof value === 'number' && value < schema.minimum) {
    problems.push(`${path}: ${String(value)} is below ${String(schema.minimum)}`);
  }
  if (isObject(value)) {
    const properties = isObject(schema.properties) ? schema.properties : {};
    if (Array.isArray(schema.required)) {
      for (const name of schema.required) {
        if (typeof name === 'string' && !(name in value)) {
          problems.push(`${path}: required property ${name} is missing`);
        }
      }
    }
    for (const [name, field] of Object.entries(value)) {
      const fieldSchema = properties[name];
      if (isObject(fieldSchema)) {
        problems.push(...checkSchema(document, fieldSchema, field, `${path}.${name}`));
      } else if (schema.additionalProperties === false) {
        problems.push(`${path}: property ${name} is not in the schema`);
      } else if (isObject(schema.additionalProperties)) {
        problems.push(
          ...checkSchema(document, schema.additionalProperties, field, `${path}.${name}`),
        );
      }
    }
  }
  if (Array.isArray(value) && isObject(schema.items)) {
    const items = schema.items;
    value.forEach((item, index) => {
      problems.push(...checkSchema(document, items, item, `${path}[${String(index)}]`));
    });
  }
  return problems;
}

/**
 * The JSON schema the document gives for `method path` answering `status` (path as the
 * template, e.g. `/v1/conversations/{conversationId}`).
 *
 * @throws Error when the document has no such response or no JSON schema for it.
 */
export function responseSchema(
  document: Json,
  method: string,
  template: string,
  status: number,
): Record<string, unknown> {
  const paths = isObject(document) && isObject(document.paths) ? document.paths : {};
  const item = paths[template];
  const operation = isObject(item) ? item[method.toLowerCase()] : undefined;
  const responses = isObject(operation) ? operation.responses : undefined;
  let response: unknown = isObject(responses) ? responses[String(status)] : undefined;
  if (isObject(response) && typeof response.$ref === 'string') {
    response = resolveRef(document, response.$ref);
  }
  const content = isObject(response) ? response.content : undefined;
  const json = isObject(content) ? content['application/json'] : undefined;
  const schema = isObject(json) ? json.schema : undefined;
  if (!isObject(schema)) {
    throw new Error(`the document has no JSON answer ${String(status)} for ${method} ${template}`);
  }
  return schema;
}
