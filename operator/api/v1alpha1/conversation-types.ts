/**
 * The Conversation API (polychrome.dev/v1alpha1): the resource's names and the object.
 * Its fields are declared once with the schema builder, `spec` in conversation-spec.ts and
 * `status` in conversation-status.ts: the CRD's OpenAPI schema and the TypeScript types are
 * inferred from the same declarations.
 *
 * The TypeScript types describe the object as a client may send it: a field with a schema
 * default is optional here even though objects read back from the API server carry it.
 * Readers use the `DEFAULT_*` constants (conversation-values.ts) for fields whose default
 * the schema cannot set.
 */
import type { ConversationSpec } from './conversation-spec';
import type { ConversationStatus } from './conversation-status';

/** Names of the Conversation resource. */
export const ConversationResource = {
  group: 'polychrome.dev',
  version: 'v1alpha1',
  apiVersion: 'polychrome.dev/v1alpha1',
  kind: 'Conversation',
  listKind: 'ConversationList',
  plural: 'conversations',
  singular: 'conversation',
  shortNames: ['conv'],
  categories: ['polychrome'],
} as const;

/**
 * The metadata fields Polychrome reads, in wire form (timestamps are RFC 3339 strings).
 * Declared here rather than imported so this folder stays free of client libraries.
 */
export interface ObjectMeta {
  name?: string;
  namespace?: string;
  uid?: string;
  generation?: number;
  resourceVersion?: string;
  creationTimestamp?: string;
  deletionTimestamp?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  finalizers?: string[];
}

/** A Conversation object. */
export interface Conversation {
  apiVersion: typeof ConversationResource.apiVersion;
  kind: typeof ConversationResource.kind;
  metadata: ObjectMeta;
  spec: ConversationSpec;
  status?: ConversationStatus;
}
