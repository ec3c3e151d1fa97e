import type { PrinterColumn } from './resource-crd';
import type { JsonSchema } from './schema-builder';
import { conversationSpecField } from './conversation-spec';
import { conversationStatusField } from './conversation-status';
import { ConversationResource } from './conversation-types';

/**
 * `kubectl get conversations` columns after the implicit NAME: PHASE, READY, AGENT, MODEL, AGE
 * (docs/design.md, "Kubernetes objects"). kubectl upper-cases the names.
 */
export const conversationPrinterColumns: readonly PrinterColumn[] = [
  {
    name: 'Phase',
    type: 'string',
    jsonPath: '.status.phase',
    description: 'Display phase derived from the conditions.',
  },
  {
    name: 'Ready',
    type: 'string',
    jsonPath: '.status.conditions[?(@.type=="Ready")].status',
    description: 'Status of the Ready condition.',
  },
  {
    name: 'Agent',
    type: 'string',
    jsonPath: '.status.agent',
    description: 'The agent that answers the next turn (a Conversation that names an Agent).',
  },
  {
    name: 'Model',
    type: 'string',
    jsonPath: '.spec.agent.model',
    description: 'Model the agent uses.',
  },
  {
    name: 'Age',
    type: 'date',
    jsonPath: '.metadata.creationTimestamp',
    description: 'Time since creation.',
  },
];

/** The whole object's schema: the usual envelope around spec and status. */
export const conversationSchema: JsonSchema = {
  type: 'object',
  description:
    'A durable, auditable AI-agent conversation: one isolated sandbox, every turn journaled.',
  required: ['spec'],
  properties: {
    apiVersion: {
      type: 'string',
      description: 'Versioned schema of this representation of an object.',
    },
    kind: { type: 'string', description: 'REST resource this object represents.' },
    metadata: { type: 'object' },
    spec: conversationSpecField.schema,
    status: conversationStatusField.schema,
  },
};

/**
 * The Conversation CustomResourceDefinition (apiextensions.k8s.io/v1), as a plain object
 * ready to serialise; `hack/gen-crds.ts` writes it to config/crd/bases.
 */
export const conversationCrd = {
  apiVersion: 'apiextensions.k8s.io/v1',
  kind: 'CustomResourceDefinition',
  metadata: { name: `${ConversationResource.plural}.${ConversationResource.group}` },
  spec: {
    group: ConversationResource.group,
    names: {
      kind: ConversationResource.kind,
      listKind: ConversationResource.listKind,
      plural: ConversationResource.plural,
      singular: ConversationResource.singular,
      shortNames: [...ConversationResource.shortNames],
      categories: [...ConversationResource.categories],
    },
    scope: 'Namespaced',
    versions: [
      {
        name: ConversationResource.version,
        served: true,
        storage: true,
        subresources: { status: {} },
        additionalPrinterColumns: conversationPrinterColumns,
        schema: { openAPIV3Schema: conversationSchema },
      },
    ],
  },
} as const;
