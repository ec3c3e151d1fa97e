/**
 * The chart's values.yaml and values.schema.json, from one list of entries (each value, its
 * default, its comment and its schema), so a value has its description and its check in one
 * place. Pure: the defaults come from the caller (hack/chart/render.ts reads them from the
 * kustomize builds).
 */
import { stringify } from 'yaml';
import {
  COMPONENTS,
  CONVERSATIONS_NAMESPACE_VALUE,
  PLANE_IMAGES,
  VALUE_FIELDS,
  type ValueField,
} from './values';

/** One value of the chart. */
export interface ValueEntry {
  /** Dotted path under .Values. */
  readonly path: string;
  readonly value: unknown;
  readonly description: string;
  readonly schema: Record<string, unknown>;
}

const RESOURCE_LIST = {
  type: 'object',
  additionalProperties: { type: ['string', 'number'] },
};

/** The schema of a container's `resources` (requests and limits; what the kubelet takes). */
const RESOURCES_SCHEMA = {
  type: 'object',
  additionalProperties: false,
  properties: { requests: RESOURCE_LIST, limits: RESOURCE_LIST },
};

const QUANTITY = '^[0-9]+(\\.[0-9]+)?(Ki|Mi|Gi|Ti|Pi|Ei|k|M|G|T|P|E)?$';

function fieldSchema(field: ValueField): Readonly<Record<string, unknown>> {
  if (field.schema !== undefined) return field.schema;
  if (field.style === 'block') return RESOURCES_SCHEMA;
  if (field.value.endsWith('.replicas')) return { type: 'integer', minimum: 1 };
  return { type: 'string', pattern: QUANTITY };
}

/**
 * Every value in the order values.yaml lists them. `defaults` holds each field's default
 * (VALUE_FIELDS' values), `registry` the builds' image registry, `conversationsNamespace`
 * the namespace the control plane's Deployment names.
 */
export function valueEntries(
  defaults: ReadonlyMap<string, unknown>,
  registry: string,
  conversationsNamespace: string,
): ValueEntry[] {
  const entries: ValueEntry[] = [
    {
      path: 'image.registry',
      value: registry,
      description:
        'Where the three images are: <registry>/control-plane, <registry>/state and <registry>/harness.',
      schema: { type: 'string', pattern: '^[a-z0-9][a-z0-9.:_-]*(/[a-z0-9][a-z0-9._-]*)*$' },
    },
    {
      path: 'image.tag',
      value: '',
      description: "The images' tag; empty: the chart's appVersion.",
      schema: { type: 'string', pattern: '^([A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?$' },
    },
  ];
  for (const plane of PLANE_IMAGES) {
    entries.push({
      path: `${plane.key}.image.repository`,
      value: plane.image,
      description: `The repository of ${plane.what}'s image under image.registry.`,
      schema: { type: 'string', pattern: '^[a-z0-9][a-z0-9._-]*(/[a-z0-9][a-z0-9._-]*)*$' },
    });
    entries.push({
      path: `${plane.key}.image.digest`,
      value: '',
      description: `The image of ${plane.what} by digest (sha256:...), instead of the tag.`,
      schema: { type: 'string', pattern: '^(sha256:[a-f0-9]{64})?$' },
    });
    for (const field of VALUE_FIELDS.filter((f) => f.value.startsWith(`${plane.key}.`))) {
      entries.push(fieldEntry(field, defaults));
    }
  }
  for (const field of VALUE_FIELDS.filter((f) => f.value.startsWith('provisioner.'))) {
    entries.push(fieldEntry(field, defaults));
  }
  for (const component of COMPONENTS) {
    if (component.key === 'conversations') {
      entries.push({
        path: CONVERSATIONS_NAMESPACE_VALUE,
        value: conversationsNamespace,
        description:
          "The namespace the public API creates conversations in (the control plane's POLYCHROME_NEW_CONVERSATION_NAMESPACE); never `default`.",
        schema: {
          type: 'string',
          maxLength: 63,
          pattern: '^[a-z]([-a-z0-9]*[a-z0-9])?$',
          not: { const: 'default' },
        },
      });
    }
    entries.push({
      path: `${component.key}.${component.flag}`,
      value: false,
      description: `${component.description} (${component.source})`,
      schema: { type: 'boolean' },
    });
    for (const field of VALUE_FIELDS.filter((f) => f.component === component.key)) {
      entries.push(fieldEntry(field, defaults));
    }
  }
  return entries;
}

function fieldEntry(field: ValueField, defaults: ReadonlyMap<string, unknown>): ValueEntry {
  const path = field.value;
  if (!defaults.has(path)) throw new Error(`no default for the chart value ${path}`);
  return {
    path,
    value: defaults.get(path),
    description: field.description,
    schema: { ...fieldSchema(field) },
  };
}

interface Tree {
  children: Map<string, Tree>;
  entry?: ValueEntry;
}

function treeOf(entries: readonly ValueEntry[]): Tree {
  const root: Tree = { children: new Map() };
  for (const entry of entries) {
    let node = root;
    for (const key of entry.path.split('.')) {
      const next = node.children.get(key) ?? { children: new Map() };
      node.children.set(key, next);
      node = next;
    }
    node.entry = entry;
  }
  return root;
}

function emit(tree: Tree, indent: string): string[] {
  const lines: string[] = [];
  for (const [key, node] of tree.children) {
    const entry = node.entry;
    if (entry === undefined) {
      lines.push(`${indent}${key}:`, ...emit(node, `${indent}  `));
      continue;
    }
    lines.push(`${indent}# ${entry.description}`);
    const text = stringify(entry.value, { lineWidth: 0 }).trimEnd();
    if (typeof entry.value === 'object' && entry.value !== null) {
      lines.push(`${indent}${key}:`, ...text.split('\n').map((l) => `${indent}  ${l}`));
    } else {
      lines.push(`${indent}${key}: ${text}`);
    }
  }
  return lines;
}

/** values.yaml: every value with its default and a comment saying what it is. */
export function valuesYaml(entries: readonly ValueEntry[], header: string): string {
  return `${header}\n${emit(treeOf(entries), '').join('\n')}\n`;
}

function schemaOf(tree: Tree): Record<string, unknown> {
  if (tree.entry !== undefined) {
    return { description: tree.entry.description, ...tree.entry.schema };
  }
  const properties: Record<string, unknown> = {};
  for (const [key, node] of tree.children) properties[key] = schemaOf(node);
  return {
    type: 'object',
    additionalProperties: false,
    required: [...tree.children.keys()],
    properties,
  };
}

/** values.schema.json: every value's type and bounds; unknown keys are refused. */
export function valuesSchema(entries: readonly ValueEntry[]): string {
  const schema = {
    $schema: 'http://json-schema.org/draft-07/schema#',
    title: 'Polychrome chart values (generated by hack/build-chart.ts)',
    ...schemaOf(treeOf(entries)),
  };
  return `${JSON.stringify(schema, null, 2)}\n`;
}
