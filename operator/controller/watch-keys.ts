/** Mapping watch events to work-queue keys, and the list guard informers need. Pure. */
import type { KubernetesListObject, KubernetesObject } from '@kubernetes/client-node';
import { isPlainObject } from '../api/v1alpha1/schema-check';

/**
 * `namespace/name` keys of the owners of `obj` whose kind is `ownerKind` (a claim's or
 * pod's Conversation; a Sandbox's claim, which is named after its Conversation).
 */
export function ownerKeys(obj: KubernetesObject, ownerKind: string): string[] {
  const namespace = obj.metadata?.namespace;
  if (namespace === undefined) return [];
  return (obj.metadata?.ownerReferences ?? [])
    .filter((owner) => owner.kind === ownerKind)
    .map((owner) => `${namespace}/${owner.name}`);
}

/** A list response: an object whose `items` is an array of objects with metadata. */
export function isObjectList(value: unknown): value is KubernetesListObject<KubernetesObject> {
  return (
    isPlainObject(value) &&
    Array.isArray(value['items']) &&
    value['items'].every((item) => isPlainObject(item) && isPlainObject(item['metadata']))
  );
}
