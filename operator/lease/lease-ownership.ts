import { isLeaseHandle, type ConversationRef, type LeaseSource } from './lease-source';

/**
 * The reconciler's ownership check backed by these leases: a Conversation is owned while
 * this replica holds (or can take) its lease; otherwise it is retried when the lease could
 * next be taken.
 */
export function leaseOwnership(
  leases: LeaseSource,
  nowMs: () => number = Date.now,
): (ref: ConversationRef) => Promise<{ owned: true } | { owned: false; retryAfterMs: number }> {
  return async (ref) => {
    const got = await leases.tryAcquire(ref);
    return isLeaseHandle(got)
      ? { owned: true }
      : { owned: false, retryAfterMs: Math.max(100, got.retryAtMs - nowMs()) };
  };
}
