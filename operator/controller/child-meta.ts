/**
 * Names shared by the Conversation reconciler's children and their builders: the
 * finalizer, the field manager, labels, the harness port and the owner reference. Pure.
 */
import type { Conversation } from '../api/v1alpha1/conversation-types';
import { ConversationResource } from '../api/v1alpha1/conversation-types';

/** The finalizer that holds a Conversation until its sandbox is released. */
export const CONVERSATION_FINALIZER = 'polychrome.dev/cleanup';

/** The one field manager the control plane writes with, in tests and in production. */
export const FIELD_MANAGER = 'polychrome-control-plane';

/** The harness's gRPC port inside its pod; `status.sandbox.endpoint` is `podIP:7070`. */
export const HARNESS_PORT = 7070;

/** Labels on every child. The uid (not the name) fits a label value's 63 characters. */
export const ChildLabel = {
  Name: 'app.kubernetes.io/name',
  PartOf: 'app.kubernetes.io/part-of',
  ManagedBy: 'app.kubernetes.io/managed-by',
  ConversationUid: 'polychrome.dev/conversation-uid',
} as const;
export type ChildLabel = (typeof ChildLabel)[keyof typeof ChildLabel];

/** Annotation on a pod we create: the hash of the desired pod spec it was built from. */
export const POD_SPEC_HASH_ANNOTATION = 'polychrome.dev/pod-spec-hash';

/** Label agent-sandbox puts on the pods of its Sandboxes (the hash of the Sandbox's name). */
export const SANDBOX_POD_LABEL = 'agents.x-k8s.io/sandbox-name-hash';

/** Sandbox annotation naming its pod (agent-sandbox). */
export const SANDBOX_POD_NAME_ANNOTATION = 'agents.x-k8s.io/pod-name';

/** A `metadata.ownerReferences` item, as sent to the API server. */
export interface OwnerReference {
  apiVersion: string;
  kind: string;
  name: string;
  uid: string;
  controller: boolean;
  blockOwnerDeletion: boolean;
}

/** Labels for a child of `conversation`. */
export function childLabels(conversation: Conversation): Record<string, string> {
  return {
    [ChildLabel.Name]: 'polychrome-harness',
    [ChildLabel.PartOf]: 'polychrome',
    [ChildLabel.ManagedBy]: FIELD_MANAGER,
    [ChildLabel.ConversationUid]: conversation.metadata.uid ?? '',
  };
}

/**
 * The controller owner reference to `conversation`: garbage collection removes the child
 * if the Conversation goes without our finalizer running.
 */
export function conversationOwnerReference(conversation: Conversation): OwnerReference {
  return {
    apiVersion: ConversationResource.apiVersion,
    kind: ConversationResource.kind,
    name: conversation.metadata.name ?? '',
    uid: conversation.metadata.uid ?? '',
    controller: true,
    blockOwnerDeletion: true,
  };
}

/** True when `owners` holds an owner reference to this Conversation (by uid). */
export function isOwnedBy(
  owners: readonly { readonly kind: string; readonly uid: string }[],
  conversation: Conversation,
): boolean {
  const uid = conversation.metadata.uid;
  return (
    uid !== undefined && owners.some((o) => o.kind === ConversationResource.kind && o.uid === uid)
  );
}
