/**
 * Pure rules for per-conversation leases (coordination.k8s.io/v1), after client-go's
 * leader election: expiry is judged by when THIS process last saw the record change, not
 * by the holder's `renewTime`, so clock skew between replicas cannot make a live lease look
 * expired. No I/O here; `conversation-leases.ts` runs the decisions against the API server.
 */

/** What the API server holds, reduced to what the rules read. */
export interface LeaseRecord {
  holder: string;
  leaseDurationMs: number;
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
 */
export function decideAcquire(
  record: LeaseRecord | undefined,
  observation: Observation | undefined,
  me: string,
  nowMs: number,
): AcquireDecision {
  if (record === undefined) return { action: 'create' };
  if (record.holder === me) return { action: 'renew', fencingToken: record.transitions };
  if (record.holder === '') return { action: 'take_over', fencingToken: record.transitions + 1 };
  // A record we have not watched for a full duration may belong to a live holder.
  const since =
    observation !== undefined && observation.resourceVersion === record.resourceVersion
      ? observation.observedAtMs
      : nowMs;
  const expiresAtMs = since + record.leaseDurationMs;
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

/** The Lease object name for a conversation: its uid keeps reused names apart. */
export function leaseNameFor(conversationUid: string): string {
  return `conv-${conversationUid}`;
}
