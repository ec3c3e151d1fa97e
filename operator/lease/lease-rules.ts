/**
 * Pure rules for per-conversation leases (coordination.k8s.io/v1), after client-go's
 * leader election: expiry is judged by when THIS process last saw the record change, not
 * by the holder's `renewTime`, so clock skew between replicas cannot make a live lease look
 * expired. No I/O here; `conversation-leases.ts` runs the decisions against the API server.
 *
 * What the rules take from the record (docs/operator.md, "Conversation leases"): the holder
 * (a name, compared with this replica's own), the transitions count (the fencing token) and
 * the resourceVersion (set by the API server). How long a lease lasts is this control
 * plane's configuration, never the record's `leaseDurationSeconds`: a record that names a
 * huge duration cannot keep a conversation locked, nor a tiny one hand it over early.
 */
import { partitionOf } from '../../common/partition-name';

/** What the API server holds, reduced to what the rules read. */
export interface LeaseRecord {
  holder: string;
  /** Incremented each time the lease changes hands; the fencing token. */
  transitions: number;
  resourceVersion: string;
}

/** When this process first saw the record at its current resourceVersion. */
export interface Observation {
  resourceVersion: string;
  observedAtMs: number;
}

/** What to do about a lease this process wants. */
export type AcquireDecision =
  | { action: 'create' }
  | { action: 'renew'; fencingToken: number }
  | { action: 'take_over'; fencingToken: number }
  | { action: 'wait'; holder: string; retryAtMs: number };

/**
 * Decides how `me` can hold the lease: create it when absent, renew it when it is already
 * ours, take it over (one more transition) when it was released or its holder stopped
 * renewing for a whole lease duration as observed here; otherwise wait.
 *
 * @param leaseDurationMs this control plane's configured lease duration: the only one
 *   expiry is judged by.
 */
export function decideAcquire(
  record: LeaseRecord | undefined,
  observation: Observation | undefined,
  me: string,
  nowMs: number,
  leaseDurationMs: number,
): AcquireDecision {
  if (record === undefined) return { action: 'create' };
  if (record.holder === me) return { action: 'renew', fencingToken: record.transitions };
  if (record.holder === '') return { action: 'take_over', fencingToken: record.transitions + 1 };
  // A record we have not watched for a full duration may belong to a live holder.
  const since =
    observation !== undefined && observation.resourceVersion === record.resourceVersion
      ? observation.observedAtMs
      : nowMs;
  const expiresAtMs = since + leaseDurationMs;
  if (nowMs >= expiresAtMs) return { action: 'take_over', fencingToken: record.transitions + 1 };
  return { action: 'wait', holder: record.holder, retryAtMs: expiresAtMs };
}

/**
 * The observation to keep after reading `record` at `nowMs`: unchanged while the
 * resourceVersion stays the same, restarted when it moves.
 */
export function observe(
  record: LeaseRecord,
  previous: Observation | undefined,
  nowMs: number,
): Observation {
  if (previous !== undefined && previous.resourceVersion === record.resourceVersion)
    return previous;
  return { resourceVersion: record.resourceVersion, observedAtMs: nowMs };
}

/**
 * True when a lease we hold must be treated as lost even though nobody took it: renewals
 * have failed for longer than the lease lasts, so another replica may already act.
 */
export function isHeldLeaseStale(
  lastRenewedAtMs: number,
  leaseDurationMs: number,
  nowMs: number,
): boolean {
  return nowMs - lastRenewedAtMs >= leaseDurationMs;
}

/**
 * The Lease object name for a conversation. Every conversation's Lease is in the control
 * plane's own namespace: the uid (unique in the cluster, unlike a name, which another
 * namespace or a later Conversation may reuse) keeps them apart.
 */
export function leaseNameFor(conversationUid: string): string {
  // Named as the conversation's journal partition: one name for both in logs and kubectl.
  return partitionOf(conversationUid);
}

/** Labels on a conversation's Lease, by which an operator finds it (docs/operator.md). */
export const LeaseLabel = {
  ManagedBy: 'app.kubernetes.io/managed-by',
  ConversationNamespace: 'polychrome.dev/conversation-namespace',
  Conversation: 'polychrome.dev/conversation',
  ConversationUid: 'polychrome.dev/conversation-uid',
} as const;
export type LeaseLabel = (typeof LeaseLabel)[keyof typeof LeaseLabel];

// A label value: at most 63 characters, alphanumeric at both ends.
const LABEL_VALUE = /^(?:[A-Za-z0-9](?:[-_.A-Za-z0-9]{0,61}[A-Za-z0-9])?)$/u;

/**
 * The labels of the Lease of the conversation `namespace/name` with `uid`. The name is left
 * out when it is too long for a label value (a Conversation name may have 253 characters);
 * the uid label always finds the Lease.
 */
export function leaseLabelsFor(ref: {
  namespace: string;
  name: string;
  uid: string;
}): Partial<Record<LeaseLabel, string>> {
  const base = {
    [LeaseLabel.ManagedBy]: 'polychrome',
    [LeaseLabel.ConversationNamespace]: ref.namespace,
    [LeaseLabel.ConversationUid]: ref.uid,
  };
  return LABEL_VALUE.test(ref.name) ? { ...base, [LeaseLabel.Conversation]: ref.name } : base;
}
