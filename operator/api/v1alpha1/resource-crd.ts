/**
 * Builds a CustomResourceDefinition (apiextensions.k8s.io/v1) for a namespaced
 * polychrome.dev kind with a status subresource: the usual envelope around spec and status.
 */
import type { CelRule, JsonSchema } from './schema-builder';

/** One `additionalPrinterColumns` entry. */
export interface PrinterColumn {
  readonly name: string;
  readonly type: 'string' | 'integer' | 'date';
  readonly jsonPath: string;
  readonly description: string;
}

/** The READY column: the Ready condition's status. */
export const READY_COLUMN: PrinterColumn = {
  name: 'Ready',
  type: 'string',
  jsonPath: '.status.conditions[?(@.type=="Ready")].status',
  description: 'Status of the Ready condition.',
};

/** The AGE column. */
export const AGE_COLUMN: PrinterColumn = {
  name: 'Age',
  type: 'date',
  jsonPath: '.metadata.creationTimestamp',
  description: 'Time since creation.',
};

/** Names of a kind, as its `*Resource` constant declares them. */
export interface ResourceNames {
  readonly group: string;
  readonly version: string;
  readonly kind: string;
  readonly listKind: string;
  readonly plural: string;
  readonly singular: string;
  readonly categories: readonly string[];
  readonly shortNames?: readonly string[];
}

/** What {@link objectSchema} and {@link customResourceDefinition} are built from. */
export interface ResourceDefinition {
  readonly names: ResourceNames;
  readonly description: string;
  readonly spec: JsonSchema;
  readonly status: JsonSchema;
  readonly printerColumns: readonly PrinterColumn[];
  /** CEL rules on the whole object (the only place `self.metadata.name` can be read). */
  readonly rootRules?: readonly CelRule[];
}

/** The whole object's schema. */
export function objectSchema(def: ResourceDefinition): JsonSchema {
  return {
    type: 'object',
    description: def.description,
    required: ['spec'],
    properties: {
      apiVersion: {
        type: 'string',
        description: 'Versioned schema of this representation of an object.',
      },
      kind: { type: 'string', description: 'REST resource this object represents.' },
      metadata: { type: 'object' },
      spec: def.spec,
      status: def.status,
    },
    ...(def.rootRules === undefined ? {} : { 'x-kubernetes-validations': def.rootRules }),
  };
}

/** The CRD, as a plain object ready to serialise (`hack/gen-crds.ts`). */
export function customResourceDefinition(def: ResourceDefinition) {
  const { names } = def;
  return {
    apiVersion: 'apiextensions.k8s.io/v1',
    kind: 'CustomResourceDefinition',
    metadata: { name: `${names.plural}.${names.group}` },
    spec: {
      group: names.group,
      names: {
        kind: names.kind,
        listKind: names.listKind,
        plural: names.plural,
        singular: names.singular,
        ...(names.shortNames === undefined ? {} : { shortNames: [...names.shortNames] }),
        categories: [...names.categories],
      },
      scope: 'Namespaced',
      versions: [
        {
          name: names.version,
          served: true,
          storage: true,
          subresources: { status: {} },
          additionalPrinterColumns: def.printerColumns,
          schema: { openAPIV3Schema: objectSchema(def) },
        },
      ],
    },
  } as const;
}
